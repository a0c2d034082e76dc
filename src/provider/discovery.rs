//! Asking an OpenAI-compatible server which models it serves (`GET {baseUrl}/models`), so that a
//! host can offer a picker. `get_available_models` asks on a thread of its own, never on the
//! session thread, and every wait is short: all servers are asked at once, each for at most
//! `TIMEOUT`, and a list, once received, is kept for the life of the process (`kept` answers
//! from those without asking). A failure is remembered for `RETRY_AFTER`, so a server that is
//! down costs one refused connection (or one timeout) per interval, not per call.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::catalog::Api;

/// The longest one server may take to answer, connection included.
pub const TIMEOUT: Duration = Duration::from_millis(1500);
/// How long a failed attempt stands before the server is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Bounds on what a server may send: the body, the number of models, the length of an id.
const BODY_LIMIT: u64 = 4 << 20;
const MAX_MODELS: usize = 2_000;
const MAX_ID: usize = 256;

/// The APIs whose servers answer `GET /models` with OpenAI's list format.
pub fn speaks_models_list(api: Api) -> bool {
    matches!(api, Api::OpenAiCompletions | Api::OpenAiResponses)
}

/// One server to ask.
pub struct Target {
    base_url: String,
    key: Option<String>,
    headers: BTreeMap<String, String>,
}

impl Target {
    pub fn new(base_url: &str, key: Option<String>, headers: &BTreeMap<String, String>) -> Target {
        Target {
            base_url: base_url.to_string(),
            key,
            headers: headers.clone(),
        }
    }
}

enum Entry {
    Listed(Vec<String>),
    Failed(Instant),
}

fn cache() -> &'static Mutex<HashMap<String, Entry>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// The model ids each target serves, in the targets' order; empty for a server that did not
/// answer (the reason is logged at debug level).
pub fn model_ids<'a>(targets: impl Iterator<Item = &'a Target>) -> Vec<Vec<String>> {
    let targets: Vec<&Target> = targets.collect();
    let cached: Vec<Option<Vec<String>>> = targets.iter().map(|t| cached(&t.base_url)).collect();
    let fetched: Vec<Option<Result<Vec<String>, String>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .zip(&cached)
            .map(|(t, c)| c.is_none().then(|| scope.spawn(|| fetch(t))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("discovery panicked".into()))
                })
            })
            .collect()
    });
    let mut store = cache().lock().unwrap_or_else(|e| e.into_inner());
    targets
        .iter()
        .zip(cached.into_iter().zip(fetched))
        .map(|(t, (cached, fetched))| match (cached, fetched) {
            (Some(ids), _) => ids,
            (None, Some(Ok(ids))) => {
                store.insert(t.base_url.clone(), Entry::Listed(ids.clone()));
                ids
            }
            (None, Some(Err(e))) => {
                log::debug!("cannot list the models of {}: {e}", t.base_url);
                store.insert(t.base_url.clone(), Entry::Failed(Instant::now()));
                Vec::new()
            }
            (None, None) => Vec::new(),
        })
        .collect()
}

/// Each target's model ids when every target has a stored answer, so nobody need be asked.
pub fn kept<'a>(targets: impl Iterator<Item = &'a Target>) -> Option<Vec<Vec<String>>> {
    targets.map(|t| cached(&t.base_url)).collect()
}

/// A stored answer: the list, or an empty one while a recent failure stands.
fn cached(base_url: &str) -> Option<Vec<String>> {
    let store = cache().lock().unwrap_or_else(|e| e.into_inner());
    match store.get(base_url)? {
        Entry::Listed(ids) => Some(ids.clone()),
        Entry::Failed(at) if at.elapsed() < RETRY_AFTER => Some(Vec::new()),
        Entry::Failed(_) => None,
    }
}

fn fetch(target: &Target) -> Result<Vec<String>, String> {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(TIMEOUT))
        .user_agent(concat!("gjc/", env!("CARGO_PKG_VERSION")))
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut request = agent.get(format!("{}/models", target.base_url));
    for (k, v) in &target.headers {
        request = request.header(k, v);
    }
    if let Some(key) = &target.key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let mut response = request.call().map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(format!("HTTP {status}"));
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(BODY_LIMIT)
        .read_to_vec()
        .map_err(|e| e.to_string())?;
    parse(&body)
}

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ListedModel>,
}

#[derive(Deserialize)]
struct ListedModel {
    id: String,
}

/// The ids of an OpenAI-format model list (`{"data": [{"id": ...}, ...]}`), sorted, without
/// duplicates, empty or overlong ids.
pub fn parse(body: &[u8]) -> Result<Vec<String>, String> {
    let list: ModelList =
        serde_json::from_slice(body).map_err(|e| format!("not a model list: {e}"))?;
    let mut ids: Vec<String> = list
        .data
        .into_iter()
        .map(|m| m.id)
        .filter(|id| !id.trim().is_empty() && id.len() <= MAX_ID)
        .collect();
    ids.sort();
    ids.dedup();
    ids.truncate(MAX_MODELS);
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_openai_lists() {
        let body = br#"{"object":"list","data":[{"id":"qwen3:8b","object":"model"},{"id":""},{"id":"llama3.2"},{"id":"qwen3:8b"}]}"#;
        assert_eq!(parse(body).unwrap(), vec!["llama3.2", "qwen3:8b"]);
        assert!(parse(b"{\"models\":[]}").is_err());
        assert!(parse(b"<html>").is_err());
    }

    #[test]
    fn an_unreachable_server_lists_nothing_quickly() {
        // Port 9 (discard) on loopback: refused on any ordinary machine.
        let target = Target::new("http://127.0.0.1:9/v1", None, &BTreeMap::new());
        let started = Instant::now();
        assert_eq!(model_ids([&target].into_iter()), vec![Vec::<String>::new()]);
        assert!(started.elapsed() <= TIMEOUT + Duration::from_millis(500));
        // Remembered: the second call asks nobody.
        assert!(cached("http://127.0.0.1:9/v1").is_some());
    }
}
