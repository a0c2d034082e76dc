//! The `gjc-host` thread: owner of every callback the agent makes to the host (host tool calls,
//! host URI requests, extension UI dialogs). It assigns ids, writes the request frame, routes the
//! host's replies back to whoever waits, writes cancel frames, enforces deadlines, and rejects
//! everything pending when stdin closes. Replies with unknown ids, duplicates and late replies
//! after a cancel are logged and dropped.

pub mod terminal;
pub mod tools;
pub mod ui;
pub mod uri;

use std::collections::HashMap;
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
    /// The session is shutting down: reject everything.
    Shutdown {
        reason: String,
    },
}

/// One outbound callback. `frame` is built by `build` with the id the broker assigns.
pub struct HostCall {
    pub kind: CallKind,
    pub build: Box<dyn FnOnce(String) -> Outbound + Send>,
    pub timeout: Option<Duration>,
    pub reply: Sender<HostEvent>,
    /// Lets the caller learn the id (to cancel later).
    pub id_tx: Option<Sender<String>>,
}

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
}

impl HostHandle {
    pub fn call(&self, call: HostCall) {
        let _ = self.tx.send(HostRequest::Call(call));
    }

    pub fn cancel(&self, id: String) {
        let _ = self.tx.send(HostRequest::Cancel { id });
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
    kind: CallKind,
    reply: Sender<HostEvent>,
    deadline: Option<Instant>,
}

struct HostActor {
    requests: Receiver<HostRequest>,
    out: crate::output::OutTx,
    pending: HashMap<String, Pending>,
    next: u64,
    cancel_next: u64,
}

pub fn spawn(
    out: crate::output::OutTx,
) -> std::io::Result<(HostHandle, std::thread::JoinHandle<()>)> {
    let (tx, requests) = unbounded();
    let actor = HostActor {
        requests,
        out,
        pending: HashMap::new(),
        next: 0,
        cancel_next: 0,
    };
    let thread = std::thread::Builder::new()
        .name("gjc-host".into())
        .spawn(move || actor.run())?;
    Ok((HostHandle { tx }, thread))
}

impl HostActor {
    fn run(mut self) {
        loop {
            let deadline = self.pending.values().filter_map(|p| p.deadline).min();
            let timer = deadline
                .map(|d| after(d.saturating_duration_since(Instant::now())))
                .unwrap_or(never());
            select_biased! {
                recv(self.requests) -> req => match req {
                    Ok(HostRequest::Reply(reply)) => self.reply(reply),
                    Ok(HostRequest::Call(call)) => self.call(call),
                    Ok(HostRequest::Cancel { id }) => self.cancel(&id, "cancelled"),
                    Ok(HostRequest::TerminalDone { id, result }) => self.terminal_done(&id, result),
                    Ok(HostRequest::Shutdown { reason }) => { self.reject_all(&reason); break; }
                    Err(_) => { self.reject_all("RPC client disconnected"); break; }
                },
                recv(timer) -> _ => self.expire(),
            }
        }
    }

    fn call(&mut self, call: HostCall) {
        self.next += 1;
        let id = format!("{}_{}", prefix(call.kind), self.next);
        if let Some(tx) = &call.id_tx {
            let _ = tx.send(id.clone());
        }
        let frame = (call.build)(id.clone());
        let deadline = call.timeout.map(|t| Instant::now() + t);
        self.pending.insert(
            id,
            Pending {
                kind: call.kind,
                reply: call.reply,
                deadline,
            },
        );
        let _ = self.out.send(frame);
    }

    /// Only a terminal call is answered this way; anything else under `id` keeps waiting.
    fn terminal_done(&mut self, id: &str, result: Result<TerminalExit, String>) {
        if self.pending.get(id).map(|p| p.kind) != Some(CallKind::Terminal) {
            log::warn!("ignoring a terminal answer for {id}, which is not a running terminal");
            return;
        }
        let Some(p) = self.pending.remove(id) else {
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
        let _ = p.reply.send(event);
    }

    fn reply(&mut self, reply: HostReply) {
        let id = reply.id().to_string();
        let Some(pending) = self.pending.get(&id) else {
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
                let _ = pending.reply.send(HostEvent::ToolUpdate {
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
        if let Some(p) = self.pending.remove(&id) {
            let _ = p.reply.send(event);
        }
    }

    fn cancel(&mut self, id: &str, reason: &str) {
        let Some(p) = self.pending.remove(id) else {
            return;
        };
        self.cancel_next += 1;
        let cancel_id = format!("{}_cancel_{}", prefix(p.kind), self.cancel_next);
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

    fn rejected(&self, p: Pending, id: &str, reason: &str) {
        let _ = p.reply.send(HostEvent::Rejected {
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
            if let Some(p) = self.pending.remove(&id) {
                let _ = p.reply.send(HostEvent::Rejected {
                    id,
                    reason: "timed out".into(),
                    timed_out: true,
                });
            }
        }
    }

    /// At shutdown: every pending callback is cancelled towards the host (so it stops working
    /// on it) and rejected towards its waiter.
    fn reject_all(&mut self, reason: &str) {
        let pending: Vec<(String, CallKind)> = self
            .pending
            .iter()
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

/// The prefix of a call's id, and of its cancel's.
fn prefix(kind: CallKind) -> &'static str {
    match kind {
        CallKind::Tool => "host",
        CallKind::Uri => "uri",
        CallKind::Ui => "ui",
        CallKind::Terminal => "term",
    }
}
