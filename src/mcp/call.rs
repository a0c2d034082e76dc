//! An MCP tool call with no thread waiting for it. The session sends `tools/call` itself (a
//! send never waits for the server) and the server's reader thread reports the call's progress
//! and its end straight to the session, as a host's answer reaches it for a host tool: no tool
//! thread sits between the server and the session, and the answer crosses one thread instead
//! of three. The session keeps the [`McpCall`] to time it out (its clock) and to abort it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::client::{Client, Progress, Reply, Started};
use super::tool::{outcome, progress_output, McpTool};
use crate::protocol::message::ToolOutput;
use crate::tools::{DirectCall, DirectStart, DirectStep, Report};

/// A call under way, kept by the session.
pub struct McpCall {
    client: Arc<Client>,
    /// `None` when the call could not be sent (its end is already reported).
    started: Option<Started>,
    clock: Arc<Clock>,
    /// The message of a call that timed out.
    timed_out: ToolOutput,
}

/// A call's deadline: its timeout counts from the last sign of life (a progress
/// notification), and never past ten times the timeout from its start (as `Client::request`).
struct Clock {
    timeout: Duration,
    hard_limit: Instant,
    deadline: Mutex<Instant>,
}

impl Clock {
    fn new(timeout: Duration) -> Clock {
        let now = Instant::now();
        Clock {
            timeout,
            hard_limit: now + timeout.saturating_mul(10),
            deadline: Mutex::new(now + timeout),
        }
    }

    fn alive(&self) {
        let next = (Instant::now() + self.timeout).min(self.hard_limit);
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = next;
    }

    fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DirectStart for McpTool {
    /// Starts a call when its server is ready; `report` hears its progress and its end, from
    /// the server's reader thread (or at once, when the call could not be sent). `None` when
    /// the server is not ready: the call then runs on a thread, which restarts a crashed
    /// server on the way and says why it cannot when it cannot.
    fn start(&self, args: &Value, call_id: &str, report: Report) -> Option<Box<dyn DirectCall>> {
        let client = self.server.ready_client()?;
        let report: Arc<dyn Fn(DirectStep) + Send + Sync> = Arc::from(report);
        let clock = Arc::new(Clock::new(self.server.config.tool_timeout));
        let on_progress = {
            let (report, clock) = (report.clone(), clock.clone());
            Arc::new(move |p: Progress| {
                clock.alive();
                report(DirectStep::Progress(progress_output(&p)));
            })
        };
        let on_reply = {
            let report = report.clone();
            let (server, tool) = (self.server.config.name.clone(), self.def.name.clone());
            let timeout = self.server.config.tool_timeout;
            Box::new(move |reply: Reply| {
                report(DirectStep::Done(outcome(reply, &server, &tool, timeout)))
            })
        };
        let params = json!({"name": self.def.name, "arguments": args});
        let started =
            match client.start("tools/call", params, Some((call_id, on_progress)), on_reply) {
                Ok(started) => Some(started),
                Err(e) => {
                    report(DirectStep::Done(self.outcome(Err(e))));
                    None
                }
            };
        Some(Box::new(McpCall {
            client,
            started,
            clock,
            timed_out: self.outcome(Err(super::client::Failure::TimedOut)),
        }))
    }
}

impl DirectCall for McpCall {
    /// When the call times out, as it stands (progress moves it); `None` for a call that was
    /// never sent.
    fn deadline(&self) -> Option<Instant> {
        self.started.as_ref().map(|_| self.clock.deadline())
    }

    /// The result a call past its deadline ends with; the server is told it was given up.
    /// `None` while time is left, and when its answer came first (it is on its way).
    fn expire(&self, now: Instant) -> Option<ToolOutput> {
        let started = self.started.as_ref()?;
        if now < self.clock.deadline() {
            return None;
        }
        if !self.client.give_up(started, "timed out") {
            return None;
        }
        Some(self.timed_out.clone())
    }

    /// Gives the call up (the run was aborted): the server hears `notifications/cancelled`.
    fn abort(&self) {
        if let Some(started) = &self.started {
            self.client.give_up(started, "cancelled by the user");
        }
    }
}
