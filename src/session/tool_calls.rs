//! Tool calls of a turn: run one after another on `gjc-tool` threads, each announced with
//! `tool_execution_start`/`_end` and kept as a `toolResult` message; calls that cannot run get a
//! synthetic error result with the same events.

use std::collections::VecDeque;

use super::queue::InterruptMode;
use super::run::{Phase, Run};
use super::SessionLoop;
use crate::host::HostRequest;
use crate::protocol::host_reply::HostReply;
use crate::protocol::message::{AgentMessage, StopReason, ToolCall, ToolOutput, ToolResultMessage};
use crate::protocol::AgentEvent;
use crate::tools::{self, ToolEffect, ToolEvent, ToolMsg};

const SKIPPED: &str = "Skipped due to queued user message.";

impl SessionLoop {
    /// Starts the next pending tool call, or ends the turn when none is left.
    pub(super) fn next_tool(&mut self) {
        loop {
            let Some(Phase::Tools {
                pending, assistant, ..
            }) = self.run.as_mut().map(Run::phase_mut)
            else {
                return;
            };
            let cut_off = assistant.stop_reason == StopReason::Length;
            let Some(call) = pending.pop_front() else {
                let Some(run) = &mut self.run else { return };
                let Phase::Tools {
                    assistant, results, ..
                } = run.leave()
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
            if let Some(refusal) = self.workflow_refusal(&call.name, &call.arguments) {
                self.complete_tool(&call, ToolOutput::error(refusal));
                continue;
            }
            if let Err(e) = self.state.tools.validate(&call.name, &call.arguments) {
                self.complete_tool(&call, ToolOutput::error(e.to_string()));
                continue;
            }
            match self.unattended_tool_gate(&call) {
                super::unattended::ToolGate::Run => {}
                super::unattended::ToolGate::Refuse(result) => {
                    self.complete_tool(&call, result);
                    continue;
                }
                super::unattended::ToolGate::Stop(result, breach) => {
                    self.complete_tool(&call, result);
                    return self.budget_stop(&breach);
                }
            }
            let generation = self.run.as_ref().map(|r| r.generation).unwrap_or(0);
            let services = tools::Services {
                cwd: self.state.cwd.clone(),
                bash: self.bash.clone(),
                host: self.host.clone(),
                schemes: self.state.schemes.clone(),
                policy: self.tool_policy,
                sandbox: self.sandbox_commands(),
                settings: self.state.settings.clone(),
            };
            let tool = crate::hooks::tool::HookedTool::wrap(tool, self.hooks.clone());
            let direct = tools::start_direct(
                &*tool,
                &call.arguments,
                &services,
                &call.id,
                generation,
                &self.tool_tx(),
            );
            let handle = match direct {
                // A host tool call's frame goes out with the frames before it.
                Some(tools::Started { handle, frame }) => {
                    if let Some(frame) = frame {
                        self.send(frame);
                    }
                    handle
                }
                None => {
                    // The call's own frames (a host tool call, a dialog) come after its start.
                    self.flush_out();
                    tools::spawn(
                        tool,
                        call.arguments.clone(),
                        services,
                        call.id.clone(),
                        generation,
                        self.tool_tx(),
                    )
                }
            };
            if let Some(Phase::Tools { running, .. }) = self.run.as_mut().map(Run::phase_mut) {
                *running = Some((call, handle));
            }
            return;
        }
    }

    /// A host tool answer from the reader: the running call's, when the session started it on
    /// no thread (then it is the call's message); any other belongs to a call made from a tool
    /// thread, or to none (late, unknown), and the broker, which knows those, gets it.
    pub fn on_host_answer(&mut self, reply: HostReply) {
        let ours = self.run.as_ref().and_then(|run| match run.phase() {
            Phase::Tools {
                running: Some((call, handle)),
                ..
            } if handle.host_call() == Some(reply.id()) => Some((run.generation, call.id.clone())),
            _ => None,
        });
        let Some((generation, call_id)) = ours else {
            let _ = self.host.sender().send(HostRequest::Reply(reply));
            return;
        };
        if let Some(event) = tools::host_answer(reply) {
            self.on_tool(ToolMsg {
                generation,
                call_id,
                event,
            });
        }
    }

    pub fn on_tool(&mut self, msg: ToolMsg) {
        if let ToolEvent::Gate(request) = msg.event {
            let current = self.run.as_ref().is_some_and(|r| {
                r.generation == msg.generation
                    && matches!(r.phase(), Phase::Tools { running: Some((c, _)), .. } if c.id == msg.call_id)
            });
            let owner = gate_owner(msg.generation, &msg.call_id);
            return self.on_gate_request(current.then_some(owner), request);
        }
        let Some(run) = &mut self.run else { return };
        let Phase::Tools {
            running: Some((call, _)),
            ..
        } = run.phase()
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
            ToolEvent::Done(outcome) => {
                if let Some(Phase::Tools { running, .. }) = self.run.as_mut().map(Run::phase_mut) {
                    *running = None;
                }
                for effect in outcome.effects {
                    self.apply_tool_effect(&call, effect);
                }
                self.complete_tool(&call, outcome.output);
                self.skip_rest_if_steered();
                self.next_tool();
            }
            ToolEvent::Gate(_) => {}
        }
    }

    /// What a call changes in the session besides its result (the tool said so in its outcome).
    fn apply_tool_effect(&mut self, call: &ToolCall, effect: ToolEffect) {
        match effect {
            ToolEffect::SetTodos(phases) => {
                self.state.todos = phases;
                self.show_todos();
            }
            ToolEffect::Escalated { to, approved } => self.audit_escalation(call, to, approved),
        }
    }

    /// Interrupt mode "immediate": a queued steer skips the turn's remaining tool calls.
    pub(super) fn skip_rest_if_steered(&mut self) {
        if self.state.queues.interrupt_mode != InterruptMode::Immediate
            || self.state.queues.steering.is_empty()
        {
            return;
        }
        let Some(Phase::Tools { pending, .. }) = self.run.as_mut().map(Run::phase_mut) else {
            return;
        };
        let skipped: VecDeque<ToolCall> = std::mem::take(pending);
        let results = self.fail_calls(skipped, SKIPPED);
        if let Some(Phase::Tools { results: r, .. }) = self.run.as_mut().map(Run::phase_mut) {
            r.extend(results);
        }
    }

    /// Gives every call a synthetic error result (with start/end events), returning the results.
    pub(super) fn fail_calls(
        &mut self,
        calls: VecDeque<ToolCall>,
        text: &str,
    ) -> Vec<ToolResultMessage> {
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

    pub(super) fn complete_tool(&mut self, call: &ToolCall, output: ToolOutput) {
        let result = self.tool_result(call, output);
        if let Some(Phase::Tools { results, .. }) = self.run.as_mut().map(Run::phase_mut) {
            results.push(result);
        }
    }

    /// `tool_execution_end` and the toolResult message.
    pub(super) fn tool_result(&mut self, call: &ToolCall, output: ToolOutput) -> ToolResultMessage {
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

    /// The todo list, for hosts that show one.
    pub fn show_todos(&mut self) {
        let todos = self.state.todos.clone();
        self.send(crate::protocol::Outbound::Show(
            crate::protocol::Show::Todos(todos),
        ));
    }
}

/// Who owns the gates a tool call opens: the call in its run (a model may reuse a call id).
pub(super) fn gate_owner(generation: u64, call_id: &str) -> String {
    format!("{generation}/{call_id}")
}
