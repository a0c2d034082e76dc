//! The `gjc-host` thread: owner of every callback the agent makes to the host (host tool calls,
//! host URI requests, extension UI dialogs). It routes the host's replies back to whoever waits,
//! writes cancel frames, enforces deadlines, and rejects everything pending when stdin closes.
//! Replies with unknown ids, duplicates and late replies after a cancel are logged and dropped.
//!
//! A caller registers its callback and queues the request frame itself ([`HostHandle::call`],
//! [`HostHandle::register`]): the broker learns of the call before the frame is queued, so no
//! reply can reach it first, and a turn that waits on the host crosses no extra thread on its
//! way out.
//!
//! A host tool call that the session started on no thread never comes here: the RPC reader hands
//! host tool answers to the session, which answers its own call and passes every other answer
//! on to the broker (`tools::start_direct`). Ids come from one counter per broker
//! ([`HostHandle::mint`]), so the session's ids and cancels never collide with the broker's.

pub mod terminal;
pub mod tools;
pub mod ui;
pub mod uri;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{after, never, select_biased, unbounded, Receiver, Sender};

use crate::protocol::host_reply::{HostReply, HostUriResult, UiResponse};
use crate::protocol::message::ToolOutput;
use crate::protocol::terminal::{TerminalExit, TerminalFrame};
use crate::protocol::{FlatFrame, Outbound};

pub enum HostRequest {
    /// A reply read from stdin.
    Reply(HostReply),
    Call(HostCall),
    Cancel {
        id: String,
    },
    /// The front end's answer to a terminal run (`CallKind::Terminal`).
    TerminalDone {
        id: String,
        result: Result<TerminalExit, String>,
    },
    /// The process is shutting down: reject everything.
    Shutdown {
        reason: String,
    },
    /// One session ended: reject its calls only.
    EndSession {
        session: u64,
        reason: String,
    },
}

/// One outbound callback, registered under the id its caller was given.
pub struct HostCall {
    pub id: String,
    /// The session that made it (`HostHandle::for_session`).
    pub session: u64,
    pub kind: CallKind,
    pub timeout: Option<Duration>,
    pub reply: Deliver,
}

/// Where the broker hands a call's events: most callers wait on a channel
/// ([`HostHandle::call`]); a host tool started without a thread turns them into the session's
/// tool messages ([`HostHandle::call_with`]).
pub type Deliver = Box<dyn FnMut(HostEvent) + Send>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    Tool,
    Uri,
    Ui,
    /// A command in the front end's terminal (`TerminalFrame`); no RPC host is asked.
    Terminal,
}

#[derive(Debug)]
pub enum HostEvent {
    ToolUpdate {
        id: String,
        partial: ToolOutput,
    },
    ToolResult {
        id: String,
        result: ToolOutput,
        is_error: bool,
    },
    UriResult(HostUriResult),
    Ui(UiResponse),
    TerminalExit(TerminalExit),
    /// No answer will come: timeout, cancel, or the host went away.
    Rejected {
        id: String,
        reason: String,
        timed_out: bool,
    },
}

#[derive(Clone)]
pub struct HostHandle {
    tx: Sender<HostRequest>,
    /// Calls without a deadline, taken by the broker before it handles its next request.
    quiet: Sender<HostCall>,
    /// Where this handle's request frames go: the session's own output lane.
    out: crate::output::OutTx,
    /// The last id given out, shared by every handle of one broker.
    next: Arc<AtomicU64>,
    /// The session this handle calls for (0: the process's own).
    session: u64,
}

impl HostHandle {
    /// Registers a callback and writes its request frame (`build` makes it from the id); the
    /// broker's answers come on `reply`. Returns the id (to cancel by), or `None` when the
    /// broker has stopped and nothing was written.
    pub fn call(
        &self,
        kind: CallKind,
        timeout: Option<Duration>,
        reply: Sender<HostEvent>,
        build: impl FnOnce(String) -> Outbound,
    ) -> Option<String> {
        let deliver = Box::new(move |event| {
            let _ = reply.send(event);
        });
        self.call_with(kind, timeout, deliver, build)
    }

