//! The agent loop as a state machine driven by events: a run streams a model turn, executes its
//! tool calls one after another, and loops while tools ran or queued messages wait. Retries happen
//! inside the run, so a run always ends with exactly one `agent_end`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

mod phase;

pub use phase::{Phase, PhaseKind, Run, RunStop, Told};

use super::SessionLoop;
use crate::exec::JobOwner;
use crate::protocol::event::Outcome;
use crate::protocol::message::{
    AgentMessage, AssistantMessage, Content, StopReason, ToolCall, ToolOutput, ToolResultMessage,
    UserMessage,
};
use crate::protocol::AgentEvent;
use crate::provider::{self, ProviderRequest};

/// How long a stream may go without a single event before it counts as stalled.
pub(super) fn stall_timeout(settings: &crate::settings::Settings) -> Duration {
    settings.stream_idle_timeout
}

/// The status line shown while a retry waits; cleared when the retry ends either way.
pub(super) const RETRY_STATUS: &str = "gjc.retry";

const ABORTED: &str = "Tool execution was aborted";

impl SessionLoop {
    pub fn is_busy(&self) -> bool {
        self.run.is_some()
    }

    /// The next timer: a retry back-off, or the stall watchdog of a stream.
    pub fn deadline(&self) -> Option<Instant> {
        self.run
            .as_ref()?
            .deadline(stall_timeout(&self.state.settings))
    }

    /// Starts a run with the given prompt messages (the queue of steering messages follows them).
    pub fn start_run(&mut self, prompt: Vec<UserMessage>) {
        self.open_run();
        self.first_turn(prompt);
    }

    /// `agent_start`: the session is busy from here; returns the run's generation.
    pub(super) fn open_run(&mut self) -> u64 {
        let generation = self.next_generation();
        self.run = Some(Run::new(generation));
        self.emit(AgentEvent::AgentStart {});
        generation
    }

    /// The run's first turn: the prompt messages, then the queued steering ones, then the model.
    pub(super) fn first_turn(&mut self, prompt: Vec<UserMessage>) {
        self.emit(AgentEvent::TurnStart {});
        let steering = self.state.queues.poll_steering();
        for m in prompt.into_iter().chain(steering) {
            self.add_message(AgentMessage::User(m));
        }
        self.request_model();
    }

    /// Appends a message to the context and the run, announcing it with message_start/end.
    pub(super) fn add_message(&mut self, message: AgentMessage) {
        self.record(message.clone());
        self.emit(AgentEvent::MessageStart {
            message: message.clone(),
        });
        self.emit(AgentEvent::MessageEnd { message });
    }

    /// Writes a message to the session file, then keeps it in the context and the run. A failed
    /// write is reported once (a `notice` event and `get_state.sessionSaveError`), and so is the
    /// first write that succeeds again; meanwhile the run goes on in memory.
    pub fn record(&mut self, message: AgentMessage) {
        if self.state.store.is_persistent()
            && !self.state.store.is_on_disk()
            && self.state.store.ensure_on_disk().is_ok()
        {
            self.write_selection();
        }
        // Written with the step's frames (`flush_out`), after the next request is on its way.
        let entry_id = self.state.store.queue_message(&message);
        if let Some(run) = &mut self.run {
            run.produced.push(message.clone());
        }
        self.state.messages.push(message, entry_id.ok());
    }

    /// Tells the host what the session store noted: saving stopped or resumed, a file repaired.
    pub fn emit_store_notices(&mut self) {
        for n in self.state.store.take_notices() {
            let (level, message) = (n.level, n.message);
            self.emit(AgentEvent::Notice {
                level,
                message,
                source: Some("session"),
            });
        }
    }

    /// Records the model and thinking level, so a reopened session starts with them.
    pub fn write_selection(&mut self) {
        if let Some(m) = &self.state.model {
            let model = format!("{}/{}", m.provider, m.id);
            let _ = self
                .state
                .store
                .append("model_change", serde_json::json!({ "model": model }));
        }
        let level = self.state.thinking;
        let _ = self.state.store.append(
            "thinking_level_change",
            serde_json::json!({ "thinkingLevel": level }),
        );
    }

