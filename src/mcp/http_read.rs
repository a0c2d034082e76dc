//! Reading one POST's answer (`http::Http`): the status mapped to what the client hears (a
//! refused token, a session the server forgot, a redirect, a JSON-RPC error body, an HTTP error),
//! then the body, one JSON message or an SSE stream, every message handed to the client as it
//! comes until the reply to the request. One message is capped like a stdio line, a whole answer
//! at twice that: a server that streams without end is cut there. An event stream that breaks
//! before the reply is resumed from its last event id when it gave ids (`http_get::Resume`).

use std::cell::Cell;
use std::io::{BufReader, Read};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use super::client::Failure;
use super::http::Shared;
use super::http_get::{Resume, Unresumed};
use super::transport::Incoming;
use crate::provider::sse::{SseError, SseLimits, SseReader};

/// An error body is read up to this much for its message.
const ERROR_BODY_BYTES: u64 = 64 * 1024;
/// Events read after the reply, looking for the end of the body (to keep the connection).
const EVENTS_AFTER_REPLY: usize = 4;
/// How long the end of a body is waited for after the reply before its connection is dropped.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// A POST the server did not answer with 2xx.
pub(super) enum Refusal {
    /// 401 or 403: the connection cannot be used without another token.
    Auth(String),
    /// The server forgot the session.
    Expired(String),
    Redirect(String),
    /// A JSON-RPC error body (its `id` may be null: the server could not tell).
    Rpc(Value),
    Http {
        status: u16,
        detail: String,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Auth(why) | Refusal::Expired(why) | Refusal::Redirect(why) => {
                write!(f, "{why}")
            }
            Refusal::Rpc(body) => write!(f, "{}", body["error"]["message"].as_str().unwrap_or("")),
            Refusal::Http { status, detail } => write!(f, "HTTP {status}: {detail}"),
        }
    }
}

impl Refusal {
    /// What the whole connection hears, when the refusal ends it.
    pub fn incoming(&self) -> Option<Incoming> {
        match self {
            Refusal::Auth(why) | Refusal::Redirect(why) => Some(Incoming::Closed(why.clone())),
            Refusal::Expired(why) => Some(Incoming::Expired(why.clone())),
            Refusal::Rpc(_) | Refusal::Http { .. } => None,
        }
    }
}

/// A header's text as it may appear in a reason: no control characters, clipped.
fn printable(text: &str, max: usize) -> String {
    let clean: String = text.chars().filter(|c| !c.is_control()).collect();
    crate::provider::wire::clip(clean.trim(), max).to_string()
}

/// What a non-2xx answer means.
pub(super) fn refusal(shared: &Shared, response: ureq::http::Response<ureq::Body>) -> Refusal {
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| printable(v, 500))
    };
    let challenge =
        || header("www-authenticate").unwrap_or_else(|| "no WWW-Authenticate header".into());
    match status {
        401 => return Refusal::Auth(format!(
            "the server answered HTTP 401: it needs OAuth authorization: {}; gjc does not run OAuth flows — give a token in the server's \"headers\"",
            challenge()
        )),
        403 => return Refusal::Auth(format!(
            "the server answered HTTP 403 (forbidden): {}; gjc does not run OAuth flows — give a token with the access it needs in the server's \"headers\"",
            challenge()
        )),
        300..=399 => return Refusal::Redirect(format!(
            "the server redirects (HTTP {status}) to {}; redirects are not followed: configure the URL it points to",
            header("location").unwrap_or_else(|| "nowhere".into())
        )),
        _ => {}
    }
    let body = response
        .into_body()
        .with_config()
        .limit(ERROR_BODY_BYTES)
        .read_to_string()
        .unwrap_or_default();
    // A 404 is how the spec says a session is gone; the reference server says 400 "No valid
    // session ID provided".
    let forgot = status == 404 || (status == 400 && body.to_ascii_lowercase().contains("session"));
    if shared.has_session() && forgot {
        return Refusal::Expired(format!(
            "the server ended the MCP session (HTTP {status}); the next call opens a new one"
        ));
    }
    match serde_json::from_str::<Value>(&body) {
        Ok(v) if v["error"].is_object() => Refusal::Rpc(v),
        _ => Refusal::Http {
            status,
            detail: match crate::provider::http::error_detail(&body) {
                d if d.is_empty() => "no detail".into(),
                d => printable(&d, 500),
            },
        },
    }
}

/// How an answer ended.
enum End {
    /// The reply reached the client; `true` when the body was read to its end.
    Replied(bool),
    /// What the client hears instead of a reply.
    Instead(Incoming),
}

