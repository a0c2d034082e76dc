//! The streamable HTTP transport, over the blocking HTTP client the providers use. Every message
//! is a POST to the one endpoint (`Accept: application/json, text/event-stream`). A notification
//! or a response is posted on the calling thread and gets 202; a request's answer (one JSON body,
//! or an SSE stream that may carry server requests and notifications before the reply) is read
//! on a thread of its own (`http_read`), which hands every message to the client exactly as the
//! stdio reader does. Each POST in flight has its own `ureq::Agent`, so cancelling a request
//! shuts exactly its socket down and its reader stops; an agent whose answer was read to the end
//! is kept for the next POST (its connection with it).
//!
//! The session id the server gives with the `initialize` reply (`Mcp-Session-Id`) and the
//! negotiated version (`MCP-Protocol-Version`) go with every later request; `close` ends the
//! session with a DELETE. Once a handshake-era server accepted `notifications/initialized`, one
//! GET stream carries what it sends outside any request (`http_get`). Configured headers go with every request too; their values are secrets and are
//! never logged. Redirects are not followed: a configured token must not travel to wherever a
//! server points, so a 3xx is a failure that names where it pointed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use super::http_get::{self, Listener};
use super::http_read;
use super::transport::{Deliver, Transport};

/// Idle agents (each with its kept-alive connection) kept for the next POST.
const IDLE_AGENTS: usize = 4;
/// How long ending the session (DELETE) may take when the connection closes.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest session id accepted (the spec's ids are UUIDs or similar tokens).
const MAX_SESSION_ID: usize = 256;
/// Headers the transport sets itself; a configured one of these names is left out.
const OWN_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "host",
];

/// How long the parts of an exchange may take.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub connect: Duration,
    /// A request's whole exchange, its answer read to the end (the client gives up sooner and
    /// cancels; this bounds a reader nobody cancels).
    pub request: Duration,
    /// A notification's or a response's POST.
    pub notify: Duration,
}

/// What one answer may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One message (a JSON body, one SSE event), as stdio's line cap.
    pub message: usize,
    /// A whole response body, all its events together.
    pub response: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            message: super::stdio::MAX_MESSAGE_BYTES,
            response: 2 * super::stdio::MAX_MESSAGE_BYTES as u64,
        }
    }
}

pub struct Http {
    shared: Arc<Shared>,
}

/// What the transport and its readers share.
pub(super) struct Shared {
    pub url: String,
    headers: Vec<(String, String)>,
    pub deliver: Deliver,
    pub timeouts: Timeouts,
    pub limits: Limits,
    /// `Mcp-Session-Id`, once the `initialize` reply gave one.
    session: Mutex<Option<String>>,
    /// The negotiated version, sent as `MCP-Protocol-Version` once known.
    version: Mutex<Option<String>>,
    closed: AtomicBool,
    /// Requests in flight by their id (as JSON text), each with the agent reading its answer.
    inflight: Mutex<HashMap<String, ureq::Agent>>,
    idle: Mutex<Vec<ureq::Agent>>,
    /// The GET stream, once opened (at most one per connection, never opened twice).
    listener: Mutex<Option<Listener>>,
}

impl std::fmt::Debug for Http {
    // Header values are secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .shared
            .headers
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        f.debug_struct("Http")
            .field("url", &self.shared.url)
            .field("headers", &names)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Only `http://` and `https://` URLs with a host are servers.
pub fn check_url(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
        .ok_or("the url must start with http:// or https://")?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("the url has no host".into());
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the url contains spaces or control characters".into());
    }
    Ok(())
}

/// A header a request can carry: a token name and a value without control characters (the
/// error names the header, never its value).
fn check_header(name: &str, value: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(format!("header {name:?} is not a valid header name"));
    }
    if value
        .chars()
        .any(|c| (c.is_control() && c != '\t') || !c.is_ascii())
    {
        return Err(format!(
            "the value of header {name} has characters a header cannot carry"
        ));
    }
    Ok(())
}

/// A transport to the server at `url`. Nothing is sent yet: the first request connects.
pub fn connect(
    url: &str,
    headers: &[(String, String)],
    timeouts: Timeouts,
    limits: Limits,
    deliver: Deliver,
) -> Result<Http, String> {
    check_url(url)?;
    let mut kept = Vec::new();
    for (name, value) in headers {
        check_header(name, value)?;
        if OWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            log::warn!("MCP header {name} is set by gjc itself; the configured one is left out");
            continue;
        }
        kept.push((name.clone(), value.clone()));
    }
    Ok(Http {
        shared: Arc::new(Shared {
            url: url.to_string(),
            headers: kept,
            deliver,
            timeouts,
            limits,
            session: Mutex::default(),
            version: Mutex::default(),
            closed: AtomicBool::new(false),
            inflight: Mutex::default(),
            idle: Mutex::default(),
            listener: Mutex::default(),
        }),
    })
}