    /// [`HostHandle::call`], with the broker handing each event to `reply` on its own thread.
    pub fn call_with(
        &self,
        kind: CallKind,
        timeout: Option<Duration>,
        reply: Deliver,
        build: impl FnOnce(String) -> Outbound,
    ) -> Option<String> {
        let id = self.register(kind, timeout, reply)?;
        let _ = self.out.send(build(id.clone()));
        Some(id)
    }

    /// Registers a callback whose request frame the caller queues itself, once this has
    /// returned its id (the broker then knows the call before the host can answer it). `None`
    /// when the broker has stopped.
    pub fn register(
        &self,
        kind: CallKind,
        timeout: Option<Duration>,
        reply: Deliver,
    ) -> Option<String> {
        let id = self.mint(kind);
        let call = HostCall {
            id: id.clone(),
            session: self.session,
            kind,
            timeout,
            reply,
        };
        // A call with a deadline wakes the broker to arm its timer. One without waits in `quiet`
        // until the broker wakes for something else: an answer or a cancel for it can only come
        // after it, as a request, and the broker takes the quiet calls before any request (one
        // wake-up and one context switch fewer on the way to the host).
        let sent = match timeout {
            Some(_) => self.tx.send(HostRequest::Call(call)).is_ok(),
            None => self.quiet.send(call).is_ok(),
        };
        sent.then_some(id)
    }

    pub fn cancel(&self, id: String) {
        let _ = self.tx.send(HostRequest::Cancel { id });
    }

    /// A new call id of `kind` (`host_3`), for a call the caller answers itself.
    pub fn mint(&self, kind: CallKind) -> String {
        mint(&self.next, prefix(kind))
    }

    /// The frame that withdraws a host tool call the caller answers itself.
    pub fn tool_cancel(&self, target_id: &str) -> Outbound {
        Outbound::Frame(FlatFrame::HostToolCancel {
            id: mint(&self.next, "host_cancel"),
            target_id: target_id.to_string(),
        })
    }

    /// The same broker for session `session`, whose request frames go to `out`.
    pub fn for_session(&self, session: u64, out: crate::output::OutTx) -> HostHandle {
        HostHandle {
            out,
            session,
            ..self.clone()
        }
    }

    /// Rejects the pending calls of this handle's session; the broker goes on for the others.
    pub fn end_session(&self, reason: &str) {
        let _ = self.tx.send(HostRequest::EndSession {
            session: self.session,
            reason: reason.into(),
        });
    }

    pub fn shutdown(&self, reason: &str) {
        let _ = self.tx.send(HostRequest::Shutdown {
            reason: reason.into(),
        });
    }

    pub fn sender(&self) -> Sender<HostRequest> {
        self.tx.clone()
    }
}

struct Pending {
    session: u64,
    kind: CallKind,
    reply: Deliver,
    deadline: Option<Instant>,
}

struct HostActor {
    requests: Receiver<HostRequest>,
    quiet: Receiver<HostCall>,
    out: crate::output::OutTx,
    pending: HashMap<String, Pending>,
    /// The handles' id counter: cancel ids come from it too.
    next: Arc<AtomicU64>,
}

pub fn spawn(
    out: crate::output::OutTx,
) -> std::io::Result<(HostHandle, std::thread::JoinHandle<()>)> {
    let (tx, requests) = unbounded();
    let (quiet_tx, quiet) = unbounded();
    let next = Arc::new(AtomicU64::new(0));
    let handle = HostHandle {
        tx,
        quiet: quiet_tx,
        out: out.clone(),
        next: next.clone(),
        session: 0,
    };
    let actor = HostActor {
        requests,
        quiet,
        out,
        pending: HashMap::new(),
        next,
    };
    let thread = std::thread::Builder::new()
        .name("gjc-host".into())
        .spawn(move || actor.run())?;
    Ok((handle, thread))
}

impl HostActor {
    fn run(mut self) {
        loop {
            let deadline = self.pending.values().filter_map(|p| p.deadline).min();
            let timer = deadline
                .map(|d| after(d.saturating_duration_since(Instant::now())))
                .unwrap_or(never());
            select_biased! {
                recv(self.requests) -> req => {
                    self.take_quiet();
                    match req {
                        Ok(HostRequest::Reply(reply)) => self.reply(reply),
                        Ok(HostRequest::Call(call)) => self.call(call),
                        Ok(HostRequest::Cancel { id }) => self.cancel(&id, "cancelled"),
                        Ok(HostRequest::TerminalDone { id, result }) => self.terminal_done(&id, result),
                        Ok(HostRequest::Shutdown { reason }) => { self.reject_all(&reason, None); break; }
                        Ok(HostRequest::EndSession { session, reason }) => self.reject_all(&reason, Some(session)),
                        Err(_) => { self.reject_all("RPC client disconnected", None); break; }
                    }
                },
                recv(timer) -> _ => self.expire(),
            }
        }
    }

