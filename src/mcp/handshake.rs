//! Opening a connection and listing its tools. The modern (stateless) revision is detected as
//! the spec says: `server/discover` first; a result or a modern error means modern, any other
//! error or silence means the legacy handshake (`initialize`, then `notifications/initialized`).

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::client::{client_info, Client, Failure};

/// The legacy versions this client speaks; the first is what it asks for.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18"];
/// How long the probe may stay unanswered before the server is taken for a legacy one.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pages of `tools/list` read at most, and tools kept at most per server.
const MAX_PAGES: usize = 50;
const MAX_TOOLS: usize = 500;

/// A tool as the server lists it (the fields gjc uses).
#[derive(Debug, Clone, Deserialize)]
pub struct ToolDef {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(rename = "inputSchema", default)]
    pub input_schema: Value,
}

/// Which era the server speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    Modern,
    Legacy(String),
}

/// The modern errors (-32020 to -32022) say the server speaks the modern revision.
fn is_modern_error(code: i64) -> bool {
    (-32022..=-32020).contains(&code)
}

/// What the probe found, per server command line, for this process (the spec's cache): a
/// restarted server is not probed again.
static ERAS: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());

fn cached_era(key: &str) -> Option<bool> {
    let eras = ERAS.lock().unwrap_or_else(|e| e.into_inner());
    eras.iter()
        .find(|(k, _)| k == key)
        .map(|(_, modern)| *modern)
}

fn remember_era(key: &str, modern: bool) {
    let mut eras = ERAS.lock().unwrap_or_else(|e| e.into_inner());
    if !eras.iter().any(|(k, _)| k == key) && eras.len() < 256 {
        eras.push((key.to_string(), modern));
    }
}

/// Probes (unless this server's era is known), then shakes hands as the answer says. `key`
/// names the server for the cache (its command line).
pub fn open(client: &Client, key: &str, timeout: Duration) -> Result<Era, String> {
    let never = || false;
    let modern = match cached_era(key) {
        Some(modern) => modern,
        None => {
            let wait = PROBE_TIMEOUT.min(timeout);
            let probe = client.request("server/discover", json!({}), wait, &never, None);
            let modern = match probe {
                Ok(_) => true,
                Err(Failure::Rpc { code, .. }) => is_modern_error(code),
                Err(Failure::Closed(why)) => return Err(why),
                Err(_) => false,
            };
            remember_era(key, modern);
            modern
        }
    };
    if modern {
        client.set_modern();
        return Ok(Era::Modern);
    }
    let params = json!({
        "protocolVersion": LEGACY_VERSIONS[0],
        "capabilities": {},
        "clientInfo": client_info(),
    });
    let result = client
        .request("initialize", params, timeout, &never, None)
        .map_err(|e| format!("initialize failed: {e}"))?;
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !LEGACY_VERSIONS.contains(&version) {
        return Err(format!(
            "the server speaks MCP version {version:?}; gjc speaks {}",
            LEGACY_VERSIONS.join(" and ")
        ));
    }
    client.notify("notifications/initialized", json!({}));
    Ok(Era::Legacy(version.to_string()))
}