impl Shared {
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub fn has_session(&self) -> bool {
        lock(&self.session).is_some()
    }

    /// Keeps the session id of the `initialize` reply.
    pub fn set_session(&self, id: &str) -> Result<(), String> {
        if id.is_empty()
            || id.len() > MAX_SESSION_ID
            || !id.bytes().all(|b| (0x21..=0x7e).contains(&b))
        {
            return Err(
                "the server gave a session id that is not 1-256 visible ASCII characters".into(),
            );
        }
        *lock(&self.session) = Some(id.to_string());
        Ok(())
    }

    /// Keeps the version the `initialize` reply settled on.
    pub fn set_version(&self, version: &str) {
        let ok = !version.is_empty()
            && version.len() <= 32
            && version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if ok {
            *lock(&self.version) = Some(version.to_string());
        }
    }

    /// An idle agent (with its kept connection), else a new one.
    fn agent(&self) -> ureq::Agent {
        if let Some(agent) = lock(&self.idle).pop() {
            return agent;
        }
        self.new_agent()
    }

    /// An agent of its own, e.g. for the GET stream, which keeps its connection for itself.
    pub fn new_agent(&self) -> ureq::Agent {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_connect(Some(self.timeouts.connect))
            .user_agent(concat!("gjc/", env!("CARGO_PKG_VERSION")))
            .build();
        ureq::Agent::new_with_config(config)
    }

    /// An agent whose answer was read to the end comes back for the next POST.
    pub fn give_back(&self, agent: ureq::Agent) {
        let mut idle = lock(&self.idle);
        if idle.len() < IDLE_AGENTS && !self.is_closed() {
            idle.push(agent);
        }
    }

    /// Whether the request under `key` is still waited for (not cancelled, not closed).
    pub fn in_flight(&self, key: &str) -> bool {
        lock(&self.inflight).contains_key(key) && !self.is_closed()
    }

    /// The GET stream's slot: `listen` fills it once, `close` empties it.
    pub fn listener(&self) -> MutexGuard<'_, Option<Listener>> {
        lock(&self.listener)
    }

    /// The request in flight under `key` is over; `false` when it was cancelled or the
    /// connection closed meanwhile (then nothing more is delivered for it).
    pub fn finish(&self, key: &str) -> bool {
        lock(&self.inflight).remove(key).is_some() && !self.is_closed()
    }

    /// A POST of `message` with every header it needs, bounded by `timeout`.
    pub fn post(
        &self,
        agent: &ureq::Agent,
        message: &Value,
        timeout: Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let body = serde_json::to_vec(message).unwrap_or_default();
        let mut req = agent
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        for (name, value) in self.headers_for(message) {
            req = req.header(name, value);
        }
        req.config()
            .timeout_global(Some(timeout))
            .build()
            .send(&body[..])
    }

    /// A GET of the event stream (`Accept: text/event-stream`), resuming after `last_event_id`
    /// when given. Its headers must come within `connect` time; `timeout` bounds the whole
    /// exchange (none for the long-lived GET stream, which `close` shuts down instead).
    pub fn get(
        &self,
        agent: &ureq::Agent,
        last_event_id: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let mut req = agent.get(&self.url).header("accept", "text/event-stream");
        for (name, value) in self.headers_for(&Value::Null) {
            req = req.header(name, value);
        }
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        req.config()
            .timeout_global(timeout)
            .timeout_recv_response(Some(self.timeouts.connect))
            .build()
            .call()
    }

    /// The configured headers, the session's and, for a message of the modern revision, the
    /// method and name it carries.
    fn headers_for(&self, message: &Value) -> Vec<(String, String)> {
        let mut out = self.headers.clone();
        if let Some(id) = lock(&self.session).clone() {
            out.push(("mcp-session-id".into(), id));
        }
        let params = &message["params"];
        let modern = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
        if let Some(version) = modern
            .map(str::to_string)
            .or_else(|| lock(&self.version).clone())
        {
            out.push(("mcp-protocol-version".into(), version));
        }
        if modern.is_some() {
            if let Some(method) = message["method"].as_str() {
                out.push(("mcp-method".into(), method.to_string()));
            }
            let name = params["name"].as_str().or(params["uri"].as_str());
            if let Some(name) = name.filter(|n| check_header("mcp-name", n).is_ok()) {
                out.push(("mcp-name".into(), name.to_string()));
            }
        }
        out
    }

    /// Posts a notification or a response on the calling thread: 2xx is done, a lost session
    /// is reported to the client, anything else is an error for the caller.
    fn post_note(self: &Arc<Self>, message: &Value) -> Result<(), String> {
        let agent = self.agent();
        let response = self
            .post(&agent, message, self.timeouts.notify)
            .map_err(|e| format!("cannot reach the server at {}: {e}", self.url))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            // Read to the end (202 has no body), so the connection may carry the next POST.
            let read = response
                .into_body()
                .with_config()
                .limit(64 * 1024)
                .read_to_vec();
            if read.is_ok() {
                self.give_back(agent);
            }
            // The handshake is over: the server may now push on a stream of its own.
            if message["method"] == "notifications/initialized" {
                http_get::listen(self);
            }
            return Ok(());
        }
        let refusal = http_read::refusal(self, response);
        let why = refusal.to_string();
        if let Some(gone) = refusal.incoming() {
            (self.deliver)(gone);
        }
        Err(why)
    }

    /// Stops the reader of the request `requested` (its socket is shut down).
    fn stop(&self, requested: &Value) {
        if let Some(agent) = lock(&self.inflight).remove(&requested.to_string()) {
            agent.shutdown();
        }
    }
}

