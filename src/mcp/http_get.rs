//! The GET side of the streamable HTTP transport (`http::Http`), for handshake-era servers only
//! (the modern revision has no GET stream and no `Last-Event-ID`):
//!
//! - The GET stream: once the server accepted `notifications/initialized`, one `gjc-mcp-get`
//!   thread GETs the endpoint (`Accept: text/event-stream`, the session id and version headers)
//!   and hands every message on it to the client as a POST's reader does, so a
//!   `tools/list_changed`, a server request or a log message sent outside any request reaches
//!   gjc. 405, or 404 without a session, means the server offers no stream: nothing more is
//!   tried. A 404 (or the reference server's 400) with a session is the session forgotten, as
//!   for a POST. Any other failure, and a stream the server ends, is reconnected after the
//!   server's `retry` or a back-off that doubles, with `Last-Event-ID` when the stream gave ids;
//!   after `MAX_FAILURES` attempts in a row that heard nothing the stream is given up.
//! - Resuming a POST's answer: an event stream that broke before its reply is resumed with a GET
//!   carrying the last event id it gave (after its `retry`), bounded in attempts and time.
//!
//! Closing the transport shuts the GET's socket down and wakes its wait, so the thread ends
//! with its server; every wait here is bounded.

use std::io::BufReader;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use serde_json::Value;

use super::http::Shared;
use super::http_read::{self, Refusal};
use super::transport::Incoming;
use crate::provider::sse::{SseError, SseLimits, SseReader};

/// How long closing waits for the GET thread to end.
pub const STOP_WAIT: Duration = Duration::from_secs(1);
/// The first wait before reconnecting when the server named none (`retry`).
const FIRST_WAIT: Duration = Duration::from_millis(500);
/// The longest wait between attempts, also for a `retry` asking more.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Attempts in a row that heard nothing before the GET stream is given up.
const MAX_FAILURES: u32 = 8;
/// Attempts at resuming a POST's answer that bring no new event.
const MAX_RESUMES: u32 = 5;
/// The first wait before resuming a POST's answer when the server named none.
const FIRST_RESUME: Duration = Duration::from_millis(100);
/// The longest event id sent back (`Last-Event-ID`); a longer or unprintable one is not used.
const MAX_EVENT_ID: usize = 1024;

/// The running GET stream of one connection.
pub struct Listener {
    agent: ureq::Agent,
    /// Dropped to wake the thread from its wait between attempts.
    stop: Sender<()>,
    /// Disconnected once the thread has ended.
    done: Receiver<()>,
    thread: std::thread::ThreadId,
}

impl Listener {
    /// Ends the stream: its socket is shut down and its wait woken; waits up to `wait` for the
    /// thread to end (never on the thread itself).
    pub fn stop(self, wait: Duration) {
        self.agent.shutdown();
        drop(self.stop);
        if std::thread::current().id() != self.thread {
            let _ = self.done.recv_timeout(wait);
        }
    }
}

/// Opens the GET stream of `shared`'s connection, once: a closed connection or one that has
/// had its stream gets none.
pub fn listen(shared: &Arc<Shared>) {
    let mut slot = shared.listener();
    if slot.is_some() || shared.is_closed() {
        return;
    }
    let agent = shared.new_agent();
    let (stop, woken) = bounded::<()>(0);
    let (ended, done) = bounded::<()>(0);
    let spawned = std::thread::Builder::new()
        .name("gjc-mcp-get".into())
        .spawn({
            let (shared, agent) = (shared.clone(), agent.clone());
            move || {
                crate::sched::prompt_thread();
                run(&shared, &agent, &woken);
                drop(ended);
            }
        });
    match spawned {
        Ok(handle) => {
            *slot = Some(Listener {
                agent,
                stop,
                done,
                thread: handle.thread().id(),
            })
        }
        Err(e) => log::warn!("MCP GET stream not opened: cannot start a thread: {e}"),
    }
}

/// Where a stream stands: its last event id and the wait it asked for.
#[derive(Default)]
struct Cursor {
    last_id: Option<String>,
    retry: Option<Duration>,
}

impl Cursor {
    /// Takes what `sse` said; `true` when it gave a new event id.
    fn update<R: std::io::BufRead>(&mut self, sse: &SseReader<R>) -> bool {
        if let Some(ms) = sse.retry() {
            self.retry = Some(Duration::from_millis(ms).min(MAX_WAIT));
        }
        let id = sse.last_event_id().filter(|id| usable_id(id));
        match id {
            Some(id) if self.last_id.as_deref() != Some(id) => {
                self.last_id = Some(id.to_string());
                true
            }
            _ => false,
        }
    }

    /// The wait before the next attempt: the server's `retry`, else `first`, doubled for each
    /// attempt in a row that failed, never past `MAX_WAIT`.
    fn wait(&self, first: Duration, failures: u32) -> Duration {
        let base = self.retry.unwrap_or(first);
        let grown = base.saturating_mul(1 << failures.saturating_sub(1).min(6));
        if failures == 0 { base } else { grown }.min(MAX_WAIT)
    }
}