    pub(super) fn request_model(&mut self) {
        if self.await_servers() {
            return;
        }
        let ready = self.state.credentials().and_then(|c| {
            // The scripted provider reads the messages; the others get them encoded.
            if c.0.api == crate::provider::catalog::Api::Scripted {
                let messages = self.state.messages.parsed().map_err(|e| e.to_string())?;
                Ok((c, messages.to_vec(), None))
            } else {
                let history = (self.state.messages)
                    .encoded_history(&c.0)
                    .map_err(|e| e.to_string())?;
                Ok((c, Vec::new(), Some(history)))
            }
        });
        let ((model, api_key), messages, history) = match ready {
            Ok(r) => r,
            Err(e) => {
                let mut failed = match &self.state.model {
                    Some(m) => AssistantMessage::empty(m.api.as_str(), &m.provider, &m.id),
                    None => AssistantMessage::empty("", "", ""),
                };
                failed.stop_reason = StopReason::Error;
                failed.error_message = Some(e);
                return self.finish_assistant(failed, Told::Nothing);
            }
        };
        let request = ProviderRequest {
            model,
            api_key,
            system_prompt: self.state.system_prompt.clone(),
            messages,
            history,
            tools: self.state.tools.specs(),
            thinking: self.state.thinking,
            session_id: self.state.id.clone(),
            scripted: self.state.scripted(),
            limits: provider::Limits::of(&self.state.settings),
        };
        let stream = self.next_generation();
        let watch = self.state.rules.watch(&self.state.store.ttsr);
        let handle = provider::start_stream(request, stream, self.provider_tx());
        let m = &self.state.model;
        let partial = m
            .as_ref()
            .map(|m| AssistantMessage::empty(m.api.as_str(), &m.provider, &m.id))
            .unwrap_or_else(|| AssistantMessage::empty("", "", ""));
        if let Some(run) = &mut self.run {
            run.enter(Phase::Streaming {
                stream,
                handle,
                partial,
                started: false,
                last_event: Instant::now(),
                watch,
            });
        }
    }

    /// Keeps the final assistant message, then closes it for the host: `message_start` too when
    /// the stream never started one, nothing when a retried attempt already ended it.
    fn close_assistant(&mut self, message: &AssistantMessage, told: Told) {
        self.record(AgentMessage::Assistant(message.clone()));
        if told == Told::Nothing {
            self.emit(AgentEvent::MessageStart {
                message: AgentMessage::Assistant(message.clone()),
            });
        }
        if told != Told::Ended {
            self.emit(AgentEvent::MessageEnd {
                message: AgentMessage::Assistant(message.clone()),
            });
        }
    }

    /// The assistant message is final: announce it, keep it, then run its tools or end the turn.
    pub(super) fn finish_assistant(&mut self, message: AssistantMessage, told: Told) {
        self.close_assistant(&message, told);
        let ok = !matches!(message.stop_reason, StopReason::Error | StopReason::Aborted);
        if let Some(run) = &mut self.run {
            if ok && run.retry_attempt > 0 {
                let attempt = run.retry_attempt;
                run.retry_attempt = 0;
                self.emit(AgentEvent::AutoRetryEnd {
                    success: true,
                    attempt,
                    final_error: None,
                });
                self.set_status(RETRY_STATUS, None);
            }
        }
        let calls: VecDeque<ToolCall> = message.tool_calls().cloned().collect();
        if !ok {
            let text = match message.stop_reason {
                StopReason::Aborted => ABORTED.to_string(),
                _ => format!(
                    "Tool execution failed due to an error: {}",
                    message.error_message.clone().unwrap_or_default()
                ),
            };
            let results = self.fail_calls(calls, &text);
            return self.end_turn(message, results);
        }
        if calls.is_empty() {
            return self.end_turn(message, Vec::new());
        }
        if let Some(run) = &mut self.run {
            run.enter(Phase::Tools {
                assistant: message,
                pending: calls,
                running: None,
                results: Vec::new(),
            });
        }
        self.next_tool();
    }

    /// `turn_end`, then another turn when tools ran or messages are queued, else the run ends.
    pub(super) fn end_turn(
        &mut self,
        assistant: AssistantMessage,
        results: Vec<ToolResultMessage>,
    ) {
        let failure = match assistant.stop_reason {
            StopReason::Aborted => Some((Outcome::Aborted, None)),
            StopReason::Error => Some((Outcome::Error, assistant.error_message.clone())),
            _ => None,
        };
        let ran_tools = !results.is_empty();
        self.emit_turn_end(assistant, results);
        if let Some((outcome, error)) = failure {
            return self.end_run(outcome, error);
        }
        if let Some(reason) = self.take_denial() {
            return self.end_run(Outcome::Denied, Some(reason));
        }
        let mut next = self.state.queues.poll_steering();
        if next.is_empty() && !ran_tools {
            next = self.state.queues.poll_follow_up();
        }
        if next.is_empty() && !ran_tools {
            match self.todo_reminder() {
                Some(reminder) => next.push(reminder),
                None => {
                    self.clear_finished_todos();
                    if self.over_threshold() && self.start_maintenance() {
                        return;
                    }
                    return self.end_run(Outcome::Completed, None);
                }
            }
        }
        self.emit(AgentEvent::TurnStart {});
        for m in next {
            self.add_message(AgentMessage::User(m));
        }
        self.request_model();
    }

    fn emit_turn_end(&mut self, assistant: AssistantMessage, results: Vec<ToolResultMessage>) {
        self.emit(AgentEvent::TurnEnd {
            message: AgentMessage::Assistant(assistant),
            tool_results: results.into_iter().map(AgentMessage::ToolResult).collect(),
        });
    }