impl Transport for Http {
    fn send(&self, message: &Value) -> Result<(), String> {
        let shared = &self.shared;
        if shared.is_closed() {
            return Err("the connection is closed".into());
        }
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").filter(|id| !id.is_null());
        match (method, id) {
            (Some(_), Some(id)) => {
                let (key, agent) = (id.to_string(), shared.agent());
                lock(&shared.inflight).insert(key.clone(), agent.clone());
                let (shared, message) = (shared.clone(), message.clone());
                let spawned = std::thread::Builder::new()
                    .name("gjc-mcp-http".into())
                    .spawn({
                        let (shared, key) = (shared.clone(), key.clone());
                        move || {
                            crate::sched::prompt_thread();
                            http_read::exchange(&shared, agent, &message, &key)
                        }
                    });
                match spawned {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        lock(&shared.inflight).remove(&key);
                        Err(format!("cannot start a reader thread: {e}"))
                    }
                }
            }
            (Some("notifications/cancelled"), None) => {
                // The call is over for the caller: its reader stops now, and the server hears
                // of it without holding the caller up.
                shared.stop(&message["params"]["requestId"]);
                let (shared, message) = (shared.clone(), message.clone());
                std::thread::Builder::new()
                    .name("gjc-mcp-cancel".into())
                    .spawn(move || {
                        let _ = shared.post_note(&message);
                    })
                    .map(|_| ())
                    .map_err(|e| format!("cannot start a thread: {e}"))
            }
            _ => shared.post_note(message),
        }
    }

    fn close(&self) {
        let shared = &self.shared;
        if shared.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        for (_, agent) in lock(&shared.inflight).drain() {
            agent.shutdown();
        }
        lock(&shared.idle).clear();
        // Taken out first: the slot is not held while the thread is waited for.
        let listener = shared.listener().take();
        if let Some(listener) = listener {
            listener.stop(http_get::STOP_WAIT);
        }
        let Some(session) = lock(&shared.session).take() else {
            return;
        };
        // Ends the session on the server; a 405 (it keeps sessions itself) or any error is
        // fine: the connection is gone either way.
        let agent = shared.agent();
        let mut req = agent.delete(&shared.url).header("mcp-session-id", &session);
        for (name, value) in &shared.headers {
            req = req.header(name, value);
        }
        if let Some(version) = lock(&shared.version).clone() {
            req = req.header("mcp-protocol-version", version);
        }
        let _ = req
            .config()
            .timeout_global(Some(CLOSE_TIMEOUT))
            .build()
            .call();
    }
}

impl Drop for Http {
    // A transport dropped without `close` still ends its GET stream (which holds the shared
    // state, so it would otherwise listen on for nobody).
    fn drop(&mut self) {
        let listener = self.shared.listener().take();
        if let Some(listener) = listener {
            listener.stop(Duration::ZERO);
        }
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