    /// Registers the calls that came without waking the broker (before any request is handled).
    fn take_quiet(&mut self) {
        while let Ok(call) = self.quiet.try_recv() {
            self.call(call);
        }
    }

    fn call(&mut self, call: HostCall) {
        let deadline = call.timeout.map(|t| Instant::now() + t);
        self.pending.insert(
            call.id,
            Pending {
                session: call.session,
                kind: call.kind,
                reply: call.reply,
                deadline,
            },
        );
    }

    /// Only a terminal call is answered this way; anything else under `id` keeps waiting.
    fn terminal_done(&mut self, id: &str, result: Result<TerminalExit, String>) {
        if self.pending.get(id).map(|p| p.kind) != Some(CallKind::Terminal) {
            log::warn!("ignoring a terminal answer for {id}, which is not a running terminal");
            return;
        }
        let Some(mut p) = self.pending.remove(id) else {
            return;
        };
        let event = match result {
            Ok(exit) => HostEvent::TerminalExit(exit),
            Err(reason) => HostEvent::Rejected {
                id: id.to_string(),
                reason,
                timed_out: false,
            },
        };
        (p.reply)(event);
    }

    fn reply(&mut self, reply: HostReply) {
        let id = reply.id().to_string();
        let Some(pending) = self.pending.get_mut(&id) else {
            log::warn!("ignoring host reply for unknown or finished id {id}");
            return;
        };
        let expected = match &reply {
            HostReply::ToolUpdate(_) | HostReply::ToolResult(_) => CallKind::Tool,
            HostReply::UriResult(_) => CallKind::Uri,
            HostReply::UiResponse(_) => CallKind::Ui,
        };
        if pending.kind != expected {
            log::warn!(
                "ignoring {expected:?} reply for {:?} call {id}",
                pending.kind
            );
            return;
        }
        let event = match reply {
            HostReply::ToolUpdate(u) => {
                (pending.reply)(HostEvent::ToolUpdate {
                    id,
                    partial: u.partial_result,
                });
                return;
            }
            HostReply::ToolResult(r) => HostEvent::ToolResult {
                id: id.clone(),
                result: r.result,
                is_error: r.is_error,
            },
            HostReply::UriResult(r) => HostEvent::UriResult(r),
            HostReply::UiResponse(r) => HostEvent::Ui(r),
        };
        if let Some(mut p) = self.pending.remove(&id) {
            (p.reply)(event);
        }
    }

    fn cancel(&mut self, id: &str, reason: &str) {
        let Some(p) = self.pending.remove(id) else {
            return;
        };
        let cancel_id = mint(&self.next, &format!("{}_cancel", prefix(p.kind)));
        let frame = match p.kind {
            CallKind::Tool => FlatFrame::HostToolCancel {
                id: cancel_id,
                target_id: id.to_string(),
            },
            CallKind::Uri => FlatFrame::HostUriCancel {
                id: cancel_id,
                target_id: id.to_string(),
            },
            // A withdrawn dialog: like the host tool and URI cancels, the frame has its own id
            // and names the dialog in `targetId` (the pairing the published client's types use).
            CallKind::Ui => FlatFrame::ExtensionUiRequest(crate::protocol::outbound::UiRequest {
                id: cancel_id,
                method: "cancel",
                fields: [("targetId".to_string(), id.into())].into_iter().collect(),
            }),
            CallKind::Terminal => {
                let target_id = id.to_string();
                let _ = self
                    .out
                    .send(Outbound::Terminal(TerminalFrame::Cancel { target_id }));
                return self.rejected(p, id, reason);
            }
        };
        let _ = self.out.send(Outbound::Frame(frame));
        self.rejected(p, id, reason);
    }

    fn rejected(&self, mut p: Pending, id: &str, reason: &str) {
        (p.reply)(HostEvent::Rejected {
            id: id.to_string(),
            reason: reason.into(),
            timed_out: false,
        });
    }

