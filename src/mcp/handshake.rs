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

/// Probes, then shakes hands as the answer says.
pub fn open(client: &Client, timeout: Duration) -> Result<Era, String> {
    let never = || false;
    let probe = client.request("server/discover", json!({}), PROBE_TIMEOUT, &never, None);
    match probe {
        Ok(_) => {
            client.set_modern();
            return Ok(Era::Modern);
        }
        Err(Failure::Rpc { code, .. }) if is_modern_error(code) => {
            client.set_modern();
            return Ok(Era::Modern);
        }
        Err(Failure::Closed(why)) => return Err(why),
        Err(_) => {}
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