/// Posts the request `message` and reads its answer, on the request's own thread.
pub(super) fn exchange(shared: &Arc<Shared>, agent: ureq::Agent, message: &Value, key: &str) {
    let id = message["id"].clone();
    let initialize = message["method"] == "initialize";
    let end = match shared.post(&agent, message, shared.timeouts.request) {
        Err(e) => End::Instead(Incoming::Closed(format!(
            "cannot reach the server at {}: {e}",
            shared.url
        ))),
        Ok(response) => answer(shared, &agent, response, (&id, key), initialize),
    };
    // Cancelled or closed meanwhile: the agent was shut down and nobody waits.
    if !shared.finish(key) {
        return;
    }
    match end {
        End::Replied(true) => shared.give_back(agent),
        End::Replied(false) => {}
        End::Instead(incoming) => (shared.deliver)(incoming),
    }
}

fn failed(id: &Value, why: String) -> End {
    End::Instead(Incoming::Failed {
        id: id.clone(),
        failure: Failure::Closed(why),
    })
}

/// Reads the answer to the request `id`, in flight under `key`.
fn answer(
    shared: &Shared,
    agent: &ureq::Agent,
    response: ureq::http::Response<ureq::Body>,
    (id, key): (&Value, &str),
    initialize: bool,
) -> End {
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let refusal = refusal(shared, response);
        if let Some(gone) = refusal.incoming() {
            return End::Instead(gone);
        }
        return End::Instead(match refusal {
            Refusal::Rpc(mut error) => {
                error["id"] = id.clone();
                Incoming::Message(error)
            }
            other => Incoming::Failed {
                id: id.clone(),
                failure: match other {
                    Refusal::Http { status, detail } => Failure::Http { status, detail },
                    other => Failure::Closed(other.to_string()),
                },
            },
        });
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    if initialize {
        if let Some(session) = header("mcp-session-id") {
            if let Err(why) = shared.set_session(&session) {
                return End::Instead(Incoming::Closed(why));
            }
        }
    }
    let kind = header("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let body = response.into_body();
    if kind.starts_with("text/event-stream") {
        read_stream(shared, agent, body, (id, key), initialize)
    } else if kind.starts_with("application/json") {
        read_json(shared, body, id, initialize)
    } else {
        failed(
            id,
            format!(
                "the server answered HTTP {status} with {}, not JSON or an event stream",
                if kind.is_empty() {
                    "no content type".into()
                } else {
                    printable(&kind, 100)
                }
            ),
        )
    }
}

/// Hands one message to the client; `true` when it is the reply to `id`.
fn hand_on(shared: &Shared, message: Value, id: &Value, initialize: bool) -> bool {
    let reply = message.get("method").is_none() && message.get("id") == Some(id);
    if reply && initialize {
        if let Some(version) = message["result"]["protocolVersion"].as_str() {
            shared.set_version(version);
        }
    }
    (shared.deliver)(Incoming::Message(message));
    reply
}

/// Hands on one JSON message or a batch of them; `true` when the reply was among them.
fn hand_on_all(shared: &Shared, value: Value, id: &Value, initialize: bool) -> bool {
    match value {
        Value::Object(_) => hand_on(shared, value, id, initialize),
        Value::Array(items) => {
            // Every message is handed on, also those after the reply.
            let mut replied = false;
            for m in items.into_iter().filter(Value::is_object) {
                replied |= hand_on(shared, m, id, initialize);
            }
            replied
        }
        _ => false,
    }
}

/// A cap in words.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{} MB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

fn read_json(shared: &Shared, mut body: ureq::Body, id: &Value, initialize: bool) -> End {
    let cap = shared.limits.message as u64;
    let bytes = match body.with_config().limit(cap).read_to_vec() {
        Ok(bytes) => bytes,
        Err(ureq::Error::BodyExceedsLimit(_)) => {
            return failed(id, format!("the server sent an answer over {}", size(cap)))
        }
        Err(e) => return failed(id, format!("reading the answer failed: {e}")),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) => {
            if hand_on_all(shared, value, id, initialize) {
                End::Replied(true)
            } else {
                failed(
                    id,
                    "the server's answer held no reply to the request".into(),
                )
            }
        }
        Err(_) => failed(id, "the server's answer is not JSON".into()),
    }
}

/// The cap of a whole answer was passed.
#[derive(Debug)]
struct Cut;

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the answer passed its cap")
    }
}

impl std::error::Error for Cut {}

/// A body that fails once more than `left` bytes were read from it (shared by the bodies of
/// one answer: its POST's and those resuming it).
struct Capped<R> {
    inner: R,
    left: Rc<Cell<u64>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.left.get();
        if left == 0 {
            return Err(std::io::Error::other(Cut));
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left.set(left - n as u64);
        Ok(n)
    }
}

