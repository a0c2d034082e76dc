//! A JSON-RPC client of one MCP server over any [`Transport`]: requests with fresh ids (never
//! reused), each with a deadline and a cancel check (`notifications/cancelled` when it gives
//! up); late replies are dropped; `ping` is answered; a server request for a capability we did
//! not declare is answered -32601; progress notifications reach the call that gave the token.
//! A request is either waited for on the calling thread (`request`) or started with callbacks
//! the reader thread calls (`start`), so that nothing waits for it at all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use serde_json::{json, Value};

use super::transport::{Incoming, Transport};

/// A request's failure.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The server answered with a JSON-RPC error.
    Rpc {
        code: i64,
        message: String,
    },
    TimedOut,
    Cancelled,
    /// The connection is gone: why.
    Closed(String),
    /// The server answered with an HTTP error and no JSON-RPC message.
    Http {
        status: u16,
        detail: String,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Rpc { code, message } => write!(f, "MCP error {code}: {message}"),
            Failure::TimedOut => write!(f, "the server did not answer in time"),
            Failure::Cancelled => write!(f, "cancelled"),
            Failure::Closed(why) => write!(f, "{why}"),
            Failure::Http { status, detail } => write!(f, "HTTP {status}: {detail}"),
        }
    }
}

/// One `notifications/progress`.
#[derive(Debug, Clone)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// What the client tells its owner, from the reader thread.
pub enum Note {
    ToolsChanged,
    Closed(String),
    /// The server ended the session (streamable HTTP); nothing crashed.
    Expired(String),
}

pub type Reply = Result<Value, Failure>;

/// Who hears a request's answer: the thread waiting in `request`, or a callback of `start`.
enum Waiter {
    Thread(Sender<Reply>),
    Callback(Box<dyn FnOnce(Reply) + Send>),
}

impl Waiter {
    fn answer(self, reply: Reply) {
        match self {
            Waiter::Thread(tx) => drop(tx.send(reply)),
            Waiter::Callback(f) => f(reply),
        }
    }
}

/// What the reader thread calls with a call's progress (`Client::start`).
pub type OnProgress = Arc<dyn Fn(Progress) + Send + Sync>;

/// Who hears a call's progress.
#[derive(Clone)]
enum ProgressSink {
    Thread(Sender<Progress>),
    Callback(OnProgress),
}

/// A request started with callbacks (`Client::start`): what giving it up needs.
pub struct Started {
    id: u64,
    token: Option<String>,
}

pub struct Client {
    transport: OnceLock<Box<dyn Transport>>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, Waiter>>,
    progress: Mutex<HashMap<String, ProgressSink>>,
    closed: Mutex<Option<String>>,
    notes: Box<dyn Fn(Note) + Send + Sync>,
    /// The modern (stateless) revision: every request carries its `_meta`.
    modern: std::sync::atomic::AtomicBool,
}

/// The client's own wait granularity while it also watches a cancel flag.
const TICK: Duration = Duration::from_millis(20);

impl Client {
    /// A client whose transport `connect` makes, given where to deliver what arrives.
    pub fn new(
        notes: impl Fn(Note) + Send + Sync + 'static,
        connect: impl FnOnce(super::transport::Deliver) -> Result<Box<dyn Transport>, String>,
    ) -> Result<Arc<Client>, String> {
        let client = Arc::new(Client {
            transport: OnceLock::new(),
            next_id: AtomicU64::new(1),
            pending: Mutex::default(),
            progress: Mutex::default(),
            closed: Mutex::default(),
            notes: Box::new(notes),
            modern: Default::default(),
        });
        let weak: Weak<Client> = Arc::downgrade(&client);
        let transport = connect(Box::new(move |incoming| {
            if let Some(client) = weak.upgrade() {
                client.dispatch(incoming);
            }
        }))?;
        let _ = client.transport.set(transport);
        Ok(client)
    }