    fn expire(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for id in due {
            if let Some(mut p) = self.pending.remove(&id) {
                (p.reply)(HostEvent::Rejected {
                    id,
                    reason: "timed out".into(),
                    timed_out: true,
                });
            }
        }
    }

    /// At shutdown: every pending callback is cancelled towards the host (so it stops working
    /// on it) and rejected towards its waiter.
    /// Rejects every pending call, or those of one session.
    fn reject_all(&mut self, reason: &str, session: Option<u64>) {
        let pending: Vec<(String, CallKind)> = self
            .pending
            .iter()
            .filter(|(_, p)| session.is_none_or(|s| p.session == s))
            .map(|(id, p)| (id.clone(), p.kind))
            .collect();
        for (id, kind) in pending {
            let what = match kind {
                CallKind::Tool => "host tool execution",
                CallKind::Uri => "host URI request",
                CallKind::Ui => "UI request",
                CallKind::Terminal => "terminal command",
            };
            self.cancel(&id, &format!("{reason} before {what} completed"));
        }
    }
}

/// The next id on `next` under `prefix`.
fn mint(next: &AtomicU64, prefix: &str) -> String {
    let n = next.fetch_add(1, Ordering::Relaxed) + 1;
    format!("{prefix}_{n}")
}

/// The prefix of a call's id, and of its cancel's.
fn prefix(kind: CallKind) -> &'static str {
    match kind {
        CallKind::Tool => "host",
        CallKind::Uri => "uri",
        CallKind::Ui => "ui",
        CallKind::Terminal => "term",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::host_reply::HostToolResult;

    const WAIT: Duration = Duration::from_secs(5);

    /// A call without a deadline, with its events on a channel.
    fn quiet_call(host: &HostHandle) -> (String, Receiver<HostEvent>) {
        let (tx, rx) = unbounded();
        let deliver: Deliver = Box::new(move |event| {
            let _ = tx.send(event);
        });
        (host.register(CallKind::Tool, None, deliver).unwrap(), rx)
    }

    fn result(id: &str, text: &str) -> HostRequest {
        HostRequest::Reply(HostReply::ToolResult(HostToolResult {
            id: id.into(),
            result: ToolOutput::text(text),
            is_error: false,
        }))
    }

    /// The broker is not woken for a call without a deadline, yet knows it by the time the
    /// host's answer arrives; and calls are numbered by the handle, each kind on its own prefix.
    #[test]
    fn a_quiet_call_is_known_when_its_answer_comes() {
        let (out, _frames, _wake) = crate::output::lane();
        let (host, _thread) = spawn(out).unwrap();
        let (first, first_rx) = quiet_call(&host);
        let (second, second_rx) = quiet_call(&host);
        assert_eq!((first.as_str(), second.as_str()), ("host_1", "host_2"));
        host.sender().send(result(&second, "two")).unwrap();
        host.sender().send(result(&first, "one")).unwrap();
        for (rx, text) in [(second_rx, "two"), (first_rx, "one")] {
            match rx.recv_timeout(WAIT).unwrap() {
                HostEvent::ToolResult { result, .. } => {
                    assert_eq!(result.content, ToolOutput::text(text).content)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// A quiet call still pending at shutdown is cancelled towards the host and rejected
    /// towards its waiter, like any other.
    #[test]
    fn shutdown_rejects_quiet_calls_and_cancels_them_on_the_wire() {
        let (out, frames, _wake) = crate::output::lane();
        let (host, thread) = spawn(out).unwrap();
        let (id, rx) = quiet_call(&host);
        host.shutdown("stdin closed");
        thread.join().unwrap();
        match rx.recv_timeout(WAIT).unwrap() {
            HostEvent::Rejected { id: rejected, .. } => assert_eq!(rejected, id),
            other => panic!("{other:?}"),
        }
        let cancel = frames.receivers().1.recv_timeout(WAIT).unwrap();
        match cancel.frame {
            Outbound::Frame(FlatFrame::HostToolCancel { target_id, .. }) => {
                assert_eq!(target_id, id)
            }
            _ => panic!("not a host tool cancel"),
        }
        assert!(
            host.register(CallKind::Tool, None, Box::new(|_| {}))
                .is_none(),
            "a stopped broker takes no call"
        );
    }
}