/// How reading an answer's event stream stopped.
enum Stopped {
    /// The answer is settled.
    Settled(End),
    /// The stream ended or broke before the reply: how, in words.
    Broke(String),
}

fn read_stream(
    shared: &Shared,
    agent: &ureq::Agent,
    body: ureq::Body,
    (id, key): (&Value, &str),
    initialize: bool,
) -> End {
    let limits = shared.limits;
    let left = Rc::new(Cell::new(limits.response));
    let sse_limits = SseLimits {
        line: limits.message,
        event: limits.message,
    };
    let mut resume = Resume::new(shared.timeouts.request);
    let mut body = body;
    loop {
        let capped = Capped {
            inner: body.into_reader(),
            left: left.clone(),
        };
        let reader = BufReader::with_capacity(16 * 1024, capped);
        let mut sse = SseReader::with_limits(reader, sse_limits);
        let broke = match read_events(shared, agent, &mut sse, id, initialize) {
            Stopped::Settled(end) => return end,
            Stopped::Broke(why) => why,
        };
        // A dropped connection is not a cancel: the answer goes on from its last event id.
        resume.saw(&sse);
        body = match resume.next(shared, agent, key, &broke) {
            Ok(body) => body,
            Err(Unresumed::Failed(why)) => return failed(id, why),
            Err(Unresumed::Instead(incoming)) => return End::Instead(incoming),
            // Whoever gave up learns nothing more from this thread.
            Err(Unresumed::Abandoned) => return End::Replied(false),
        };
    }
}

/// Reads events, handing each message on, until the reply to `id` or the stream's end.
fn read_events(
    shared: &Shared,
    agent: &ureq::Agent,
    sse: &mut SseReader<impl std::io::BufRead>,
    id: &Value,
    initialize: bool,
) -> Stopped {
    let limits = shared.limits;
    loop {
        let event = match sse.next_event() {
            Ok(Some(event)) => event,
            Ok(None) => {
                return Stopped::Broke(
                    "the server ended the answer's event stream without a reply".into(),
                )
            }
            Err(SseError::TooLarge { .. }) => {
                return Stopped::Settled(failed(
                    id,
                    format!(
                        "the server sent an event over {}; the answer was cut there",
                        size(limits.message as u64)
                    ),
                ))
            }
            Err(SseError::Io(e)) if e.get_ref().is_some_and(|inner| inner.is::<Cut>()) => {
                return Stopped::Settled(failed(
                    id,
                    format!(
                        "the server's event stream passed {} without a reply; it was cut there",
                        size(limits.response)
                    ),
                ))
            }
            Err(SseError::Io(e)) => {
                return Stopped::Broke(format!("the answer's event stream broke: {e}"))
            }
        };
        // The priming event (an id, empty data) and keep-alives carry no message.
        if event.data.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&event.data) {
            Ok(value) => {
                if hand_on_all(shared, value, id, initialize) {
                    return Stopped::Settled(End::Replied(at_end(agent, sse)));
                }
            }
            Err(_) => log::debug!("MCP server sent an event that is not JSON"),
        }
    }
}

/// Whether the stream ends right after the reply (then its connection can be kept). A server
/// that keeps the stream open does not keep this thread: after `LINGER` the connection is shut.
fn at_end(agent: &ureq::Agent, sse: &mut SseReader<impl std::io::BufRead>) -> bool {
    // Whoever settles first decides: the end read in time, or the watch shutting it down.
    let settled = Arc::new(std::sync::Mutex::new(false));
    let (done, wait) = crossbeam_channel::bounded::<()>(1);
    let (watch, agent) = (settled.clone(), agent.clone());
    let watching = std::thread::Builder::new()
        .name("gjc-mcp-linger".into())
        .spawn(move || {
            if wait.recv_timeout(LINGER).is_err() {
                let mut settled = watch.lock().unwrap_or_else(|e| e.into_inner());
                if !*settled {
                    *settled = true;
                    agent.shutdown();
                }
            }
        });
    if watching.is_err() {
        return false;
    }
    let mut ended = false;
    for _ in 0..EVENTS_AFTER_REPLY {
        match sse.next_event() {
            Ok(None) => {
                ended = true;
                break;
            }
            Ok(Some(_)) => {}
            Err(_) => break,
        }
    }
    let mut settled = settled.lock().unwrap_or_else(|e| e.into_inner());
    let kept = ended && !*settled;
    *settled = true;
    let _ = done.send(());
    kept
}
