//! Where the session consults the unattended control plane (`crate::control`): before each
//! command, before each of the model's tool calls, as model usage streams in and when the
//! wall-time timer fires. A budget breach stops everything under way at once through the
//! ordinary abort path (stream closed, tool cancelled, bash process group killed, host calls
//! cancelled) and ends the run with outcome `budget_exceeded`.

use serde_json::Value;

use super::reply::{Reply, Then};
use super::run::{Phase, Run, RunStop};
use super::state::Session;
use super::SessionLoop;
use crate::control::{Plane, Refusal, Verdict};
use crate::exec::JobOwner;
use crate::protocol::command::NegotiateUnattendedParams;
use crate::protocol::event::Outcome;
use crate::protocol::message::{AssistantMessage, ToolCall, ToolOutput, Usage};
use crate::protocol::outbound::TypedError;
use crate::protocol::{Command, Response};

/// What becomes of one of the model's tool calls.
pub enum ToolGate {
    Run,
    /// Not allowed: this error is its result.
    Refuse(ToolOutput),
    /// Over budget: this error is its result, then the run stops with the breach.
    Stop(ToolOutput, Box<Refusal>),
}

/// Streamed characters per token, for the live estimate before the provider's count arrives.
const CHARS_PER_TOKEN: f64 = 4.0;

/// The plane for a session starting now: its id is the run id; whether usage can be metered is
/// decided once, from the startup model (none, or one whose `compat` says it sends no usage
/// while streaming, cannot be metered).
pub fn plane_for(state: &Session) -> Plane {
    let capable = state.model.as_ref().is_some_and(|m| {
        let flag = m
            .compat
            .as_ref()
            .and_then(|c| c.get("supportsUsageInStreaming"))
            .and_then(Value::as_bool);
        flag != Some(false)
    });
    Plane::new(&state.id, capable, state.session_dir.clone())
}

fn typed(r: &Refusal) -> TypedError {
    TypedError {
        code: r.code,
        message: r.message.clone(),
    }
}

impl SessionLoop {
    pub(super) fn negotiate_unattended(
        &mut self,
        id: Option<Value>,
        p: NegotiateUnattendedParams,
    ) -> Reply {
        let command = "negotiate_unattended";
        let response = match self
            .unattended
            .negotiate(p.declaration.as_ref(), &self.state.id)
        {
            Ok(accepted) => Response::ok(id, command, Some(&accepted)),
            Err(r) => Response::err_detailed(id, command, typed(&r), r.details),
        };
        Reply::now(response)
    }

    /// The preflight of a command: its refusal, if refused (the first breach of the budget
    /// then stops what runs, after the refusal).
    pub(super) fn unattended_refusal(
        &mut self,
        id: &Option<Value>,
        command: &Command,
    ) -> Option<Reply> {
        let bash = match command {
            Command::Bash(b) => Some(b.command.as_str()),
            _ => None,
        };
        let name = command.name();
        let verdict = self.unattended.preflight(name, bash, &self.state.id);
        let (refusal, first) = match verdict {
            Verdict::Allow => return None,
            Verdict::Deny(r) => (r, false),
            Verdict::Exceeded { refusal, first } => (refusal, first),
        };
        let details = refusal.details.clone();
        let reply = Reply::now(Response::err_detailed(
            id.clone(),
            name,
            typed(&refusal),
            details,
        ));
        Some(match first {
            true => reply.then(Then::BudgetStop(refusal)),
            false => reply,
        })
    }

    /// Before one of the model's tool calls.
    pub(super) fn unattended_tool_gate(&mut self, call: &ToolCall) -> ToolGate {
        let verdict =
            self.unattended
                .tool_call(&call.name, &call.id, &call.arguments, &self.state.id);
        match verdict {
            Verdict::Allow => ToolGate::Run,
            Verdict::Deny(r) => {
                let text = format!("{}: {}", r.code, r.message);
                if let Some(run) = &mut self.run {
                    run.denied.push(r.details);
                }
                ToolGate::Refuse(ToolOutput::error(text))
            }
            Verdict::Exceeded { refusal, .. } => {
                let text = format!("{}: {}", refusal.code, refusal.message);
                ToolGate::Stop(ToolOutput::error(text), Box::new(refusal))
            }
        }
    }

    /// Streamed output counts as it arrives (about four characters a token, priced at the
    /// model's output rate), beyond what the provider has reported so far.
    pub(super) fn unattended_delta(&mut self, stream: u64, added: usize) {
        if !self.unattended.is_unattended() || added == 0 {
            return;
        }
        let price = self.state.model.as_ref().map_or(0.0, |m| m.cost.output) / 1.0e6;
        let tokens = added as f64 / CHARS_PER_TOKEN;
        let verdict = self
            .unattended
            .stream_output(stream, tokens, price, &self.state.id);
        self.stop_if_first_breach(verdict);
    }

    /// The provider reported the streaming request's usage so far.
    pub(super) fn unattended_usage(&mut self, stream: u64, usage: &Usage) {
        let verdict = self.unattended.stream_report(stream, usage, &self.state.id);
        self.stop_if_first_breach(verdict);
    }

    fn stop_if_first_breach(&mut self, verdict: Verdict) {
        if let Verdict::Exceeded {
            refusal,
            first: true,
        } = verdict
        {
            self.budget_stop(&refusal);
        }
    }

    /// A model reply ended (done or failed) with the provider's usage. `true` when that usage
    /// breached the budget and the run was stopped (the reply is kept, its tool calls are not
    /// run).
    pub(super) fn unattended_commit(&mut self, message: &AssistantMessage) -> bool {
        if !self.unattended.is_unattended() {
            return false;
        }
        let u = &message.usage;
        let tokens = u
            .total_tokens
            .max(u.input + u.output + u.cache_read + u.cache_write);
        let verdict = self
            .unattended
            .commit(tokens as f64, u.cost.total, &self.state.id);
        let Verdict::Exceeded {
            refusal,
            first: true,
        } = verdict
        else {
            return false;
        };
        if let Some(Phase::Streaming { partial, .. }) = self.run.as_mut().map(Run::phase_mut) {
            *partial = message.clone();
        }
        self.budget_stop(&refusal);
        true
    }

    /// The wall-time timer.
    pub(super) fn unattended_tick(&mut self) {
        let verdict = self.unattended.tick(&self.state.id);
        self.stop_if_first_breach(verdict);
    }

    /// Marks the run as ending for the budget, without stopping it yet.
    fn pending_stop(&mut self, refusal: &Refusal) {
        if let Some(run) = &mut self.run {
            run.stop = Some(RunStop {
                outcome: Outcome::BudgetExceeded,
                message: format!("{}: {}", refusal.code, refusal.message),
                details: refusal.details.clone(),
            });
        }
    }

    /// The first breach: the host's `bash` is killed (and answered with the breach instead of
    /// its result) and the run aborted, ending with outcome `budget_exceeded`.
    pub(super) fn budget_stop(&mut self, refusal: &Refusal) {
        self.pending_stop(refusal);
        if let Some((id, _)) = self.user_bash.take() {
            self.bash.abort(JobOwner::User);
            let details = refusal.details.clone();
            self.respond(Response::err_detailed(id, "bash", typed(refusal), details));
        }
        self.abort_run();
        self.unattended.abort_settled(&self.state.id);
    }
}