/// Every page of `tools/list`.
pub fn list_tools(client: &Arc<Client>, timeout: Duration) -> Result<Vec<ToolDef>, String> {
    let never = || false;
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = client
            .request("tools/list", params, timeout, &never, None)
            .map_err(|e| format!("tools/list failed: {e}"))?;
        let listed = page.get("tools").cloned().unwrap_or(Value::Null);
        let listed: Vec<Value> = serde_json::from_value(listed)
            .map_err(|e| format!("tools/list answered no tool list: {e}"))?;
        for tool in listed {
            // One malformed tool is left out, not the server.
            match serde_json::from_value::<ToolDef>(tool) {
                Ok(def) if !def.name.is_empty() => tools.push(def),
                _ => log::debug!("an MCP tool with no usable name was left out"),
            }
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() || tools.len() >= MAX_TOOLS {
            break;
        }
    }
    tools.truncate(MAX_TOOLS);
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::transport::{Deliver, Incoming, Transport};
    use std::sync::{Arc, Mutex};

    type Answer = fn(&Value) -> Option<Value>;

    /// A server in-process: each request is answered at once by `answer` (`None`: silence).
    struct Scripted {
        deliver: Deliver,
        answer: Answer,
        seen: Arc<Mutex<Vec<Value>>>,
    }

    impl Transport for Scripted {
        fn send(&self, message: &Value) -> Result<(), String> {
            self.seen.lock().unwrap().push(message.clone());
            if let Some(result) = (self.answer)(message) {
                let id = message["id"].clone();
                let reply = if result.get("code").is_some() {
                    json!({"jsonrpc": "2.0", "id": id, "error": result})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "result": result})
                };
                (self.deliver)(Incoming::Message(reply));
            }
            Ok(())
        }
        fn close(&self) {}
    }

    type Seen = Arc<Mutex<Vec<Value>>>;

    fn connect(key: &str, answer: Answer) -> (Result<Era, String>, Vec<Value>, Arc<Client>, Seen) {
        let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
        let s = seen.clone();
        let client = Client::new(
            |_| {},
            move |deliver| {
                Ok(Box::new(Scripted {
                    deliver,
                    answer,
                    seen: s,
                }) as Box<dyn Transport>)
            },
        )
        .unwrap();
        let era = open(&client, key, Duration::from_secs(2));
        let sent = seen.lock().unwrap().clone();
        (era, sent, client, seen)
    }

    #[test]
    fn a_legacy_server_gets_initialize_after_the_probe_and_is_not_probed_again() {
        let legacy: Answer = |m| match m["method"].as_str()? {
            "server/discover" => Some(json!({"code": -32601, "message": "Method not found"})),
            "initialize" => Some(json!({"protocolVersion": "2025-06-18", "capabilities": {}})),
            _ => None,
        };
        let (era, sent, _, _) = connect("legacy-test", legacy);
        assert_eq!(era, Ok(Era::Legacy("2025-06-18".into())));
        let methods: Vec<&str> = sent.iter().filter_map(|m| m["method"].as_str()).collect();
        assert_eq!(
            methods,
            ["server/discover", "initialize", "notifications/initialized"]
        );
        let (_, again, _, _) = connect("legacy-test", legacy);
        assert_eq!(again[0]["method"], "initialize", "the era is cached");

        let old: Answer = |m| match m["method"].as_str()? {
            "initialize" => Some(json!({"protocolVersion": "2024-11-05"})),
            _ => Some(json!({"code": -32601, "message": "no"})),
        };
        assert!(connect("old-test", old)
            .0
            .unwrap_err()
            .contains("2024-11-05"));
    }

    #[test]
    fn a_modern_server_is_not_initialized_and_every_request_carries_its_meta() {
        let modern: Answer = |m| match m["method"].as_str()? {
            "server/discover" => Some(json!({"supportedVersions": ["2026-07-28"]})),
            "tools/list" => {
                Some(json!({"tools": [{"name": "a", "inputSchema": {"type": "object"}}]}))
            }
            _ => None,
        };
        let (era, sent, client, seen) = connect("modern-test", modern);
        assert_eq!(era, Ok(Era::Modern));
        assert_eq!(sent.len(), 1);
        let tools = list_tools(&client, Duration::from_secs(1)).unwrap();
        assert_eq!(tools[0].name, "a");
        let listed = seen.lock().unwrap()[1].clone();
        let meta = &listed["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{listed}"
        );
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "gjc");
    }

    #[test]
    fn tools_are_listed_page_by_page() {
        let paged: Answer = |m| match m["method"].as_str()? {
            "tools/list" if m["params"]["cursor"] == "2" => {
                Some(json!({"tools": [{"name": "second"}, {"noname": 1}]}))
            }
            "tools/list" => Some(json!({"tools": [{"name": "first"}], "nextCursor": "2"})),
            "server/discover" => Some(json!({})),
            _ => None,
        };
        let (_, _, client, _) = connect("paged-test", paged);
        let tools = list_tools(&client, Duration::from_secs(1)).unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["first", "second"]);
    }
}