    /// `agent_end`, exactly once per run. `stopReason` is `completed` whatever the outcome (the
    /// value published clients accept); `outcome` says how the run really ended.
    fn end_run(&mut self, outcome: Outcome, error_message: Option<String>) {
        let Some(run) = self.run.take() else { return };
        let (outcome, error_message, error_details) = match run.stop {
            Some(stop) => (stop.outcome, Some(stop.message), Some(stop.details)),
            None => (outcome, error_message, None),
        };
        self.emit(AgentEvent::AgentEnd {
            messages: run.produced,
            stop_reason: "completed",
            outcome,
            error_message,
            error_details,
            denied_actions: run.denied,
        });
        for b in run.deferred_bash {
            self.record(AgentMessage::BashExecution(b));
        }
    }

    /// Stops the run now: the stream is shut down, running tools are cancelled, the partial
    /// assistant message is kept with stop reason `aborted`, and exactly one `agent_end` follows.
    pub fn abort_run(&mut self) {
        self.abort_compaction();
        let Some(run) = &mut self.run else { return };
        let phase = run.leave();
        let attempt = run.retry_attempt;
        match phase {
            // The prompt never reached the context: the run ends with no message.
            Phase::BeforePrompt { hooks, .. } => {
                hooks.cancel(&self.bash);
                self.end_run(Outcome::Aborted, None);
            }
            Phase::Streaming {
                handle,
                mut partial,
                started,
                ..
            } => {
                handle.abort();
                partial.stop_reason = StopReason::Aborted;
                let why = run.stop.as_ref().map(|s| s.message.clone());
                partial.error_message = Some(why.unwrap_or_else(|| "Request was aborted".into()));
                strip_partial_json(&mut partial);
                self.finish_aborted(partial, Told::started(started));
            }
            Phase::Tools {
                assistant,
                pending,
                running,
                mut results,
            } => {
                if let Some((call, handle)) = running {
                    if let Some(withdraw) = handle.cancel() {
                        self.send(withdraw);
                    }
                    let generation = self.run.as_ref().map_or(0, |r| r.generation);
                    self.withdraw_gates_of(&super::tool_calls::gate_owner(generation, &call.id));
                    self.bash.abort(JobOwner::Tool(call.id.clone()));
                    results.push(self.tool_result(&call, ToolOutput::error(ABORTED)));
                }
                results.extend(self.fail_calls(pending, ABORTED));
                self.emit_turn_end(assistant, results);
                self.end_run(Outcome::Aborted, None);
            }
            Phase::RetryWait { failed, told, .. } => {
                self.emit(AgentEvent::AutoRetryEnd {
                    success: false,
                    attempt,
                    final_error: Some("Retry cancelled".into()),
                });
                self.set_status(RETRY_STATUS, None);
                if let Some(run) = &mut self.run {
                    run.retry_attempt = 0;
                }
                self.finish_aborted(failed, told);
            }
            Phase::Compacting | Phase::Idle | Phase::AwaitServers { .. } => {
                self.end_run(Outcome::Aborted, None)
            }
        }
    }

    fn finish_aborted(&mut self, message: AssistantMessage, told: Told) {
        self.close_assistant(&message, told);
        let calls: VecDeque<ToolCall> = message.tool_calls().cloned().collect();
        let results = self.fail_calls(calls, ABORTED);
        self.emit_turn_end(message, results);
        self.end_run(Outcome::Aborted, None);
    }

    /// `abort_retry`: gives up the pending retry; the failed message ends the run.
    pub fn abort_retry(&mut self) {
        let Some(run) = &mut self.run else { return };
        if !matches!(run.phase(), Phase::RetryWait { .. }) {
            return;
        }
        let attempt = run.retry_attempt;
        run.retry_attempt = 0;
        let Phase::RetryWait { failed, told, .. } = run.leave() else {
            return;
        };
        self.emit(AgentEvent::AutoRetryEnd {
            success: false,
            attempt,
            final_error: Some("Retry cancelled".into()),
        });
        self.set_status(RETRY_STATUS, None);
        self.finish_assistant(failed, told);
    }

    /// After a threshold compaction the run ends as it would have.
    pub fn end_run_completed(&mut self) {
        self.end_run(Outcome::Completed, None);
    }

    /// After an overflow compaction the same request is made again, once. The rejected attempt's
    /// message, if the host saw it start, is closed but not kept.
    pub fn retry_after_compaction(&mut self, failed: AssistantMessage, started: bool) {
        if started {
            self.emit(AgentEvent::MessageEnd {
                message: AgentMessage::Assistant(failed),
            });
        }
        self.request_model();
    }

    /// The overflow could not be compacted: the failed message ends the run.
    pub fn fail_after_compaction(&mut self, failed: AssistantMessage, started: bool) {
        self.finish_assistant(failed, Told::started(started));
    }
}

pub(super) fn strip_partial_json(message: &mut AssistantMessage) {
    for c in &mut message.content {
        if let Content::ToolCall(call) = c {
            if let Some(raw) = call.partial_json.take() {
                call.incomplete_arguments = true;
                if let Some(v) = provider::builder::parse_arguments(&raw) {
                    call.arguments = v;
                }
            }
        }
    }
}
