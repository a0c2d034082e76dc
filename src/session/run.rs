//! The agent loop as a state machine driven by events: a run streams a model turn, executes its
//! tool calls one after another, and loops while tools ran or queued messages wait. Retries happen
//! inside the run, so a run always ends with exactly one `agent_end`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::compaction::Origin;
use super::queue::InterruptMode;
use super::SessionLoop;
use crate::exec::{BashEvent, JobOwner};
use crate::protocol::message::{
    AgentMessage, AssistantMessage, BashExecutionMessage, Content, StopReason, ToolCall,
    ToolOutput, ToolResultMessage, UserMessage,
};
use crate::protocol::{AgentEvent, Response};
use crate::provider::{
    self, ProviderEvent, ProviderFailure, ProviderMsg, ProviderRequest, StreamHandle,
};
use crate::tools::{self, ToolEvent, ToolHandle, ToolMsg};

/// How long a stream may go without a single event before it counts as stalled.
fn stall_timeout() -> Duration {
    let ms = std::env::var("GJC_STREAM_IDLE_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    Duration::from_millis(ms)
}

pub struct Run {
    pub generation: u64,
    /// Messages produced by this run, for `agent_end`.
    pub produced: Vec<AgentMessage>,
    pub phase: Phase,
    pub retry_attempt: u32,
    /// User `bash` executions that finished during the run; appended when it ends so they never
    /// split a tool call from its result.
    pub deferred_bash: Vec<BashExecutionMessage>,
    /// A context overflow was already compacted once in this run; a second one is an error.
    pub overflow_compacted: bool,
}

pub enum Phase {
    Streaming {
        stream: u64,
        handle: StreamHandle,
        partial: AssistantMessage,
        started: bool,
        last_event: Instant,
    },
    Tools {
        assistant: AssistantMessage,
        pending: VecDeque<ToolCall>,
        running: Option<(ToolCall, ToolHandle)>,
        results: Vec<ToolResultMessage>,
    },
    RetryWait {
        until: Instant,
        failed: AssistantMessage,
    },
    /// Waiting for an automatic compaction (`SessionLoop::compaction`).
    Compacting,
    /// Between phases (never observed outside a method).
    Idle,
}

const SKIPPED: &str = "Skipped due to queued user message.";
const ABORTED: &str = "Tool execution was aborted";

impl SessionLoop {
    pub fn is_busy(&self) -> bool {
        self.run.is_some()
    }

    /// The next timer: a retry back-off, or the stall watchdog of a stream.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.run.as_ref()?.phase {
            Phase::RetryWait { until, .. } => Some(*until),
            Phase::Streaming { last_event, .. } => Some(*last_event + stall_timeout()),
            _ => None,
        }
    }

    /// Starts a run with the given prompt messages (the queue of steering messages follows them).
    pub fn start_run(&mut self, prompt: Vec<UserMessage>) {
        let generation = self.next_generation();
        self.run = Some(Run {
            generation,
            produced: Vec::new(),
            phase: Phase::Idle,
            retry_attempt: 0,
            deferred_bash: Vec::new(),
            overflow_compacted: false,
        });
        self.emit(AgentEvent::AgentStart {});
        self.emit(AgentEvent::TurnStart {});
        let steering = self.state.queues.poll_steering();
        for m in prompt.into_iter().chain(steering) {
            self.add_message(AgentMessage::User(m));
        }
        self.request_model();
    }

    /// Appends a message to the context and the run, announcing it with message_start/end.
    fn add_message(&mut self, message: AgentMessage) {
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
        let entry_id = self.state.store.append_message(&message);
        self.emit_store_notices();
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

    fn request_model(&mut self) {
        let ready = self.state.credentials().and_then(|c| {
            let messages = self.state.messages.messages()?.clone();
            Ok((c, messages))
        });
        let ((model, api_key), messages) = match ready {
            Ok(r) => r,
            Err(e) => {
                let mut failed = match &self.state.model {
                    Some(m) => AssistantMessage::empty(m.api.as_str(), &m.provider, &m.id),
                    None => AssistantMessage::empty("", "", ""),
                };
                failed.stop_reason = StopReason::Error;
                failed.error_message = Some(e);
                return self.finish_assistant(failed, false);
            }
        };
        let request = ProviderRequest {
            model,
            api_key,
            system_prompt: self.state.system_prompt.clone(),
            messages,
            tools: self.state.tools.specs(),
            thinking: self.state.thinking,
            session_id: self.state.id.clone(),
            scripted: self.state.scripted(),
        };
        let stream = self.next_generation();
        let handle = provider::start_stream(request, stream, self.provider_tx());
        let m = &self.state.model;
        let partial = m
            .as_ref()
            .map(|m| AssistantMessage::empty(m.api.as_str(), &m.provider, &m.id))
            .unwrap_or_else(|| AssistantMessage::empty("", "", ""));
        if let Some(run) = &mut self.run {
            run.phase = Phase::Streaming {
                stream,
                handle,
                partial,
                started: false,
                last_event: Instant::now(),
            };
        }
    }

    pub fn on_provider(&mut self, msg: ProviderMsg) {
        if self
            .compaction
            .as_ref()
            .is_some_and(|c| c.stream == msg.generation)
        {
            return self.on_compaction(msg);
        }
        let Some(run) = &mut self.run else { return };
        let Phase::Streaming {
            stream,
            partial,
            started,
            last_event,
            ..
        } = &mut run.phase
        else {
            return;
        };
        if *stream != msg.generation {
            return;
        }
        *last_event = Instant::now();
        match msg.event {
            ProviderEvent::Start => {
                if !*started {
                    *started = true;
                    let message = AgentMessage::Assistant(partial.clone());
                    self.emit(AgentEvent::MessageStart { message });
                }
            }
            ProviderEvent::Delta(ev) => {
                partial.apply(&ev);
                let announce = (!*started).then(|| AgentMessage::Assistant(partial.clone()));
                *started = true;
                let snapshot =
                    (!self.compact_updates).then(|| AgentMessage::Assistant(partial.clone()));
                if let Some(message) = announce {
                    self.emit(AgentEvent::MessageStart { message });
                }
                self.emit_update(ev, snapshot);
            }
            ProviderEvent::Done(message) => self.finish_streamed(message),
            ProviderEvent::Failed(failure) => self.on_failure(failure),
        }
    }

    fn emit_update(
        &mut self,
        ev: crate::protocol::message::StreamEvent,
        snapshot: Option<AgentMessage>,
    ) {
        if matches!(ev, crate::protocol::message::StreamEvent::Block { .. }) {
            return;
        }
        // Compact frames carry no snapshot at all: periodic checkpoints (as the reference sends)
        // would make the stream grow with the message again; `message_end` is authoritative.
        let compact = self.compact_updates;
        self.emit(AgentEvent::MessageUpdate {
            message: snapshot,
            assistant_message_event: ev,
            compact,
        });
    }

    fn stream_started(&self) -> bool {
        matches!(
            &self.run,
            Some(Run {
                phase: Phase::Streaming { started: true, .. },
                ..
            })
        )
    }

    fn finish_streamed(&mut self, message: AssistantMessage) {
        let started = self.stream_started();
        self.finish_assistant(message, started);
    }

    fn on_failure(&mut self, failure: ProviderFailure) {
        let started = self.stream_started();
        let can_compact =
            self.run.as_ref().is_some_and(|r| !r.overflow_compacted) && self.state.auto_compaction;
        if failure.overflow && can_compact {
            if let Some(run) = &mut self.run {
                run.overflow_compacted = true;
            }
            match self.start_compaction(
                Origin::Overflow(Box::new(failure.message.clone()), started),
                None,
            ) {
                Ok(()) => return,
                Err(e) => {
                    let result: Result<serde_json::Value, String> = Err(e);
                    self.emit(AgentEvent::AutoCompactionEnd {
                        action: "context-full",
                        result: None,
                        aborted: false,
                        will_retry: false,
                        error_message: result.err(),
                    });
                }
            }
        }
        let policy = self.state.retry.clone();
        let attempt = self.run.as_ref().map(|r| r.retry_attempt).unwrap_or(0);
        if failure.transient && policy.enabled && attempt < policy.max_attempts {
            let attempt = attempt + 1;
            let delay = policy.delay(attempt, failure.retry_after);
            if started {
                self.emit(AgentEvent::MessageEnd {
                    message: AgentMessage::Assistant(failure.message.clone()),
                });
            }
            let error_message = failure.message.error_message.clone().unwrap_or_default();
            self.emit(AgentEvent::AutoRetryStart {
                attempt,
                max_attempts: policy.max_attempts,
                delay_ms: delay.as_millis() as u64,
                error_message,
            });
            // Hosts without event rendering still learn why the agent pauses.
            let status = format!(
                "Retrying (attempt {attempt} of {}) in {:.1} s",
                policy.max_attempts,
                delay.as_secs_f64()
            );
            self.send(crate::protocol::Outbound::Frame(crate::host::ui::notice(
                "setStatus",
                serde_json::json!({"statusKey": "gjc.retry", "statusText": status}),
            )));
            if let Some(run) = &mut self.run {
                run.retry_attempt = attempt;
                run.phase = Phase::RetryWait {
                    until: Instant::now() + delay,
                    failed: failure.message,
                };
            }
            return;
        }
        if attempt > 0 {
            let final_error = failure.message.error_message.clone();
            self.emit(AgentEvent::AutoRetryEnd {
                success: false,
                attempt,
                final_error,
            });
            if let Some(run) = &mut self.run {
                run.retry_attempt = 0;
            }
        }
        self.finish_assistant(failure.message, started);
    }

    pub fn on_timer(&mut self) {
        let Some(run) = &mut self.run else { return };
        match &run.phase {
            Phase::RetryWait { until, .. } if Instant::now() >= *until => self.request_model(),
            Phase::Streaming {
                last_event,
                handle,
                partial,
                ..
            } if last_event.elapsed() >= stall_timeout() => {
                handle.abort();
                let mut failed = partial.clone();
                failed.stop_reason = StopReason::Error;
                failed.error_message = Some(format!(
                    "stream stalled: no data for {} s",
                    stall_timeout().as_secs_f64()
                ));
                strip_partial_json(&mut failed);
                self.on_failure(ProviderFailure {
                    message: failed,
                    transient: true,
                    retry_after: None,
                    overflow: false,
                });
            }
            _ => {}
        }
    }

    /// Keeps the final assistant message, then announces it (`message_start` too when the stream
    /// never started one).
    fn close_assistant(&mut self, message: &AssistantMessage, started: bool) {
        self.record(AgentMessage::Assistant(message.clone()));
        if !started {
            self.emit(AgentEvent::MessageStart {
                message: AgentMessage::Assistant(message.clone()),
            });
        }
        self.emit(AgentEvent::MessageEnd {
            message: AgentMessage::Assistant(message.clone()),
        });
    }

    /// The assistant message is final: announce it, keep it, then run its tools or end the turn.
    fn finish_assistant(&mut self, message: AssistantMessage, started: bool) {
        self.close_assistant(&message, started);
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
            run.phase = Phase::Tools {
                assistant: message,
                pending: calls,
                running: None,
                results: Vec::new(),
            };
        }
        self.next_tool();
    }

    /// Starts the next pending tool call, or ends the turn when none is left.
    fn next_tool(&mut self) {
        loop {
            let Some(Run {
                phase: Phase::Tools {
                    pending, assistant, ..
                },
                ..
            }) = &mut self.run
            else {
                return;
            };
            let cut_off = assistant.stop_reason == StopReason::Length;
            let Some(call) = pending.pop_front() else {
                let Some(run) = &mut self.run else { return };
                let Phase::Tools {
                    assistant, results, ..
                } = std::mem::replace(&mut run.phase, Phase::Idle)
                else {
                    return;
                };
                return self.end_turn(assistant, results);
            };
            self.emit(AgentEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
            });
            if cut_off || call.incomplete_arguments {
                let text = "This tool call was cut off by the output token limit before its arguments were complete, so it was not run. Re-issue it with complete arguments, splitting the work into smaller steps if needed.";
                self.complete_tool(&call, ToolOutput::error(text));
                continue;
            }
            let Some(tool) = self.state.tools.get(&call.name) else {
                self.complete_tool(
                    &call,
                    ToolOutput::error(format!("Tool {} not found", call.name)),
                );
                continue;
            };
            if let Err(e) = self.state.tools.validate(&call.name, &call.arguments) {
                self.complete_tool(&call, ToolOutput::error(e));
                continue;
            }
            let generation = self.run.as_ref().map(|r| r.generation).unwrap_or(0);
            let services = tools::Services {
                cwd: self.state.cwd.clone(),
                bash: self.bash.clone(),
                host: self.host.clone(),
                schemes: self.state.schemes.clone(),
            };
            let handle = tools::spawn(
                tool,
                call.arguments.clone(),
                services,
                call.id.clone(),
                generation,
                self.tool_tx(),
            );
            if let Some(Run {
                phase: Phase::Tools { running, .. },
                ..
            }) = &mut self.run
            {
                *running = Some((call, handle));
            }
            return;
        }
    }

    pub fn on_tool(&mut self, msg: ToolMsg) {
        let Some(run) = &mut self.run else { return };
        let Phase::Tools {
            running: Some((call, _)),
            ..
        } = &run.phase
        else {
            return;
        };
        if run.generation != msg.generation || call.id != msg.call_id {
            return;
        }
        let call = call.clone();
        match msg.event {
            ToolEvent::Update(partial) => self.emit(AgentEvent::ToolExecutionUpdate {
                tool_call_id: call.id,
                tool_name: call.name,
                args: call.arguments,
                partial_result: partial,
            }),
            ToolEvent::Done(output) => {
                if let Some(Run {
                    phase: Phase::Tools { running, .. },
                    ..
                }) = &mut self.run
                {
                    *running = None;
                }
                self.apply_tool_side_effects(&call, &output);
                self.complete_tool(&call, output);
                self.skip_rest_if_steered();
                self.next_tool();
            }
        }
    }

    /// `todo_write` results carry the new phases for `get_state.todoPhases`.
    fn apply_tool_side_effects(&mut self, call: &ToolCall, output: &ToolOutput) {
        if call.name == "todo_write" && !output.is_error {
            if let Some(phases) = output.details.as_ref().and_then(|d| d.get("todoPhases")) {
                if let Ok(p) = serde_json::from_value(phases.clone()) {
                    self.state.todos = p;
                    self.show_todos();
                }
            }
        }
    }

    /// Interrupt mode "immediate": a queued steer skips the turn's remaining tool calls.
    fn skip_rest_if_steered(&mut self) {
        if self.state.queues.interrupt_mode != InterruptMode::Immediate
            || self.state.queues.steering.is_empty()
        {
            return;
        }
        let Some(Run {
            phase: Phase::Tools { pending, .. },
            ..
        }) = &mut self.run
        else {
            return;
        };
        let skipped: VecDeque<ToolCall> = std::mem::take(pending);
        let results = self.fail_calls(skipped, SKIPPED);
        if let Some(Run {
            phase: Phase::Tools { results: r, .. },
            ..
        }) = &mut self.run
        {
            r.extend(results);
        }
    }

    /// Gives every call a synthetic error result (with start/end events), returning the results.
    fn fail_calls(&mut self, calls: VecDeque<ToolCall>, text: &str) -> Vec<ToolResultMessage> {
        calls
            .into_iter()
            .map(|call| {
                self.emit(AgentEvent::ToolExecutionStart {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    args: call.arguments.clone(),
                });
                self.tool_result(&call, ToolOutput::error(text))
            })
            .collect()
    }

    fn complete_tool(&mut self, call: &ToolCall, output: ToolOutput) {
        let result = self.tool_result(call, output);
        if let Some(Run {
            phase: Phase::Tools { results, .. },
            ..
        }) = &mut self.run
        {
            results.push(result);
        }
    }

    /// `tool_execution_end` and the toolResult message.
    fn tool_result(&mut self, call: &ToolCall, output: ToolOutput) -> ToolResultMessage {
        let is_error = output.is_error;
        let message = ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: output.content.clone(),
            details: output.details.clone(),
            is_error,
            timestamp: crate::ids::now_ms(),
        };
        let announced = AgentMessage::ToolResult(message.clone());
        self.record(announced.clone());
        self.emit(AgentEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            result: output,
            is_error,
        });
        self.emit(AgentEvent::MessageStart {
            message: announced.clone(),
        });
        self.emit(AgentEvent::MessageEnd { message: announced });
        message
    }

    /// `turn_end`, then another turn when tools ran or messages are queued, else the run ends.
    fn end_turn(&mut self, assistant: AssistantMessage, results: Vec<ToolResultMessage>) {
        let failed = matches!(
            assistant.stop_reason,
            StopReason::Error | StopReason::Aborted
        );
        let ran_tools = !results.is_empty();
        self.emit(AgentEvent::TurnEnd {
            message: AgentMessage::Assistant(assistant),
            tool_results: results,
        });
        if failed {
            return self.end_run("completed");
        }
        let mut next = self.state.queues.poll_steering();
        if next.is_empty() && !ran_tools {
            next = self.state.queues.poll_follow_up();
        }
        if next.is_empty() && !ran_tools {
            if self.over_threshold() && self.start_compaction(Origin::Threshold, None).is_ok() {
                return;
            }
            return self.end_run("completed");
        }
        self.emit(AgentEvent::TurnStart {});
        for m in next {
            self.add_message(AgentMessage::User(m));
        }
        self.request_model();
    }

    fn end_run(&mut self, stop_reason: &'static str) {
        let Some(run) = self.run.take() else { return };
        self.emit(AgentEvent::AgentEnd {
            messages: run.produced,
            stop_reason: Some(stop_reason),
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
        let phase = std::mem::replace(&mut run.phase, Phase::Idle);
        let attempt = run.retry_attempt;
        match phase {
            Phase::Streaming {
                handle,
                mut partial,
                started,
                ..
            } => {
                handle.abort();
                partial.stop_reason = StopReason::Aborted;
                partial.error_message = Some("Request was aborted".into());
                strip_partial_json(&mut partial);
                self.finish_aborted(partial, started);
            }
            Phase::Tools {
                assistant,
                pending,
                running,
                mut results,
            } => {
                if let Some((call, handle)) = running {
                    handle
                        .cancel
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    self.bash.abort(JobOwner::Tool(call.id.clone()));
                    results.push(self.tool_result(&call, ToolOutput::error(ABORTED)));
                }
                results.extend(self.fail_calls(pending, ABORTED));
                self.emit(AgentEvent::TurnEnd {
                    message: AgentMessage::Assistant(assistant),
                    tool_results: results,
                });
                self.end_run("cancelled");
            }
            Phase::RetryWait { failed, .. } => {
                self.emit(AgentEvent::AutoRetryEnd {
                    success: false,
                    attempt,
                    final_error: Some("Retry cancelled".into()),
                });
                if let Some(run) = &mut self.run {
                    run.retry_attempt = 0;
                }
                self.finish_aborted(failed, true);
            }
            Phase::Compacting | Phase::Idle => self.end_run("cancelled"),
        }
    }

    fn finish_aborted(&mut self, message: AssistantMessage, started: bool) {
        self.close_assistant(&message, started);
        let calls: VecDeque<ToolCall> = message.tool_calls().cloned().collect();
        let results = self.fail_calls(calls, ABORTED);
        self.emit(AgentEvent::TurnEnd {
            message: AgentMessage::Assistant(message),
            tool_results: results,
        });
        self.end_run("cancelled");
    }

    /// `abort_retry`: gives up the pending retry; the failed message ends the run.
    pub fn abort_retry(&mut self) {
        let Some(run) = &mut self.run else { return };
        if !matches!(run.phase, Phase::RetryWait { .. }) {
            return;
        }
        let attempt = run.retry_attempt;
        run.retry_attempt = 0;
        let Phase::RetryWait { failed, .. } = std::mem::replace(&mut run.phase, Phase::Idle) else {
            return;
        };
        self.emit(AgentEvent::AutoRetryEnd {
            success: false,
            attempt,
            final_error: Some("Retry cancelled".into()),
        });
        self.finish_assistant(failed, true);
    }

    /// The todo list as a widget for hosts that show one (`setWidget`).
    pub fn show_todos(&mut self) {
        let lines: Vec<String> = self
            .state
            .todos
            .iter()
            .flat_map(|p| {
                std::iter::once(p.name.clone()).chain(p.tasks.iter().map(|t| {
                    let mark = match t.status.as_str() {
                        "completed" => "[x]",
                        "in_progress" => "[>]",
                        "abandoned" => "[-]",
                        _ => "[ ]",
                    };
                    format!("  {mark} {}", t.content)
                }))
            })
            .collect();
        let frame = crate::host::ui::notice(
            "setWidget",
            serde_json::json!({"widgetKey": "gjc.todos", "widgetLines": lines}),
        );
        self.send(crate::protocol::Outbound::Frame(frame));
    }

    /// After a threshold compaction the run ends as it would have.
    pub fn end_run_completed(&mut self) {
        self.end_run("completed");
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
        self.finish_assistant(failed, started);
    }

    /// A user `bash` command finished: answer it and record it for the model.
    pub fn on_bash(&mut self, event: BashEvent) {
        let BashEvent::Exit {
            owner: JobOwner::User,
            result,
        } = event
        else {
            return;
        };
        let Some((id, command)) = self.user_bash.take() else {
            return;
        };
        if let Some(e) = result.spawn_error {
            return self.respond(Response::err(id, "bash", e));
        }
        let path = result
            .full_output_path
            .as_ref()
            .map(|p| p.display().to_string());
        let mut data = serde_json::json!({
            "output": result.output,
            "cancelled": result.cancelled,
            "truncated": result.truncated,
            "totalLines": result.total_lines,
            "totalBytes": result.total_bytes,
        });
        if let Some(code) = result.exit_code {
            data["exitCode"] = Value::from(code);
        }
        if let Some(p) = &path {
            data["fullOutputPath"] = Value::from(p.clone());
        }
        if result.timed_out {
            data["timedOut"] = Value::Bool(true);
        }
        self.respond(Response::ok(id, "bash", Some(data)));
        let record = BashExecutionMessage {
            command,
            output: result.output,
            exit_code: result.exit_code,
            cancelled: result.cancelled,
            truncated: result.truncated,
            full_output_path: path,
            timestamp: crate::ids::now_ms(),
        };
        match &mut self.run {
            Some(run) => run.deferred_bash.push(record),
            None => self.record(AgentMessage::BashExecution(record)),
        }
    }
}

fn strip_partial_json(message: &mut AssistantMessage) {
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