    /// Why the connection is gone, waiting up to `limit` for the reader to say (a failed
    /// write learns of a dead server before its reader has its last words).
    pub fn closed_within(&self, limit: Duration) -> Option<String> {
        let until = Instant::now() + limit;
        loop {
            let closed = self.closed();
            if closed.is_some() || Instant::now() >= until {
                return closed;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Why the connection is gone, once it is.
    pub fn closed(&self) -> Option<String> {
        self.closed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn send(&self, message: &Value) -> Result<(), Failure> {
        let transport = self
            .transport
            .get()
            .ok_or(Failure::Closed("not connected".into()))?;
        transport.send(message).map_err(Failure::Closed)
    }

    pub fn notify(&self, method: &str, params: Value) {
        let _ = self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its answer, at most `timeout` after the last sign of life
    /// (a progress notification), and never past `hard_limit`. `cancelled` is polled; giving up
    /// tells the server (`notifications/cancelled`) unless `initialize` is what was asked.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
        on_progress: Option<(&str, &dyn Fn(Progress))>,
    ) -> Reply {
        let (tx, rx) = bounded(1);
        let progress = on_progress.map(|(token, _)| {
            let (ptx, prx) = unbounded();
            (token.to_string(), ProgressSink::Thread(ptx), prx)
        });
        let (sink, progress_rx) = match progress {
            Some((token, sink, prx)) => (Some((token, sink)), Some(prx)),
            None => (None, None),
        };
        let started = self.send_request(method, params, Waiter::Thread(tx), sink)?;
        let outcome = self.wait(&rx, progress_rx.as_ref(), on_progress, timeout, cancelled);
        let still_pending = self.forget(&started);
        if still_pending && method != "initialize" {
            if let Err(Failure::TimedOut | Failure::Cancelled) = &outcome {
                let reason = if outcome == Err(Failure::TimedOut) {
                    "timed out"
                } else {
                    "cancelled by the user"
                };
                self.cancel(&started, reason);
            }
        }
        outcome
    }

    /// Sends a request and returns at once: the reader thread calls `on_progress` for each of
    /// its progress notifications (given a token) and `on_reply` with its answer, or with the
    /// failure when the connection ends first. Neither is called once [`Client::give_up`]
    /// returned true.
    pub fn start(
        &self,
        method: &str,
        params: Value,
        on_progress: Option<(&str, OnProgress)>,
        on_reply: Box<dyn FnOnce(Reply) + Send>,
    ) -> Result<Started, Failure> {
        let sink = on_progress.map(|(token, f)| (token.to_string(), ProgressSink::Callback(f)));
        self.send_request(method, params, Waiter::Callback(on_reply), sink)
    }

    /// Gives up a request made with `start`: its callbacks are no longer called, and the server
    /// hears `notifications/cancelled` with `reason`. False when its answer came first (its
    /// reply callback has run or is running).
    pub fn give_up(&self, started: &Started, reason: &str) -> bool {
        let still_pending = self.forget(started);
        if still_pending {
            self.cancel(started, reason);
        }
        still_pending
    }

    /// Registers the waiter (and the progress sink, whose token goes in `_meta`) and sends.
    fn send_request(
        &self,
        method: &str,
        mut params: Value,
        waiter: Waiter,
        progress: Option<(String, ProgressSink)>,
    ) -> Result<Started, Failure> {
        if let Some(why) = self.closed() {
            return Err(Failure::Closed(why));
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let token = progress.map(|(token, sink)| {
            if let Some(p) = params.as_object_mut() {
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                meta["progressToken"] = json!(token);
            }
            lock(&self.progress).insert(token.clone(), sink);
            token
        });
        if self.modern.load(Ordering::SeqCst) {
            add_modern_meta(&mut params);
        }
        lock(&self.pending).insert(id, waiter);
        let started = Started { id, token };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        match self.send(&message) {
            Ok(()) => Ok(started),
            Err(e) => {
                self.forget(&started);
                Err(e)
            }
        }
    }

    /// Drops a request's waiter and progress sink; whether its answer was still to come.
    fn forget(&self, started: &Started) -> bool {
        if let Some(token) = &started.token {
            lock(&self.progress).remove(token);
        }
        lock(&self.pending).remove(&started.id).is_some()
    }

    fn cancel(&self, started: &Started, reason: &str) {
        self.notify(
            "notifications/cancelled",
            json!({"requestId": started.id, "reason": reason}),
        );
    }

    fn wait(
        &self,
        rx: &Receiver<Reply>,
        progress: Option<&Receiver<Progress>>,
        on_progress: Option<(&str, &dyn Fn(Progress))>,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Reply {
        let started = Instant::now();
        // Progress keeps a call alive, up to ten times its timeout.
        let hard_limit = started + timeout.saturating_mul(10);
        let mut deadline = started + timeout;
        let drain = |deadline: &mut Instant| {
            if let (Some(prx), Some((_, report))) = (progress, on_progress) {
                while let Ok(p) = prx.try_recv() {
                    *deadline = (Instant::now() + timeout).min(hard_limit);
                    report(p);
                }
            }
        };
        loop {
            if cancelled() {
                return Err(Failure::Cancelled);
            }
            drain(&mut deadline);
            let now = Instant::now();
            if now >= deadline {
                return Err(Failure::TimedOut);
            }
            // Parks at once: the reply comes from another process, never within the
            // microseconds crossbeam's spinning (and yielding the core) waits for.
            match crate::park::recv_timeout(rx, TICK.min(deadline - now)) {
                Ok(reply) => {
                    // Progress that came just before the reply is reported before it.
                    drain(&mut deadline);
                    return reply;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Failure::Closed(self.closed().unwrap_or_default()))
                }
            }
        }
    }

    pub fn set_modern(&self) {
        self.modern.store(true, Ordering::SeqCst);
    }

    /// What the reader delivers: answers to their waiters, requests answered, notifications
    /// handed on.
    fn dispatch(&self, incoming: Incoming) {
        let message = match incoming {
            Incoming::Message(m) => m,
            Incoming::Closed(why) => return self.gone(why.clone(), Note::Closed(why)),
            Incoming::Expired(why) => return self.gone(why.clone(), Note::Expired(why)),
            Incoming::Failed { id, failure } => {
                let waiter = id.as_u64().and_then(|id| lock(&self.pending).remove(&id));
                if let Some(waiter) = waiter {
                    waiter.answer(Err(failure));
                }
                return;
            }
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").filter(|id| !id.is_null());
        match (method, id) {
            (Some(method), Some(id)) => self.answer_request(method, id.clone()),
            (Some(method), None) => self.on_notification(method, message.get("params")),
            (None, Some(id)) => {
                let waiter = id.as_u64().and_then(|id| lock(&self.pending).remove(&id));
                // No waiter: a late reply to a call given up, or an id we never sent.
                if let Some(waiter) = waiter {
                    waiter.answer(reply_of(&message));
                }
            }
            (None, None) => log::debug!("MCP server sent a message with neither method nor id"),
        }
    }

    /// The connection is gone: every waiter hears why.
    fn gone(&self, why: String, note: Note) {
        *self.closed.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
        // The owner marks the server failed before any waiter hears of it: the next call then
        // sees the failure (and its back-off), not a half-dead connection.
        (self.notes)(note);
        let waiters: Vec<Waiter> = lock(&self.pending).drain().map(|(_, w)| w).collect();
        for waiter in waiters {
            waiter.answer(Err(Failure::Closed(why.clone())));
        }
    }

    fn answer_request(&self, method: &str, id: Value) {
        let reply = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            // We declare no client capability (sampling, roots, elicitation).
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {method}")}})
        };
        let _ = self.send(&reply);
    }

    fn on_notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/tools/list_changed" => (self.notes)(Note::ToolsChanged),
            "notifications/progress" => {
                let Some(params) = params else { return };
                let token = match params.get("progressToken") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => return,
                };
                let sink = lock(&self.progress).get(&token).cloned();
                if let (Some(sink), Some(progress)) =
                    (sink, params.get("progress").and_then(Value::as_f64))
                {
                    sink.tell(Progress {
                        progress,
                        total: params.get("total").and_then(Value::as_f64),
                        message: params
                            .get("message")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    });
                }
            }
            _ => {}
        }
    }

    /// Ends the connection (and the server's process).
    pub fn close(&self) {
        if let Some(transport) = self.transport.get() {
            transport.close();
        }
    }
}

impl ProgressSink {
    fn tell(&self, progress: Progress) {
        match self {
            ProgressSink::Thread(tx) => drop(tx.send(progress)),
            ProgressSink::Callback(f) => f(progress),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn reply_of(message: &Value) -> Reply {
    if let Some(error) = message.get("error") {
        return Err(Failure::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(2000)
                .collect(),
        });
    }
    Ok(message.get("result").cloned().unwrap_or(Value::Null))
}

/// The modern revision's per-request `_meta`.
pub const MODERN_VERSION: &str = "2026-07-28";

fn add_modern_meta(params: &mut Value) {
    if !params.is_object() {
        *params = json!({});
    }
    let meta = params
        .as_object_mut()
        .map(|p| p.entry("_meta").or_insert_with(|| json!({})));
    if let Some(meta) = meta {
        meta["io.modelcontextprotocol/protocolVersion"] = json!(MODERN_VERSION);
        meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
        meta["io.modelcontextprotocol/clientInfo"] = client_info();
    }
}

pub fn client_info() -> Value {
    json!({"name": "gjc", "version": env!("CARGO_PKG_VERSION")})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::transport::Deliver;

    /// A transport that records what is sent; the test delivers what "arrives".
    struct Fake(Arc<Mutex<Vec<Value>>>);

    impl Transport for Fake {
        fn send(&self, message: &Value) -> Result<(), String> {
            self.0.lock().unwrap().push(message.clone());
            Ok(())
        }
        fn close(&self) {}
    }

    fn client() -> (Arc<Client>, Arc<Mutex<Vec<Value>>>, Arc<Deliver>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let deliver: Arc<Mutex<Option<Deliver>>> = Arc::default();
        let (s, d) = (sent.clone(), deliver.clone());
        let client = Client::new(
            |_| {},
            move |deliver| {
                *d.lock().unwrap() = Some(deliver);
                Ok(Box::new(Fake(s)) as Box<dyn Transport>)
            },
        )
        .unwrap();
        let deliver = Arc::new(deliver.lock().unwrap().take().unwrap());
        (client, sent, deliver)
    }

    fn wait_for_sent(sent: &Mutex<Vec<Value>>, n: usize) -> Vec<Value> {
        for _ in 0..500 {
            let now = sent.lock().unwrap().clone();
            if now.len() >= n {
                return now;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("only {:?} was sent", sent.lock().unwrap());
    }

    #[test]
    fn answers_ping_refuses_undeclared_requests_and_drops_late_replies() {
        let (client, sent, deliver) = client();
        deliver(Incoming::Message(
            json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
        ));
        deliver(Incoming::Message(
            json!({"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage", "params": {}}),
        ));
        let out = wait_for_sent(&sent, 2);
        assert_eq!(out[0], json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
        assert_eq!(out[1]["error"]["code"], -32601);

        // A request that times out is cancelled; its late reply is dropped, and ids move on.
        let never = || false;
        let timed_out = client.request(
            "tools/list",
            json!({}),
            Duration::from_millis(30),
            &never,
            None,
        );
        assert_eq!(timed_out, Err(Failure::TimedOut));
        let out = wait_for_sent(&sent, 4);
        let first_id = out[2]["id"].as_u64().unwrap();
        assert_eq!(out[3]["method"], "notifications/cancelled");
        assert_eq!(out[3]["params"]["requestId"], first_id);
        deliver(Incoming::Message(
            json!({"jsonrpc": "2.0", "id": first_id, "result": {"late": true}}),
        ));

        // The next request gets a fresh id and its own answer, with progress on the way.
        let d = deliver.clone();
        let s = sent.clone();
        let answer = std::thread::spawn(move || {
            let out = wait_for_sent(&s, 5);
            let id = out[4]["id"].clone();
            assert_eq!(out[4]["params"]["_meta"]["progressToken"], "tok");
            d(Incoming::Message(
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "tok", "progress": 1, "total": 2, "message": "half"}}),
            ));
            std::thread::sleep(Duration::from_millis(50));
            d(Incoming::Message(
                json!({"jsonrpc": "2.0", "id": id, "result": {"ok": 1}}),
            ));
            id
        });
        let seen = Mutex::new(Vec::new());
        let report = |p: Progress| seen.lock().unwrap().push(p.message.unwrap_or_default());
        let reply = client.request(
            "tools/call",
            json!({}),
            Duration::from_secs(5),
            &never,
            Some(("tok", &report)),
        );
        let id = answer.join().unwrap();
        assert_ne!(id.as_u64(), Some(first_id));
        assert_eq!(reply, Ok(json!({"ok": 1})));
        assert_eq!(*seen.lock().unwrap(), ["half"]);

        // Once closed, waiters and new requests fail with the reason.
        deliver(Incoming::Closed("the server exited".into()));
        let closed = client.request(
            "tools/list",
            json!({}),
            Duration::from_secs(1),
            &never,
            None,
        );
        assert_eq!(closed, Err(Failure::Closed("the server exited".into())));
    }
}