/// An event id that can go back as a header.
fn usable_id(id: &str) -> bool {
    id.len() <= MAX_EVENT_ID && id.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// How one GET went.
enum Step {
    /// The stream brought something (an event or an id) and then ended or broke.
    Heard,
    /// Nothing was heard: why.
    Silent(String),
    /// No stream now or later (405, no session to listen to, a refused token): why.
    Over(String),
    /// The connection is gone (the session forgotten): the client hears it.
    Lost(Incoming),
}

/// The GET stream's thread: listen, wait, listen again, until the connection closes.
fn run(shared: &Arc<Shared>, agent: &ureq::Agent, woken: &Receiver<()>) {
    let mut cursor = Cursor::default();
    let mut failures = 0;
    let url = &shared.url;
    loop {
        if shared.is_closed() {
            return;
        }
        match once(shared, agent, &mut cursor) {
            Step::Heard => failures = 0,
            Step::Silent(why) => {
                failures += 1;
                log::debug!("MCP GET stream of {url}: {why}");
                if failures >= MAX_FAILURES {
                    log::warn!(
                        "MCP GET stream of {url} given up after {failures} failed attempts: {why}"
                    );
                    return;
                }
            }
            Step::Over(why) => {
                log::debug!("MCP GET stream of {url}: {why}");
                return;
            }
            Step::Lost(incoming) => {
                if !shared.is_closed() {
                    (shared.deliver)(incoming);
                }
                return;
            }
        }
        match woken.recv_timeout(cursor.wait(FIRST_WAIT, failures)) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// One GET, read until the stream ends.
fn once(shared: &Shared, agent: &ureq::Agent, cursor: &mut Cursor) -> Step {
    let response = match shared.get(agent, cursor.last_id.as_deref(), None) {
        Ok(response) => response,
        Err(e) => return Step::Silent(format!("cannot reach the server: {e}")),
    };
    let status = response.status().as_u16();
    if status == 405 || (status == 404 && !shared.has_session()) {
        return Step::Over(format!("the server offers no GET stream (HTTP {status})"));
    }
    if !(200..300).contains(&status) {
        let refusal = http_read::refusal(shared, response);
        return match refusal {
            Refusal::Expired(_) => match refusal.incoming() {
                Some(gone) => Step::Lost(gone),
                None => Step::Over(refusal.to_string()),
            },
            // The POSTs meet these too and report them; the GET stream just ends.
            Refusal::Auth(_) | Refusal::Redirect(_) => Step::Over(refusal.to_string()),
            other => Step::Silent(format!("the GET was refused: {other}")),
        };
    }
    if !is_event_stream(&response) {
        return Step::Over("the server answered the GET with no event stream".into());
    }
    let mut sse = event_reader(shared, response.into_body());
    let mut heard = false;
    loop {
        let next = sse.next_event();
        heard |= cursor.update(&sse);
        match next {
            Ok(Some(event)) => {
                heard = true;
                hand_on(shared, &event.data);
            }
            Ok(None) if heard => return Step::Heard,
            Ok(None) => return Step::Silent("the server ended the stream at once".into()),
            Err(SseError::TooLarge { .. }) => {
                let cap = shared.limits.message >> 20;
                log::warn!(
                    "MCP GET stream of {}: the server sent an event over {cap} MB; the stream was cut there",
                    shared.url
                );
                return Step::Silent(format!("an event over {cap} MB"));
            }
            Err(SseError::Io(_)) if heard => return Step::Heard,
            Err(SseError::Io(e)) => return Step::Silent(format!("the stream broke: {e}")),
        }
    }
}

fn is_event_stream(response: &ureq::http::Response<ureq::Body>) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// An SSE reader over a GET body, each line and event capped like one message.
fn event_reader(shared: &Shared, body: ureq::Body) -> SseReader<impl std::io::BufRead> {
    let limits = SseLimits {
        line: shared.limits.message,
        event: shared.limits.message,
    };
    SseReader::with_limits(
        BufReader::with_capacity(16 * 1024, body.into_reader()),
        limits,
    )
}

/// Hands the message (or batch) of one event to the client; keep-alives and priming events
/// carry none.
fn hand_on(shared: &Shared, data: &str) {
    if data.trim().is_empty() || shared.is_closed() {
        return;
    }
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Array(items)) => {
            for m in items.into_iter().filter(Value::is_object) {
                (shared.deliver)(Incoming::Message(m));
            }
        }
        Ok(m @ Value::Object(_)) => (shared.deliver)(Incoming::Message(m)),
        _ => log::debug!("MCP server sent an event that is not JSON"),
    }
}

/// Resuming one POST's answer whose event stream broke before its reply.
pub struct Resume {
    cursor: Cursor,
    /// Attempts since the last new event id.
    attempts: u32,
    until: Instant,
}

/// Why a broken answer is not resumed (any more).
pub enum Unresumed {
    /// The call fails: why, in words.
    Failed(String),
    /// What the client hears instead (a forgotten session, a refused token).
    Instead(Incoming),
    /// The call was cancelled or the connection closed: nobody waits.
    Abandoned,
}

impl Resume {
    /// Resumption within the request's whole time (`limit` from now).
    pub fn new(limit: Duration) -> Resume {
        Resume {
            cursor: Cursor::default(),
            attempts: 0,
            until: Instant::now() + limit,
        }
    }

    /// Takes the id and `retry` of the stream read so far.
    pub fn saw<R: std::io::BufRead>(&mut self, sse: &SseReader<R>) {
        if self.cursor.update(sse) {
            self.attempts = 0;
        }
    }

    /// The answer's stream again, from after its last event id: waits the server's `retry`
    /// (or a back-off), then GETs with `Last-Event-ID`. `broke` says how the stream broke.
    pub fn next(
        &mut self,
        shared: &Shared,
        agent: &ureq::Agent,
        key: &str,
        broke: &str,
    ) -> Result<ureq::Body, Unresumed> {
        let Some(last_id) = self.cursor.last_id.clone() else {
            return Err(Unresumed::Failed(broke.to_string()));
        };
        let mut why = String::new();
        loop {
            if self.attempts >= MAX_RESUMES || Instant::now() >= self.until {
                return Err(Unresumed::Failed(format!(
                    "{broke}; resuming it (GET with Last-Event-ID) failed {} times: {why}",
                    self.attempts
                )));
            }
            self.attempts += 1;
            if !self.pause(shared, key) {
                return Err(Unresumed::Abandoned);
            }
            let left = self.until.saturating_duration_since(Instant::now());
            let response = match shared.get(agent, Some(&last_id), Some(left)) {
                Ok(response) => response,
                Err(_) if !shared.in_flight(key) => return Err(Unresumed::Abandoned),
                Err(e) => {
                    why = format!("cannot reach the server: {e}");
                    continue;
                }
            };
            let status = response.status().as_u16();
            if status == 405 {
                return Err(Unresumed::Failed(format!(
                    "{broke}; the server does not resume event streams (its GET answered 405)"
                )));
            }
            if (200..300).contains(&status) {
                if is_event_stream(&response) {
                    log::debug!("MCP answer resumed after event {last_id}");
                    return Ok(response.into_body());
                }
                why = "the server answered the GET with no event stream".into();
                continue;
            }
            let refusal = http_read::refusal(shared, response);
            if let Some(gone) = refusal.incoming() {
                return Err(Unresumed::Instead(gone));
            }
            why = refusal.to_string();
        }
    }

    /// Waits before an attempt, in short steps so a cancel is seen at once; `false` when the
    /// call was given up meanwhile.
    fn pause(&self, shared: &Shared, key: &str) -> bool {
        let wait = self.cursor.wait(FIRST_RESUME, self.attempts);
        let until = (Instant::now() + wait).min(self.until);
        while Instant::now() < until {
            if !shared.in_flight(key) {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
        shared.in_flight(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_honour_retry_double_after_failures_and_stay_capped() {
        let mut cursor = Cursor::default();
        assert_eq!(cursor.wait(FIRST_WAIT, 0), FIRST_WAIT);
        assert_eq!(cursor.wait(FIRST_WAIT, 1), FIRST_WAIT);
        assert_eq!(cursor.wait(FIRST_WAIT, 3), FIRST_WAIT * 4);
        assert_eq!(cursor.wait(FIRST_WAIT, 40), FIRST_WAIT * 64);
        let data = b"retry: 3000\nid: a\ndata: x\n\n";
        let mut sse = SseReader::new(&data[..]);
        sse.next_event().unwrap();
        assert!(cursor.update(&sse), "a new id");
        assert!(!cursor.update(&sse), "the same id again");
        assert_eq!(cursor.wait(FIRST_WAIT, 0), Duration::from_secs(3));
        assert_eq!(cursor.wait(FIRST_WAIT, 40), MAX_WAIT);
        let huge = b"retry: 99999999999999999999999\ndata: x\n\n";
        let mut sse = SseReader::new(&huge[..]);
        sse.next_event().unwrap();
        cursor.update(&sse);
        assert_eq!(cursor.wait(FIRST_WAIT, 0), MAX_WAIT);
    }

    #[test]
    fn only_printable_bounded_ids_go_back_as_a_header() {
        assert!(usable_id("0f8e-1_stream:42"));
        assert!(!usable_id("a\u{7f}b"));
        assert!(!usable_id("é"));
        assert!(!usable_id(&"x".repeat(MAX_EVENT_ID + 1)));
    }
}
