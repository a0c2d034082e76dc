//! A model turn's stream as the run sees it: provider messages (deltas, usage, the final
//! message), failures (retried, compacted or final), a rule that fires mid-stream, and the timer
//! that notices a stream gone silent.

use std::time::Instant;

use super::compaction::Origin;
use super::run::{stall_timeout, strip_partial_json, Phase, Told, RETRY_STATUS};
use super::SessionLoop;
use crate::protocol::message::{AgentMessage, AssistantMessage, StopReason};
use crate::protocol::AgentEvent;
use crate::provider::{ProviderEvent, ProviderFailure, ProviderMsg};
use crate::tools::{ToolEvent, ToolMsg};

impl SessionLoop {
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
            watch,
            ..
        } = run.phase_mut()
        else {
            return;
        };
        if *stream != msg.generation {
            return;
        }
        let stream_id = *stream;
        *last_event = Instant::now();
        match *msg.event {
            ProviderEvent::Start => {
                if !*started {
                    *started = true;
                    let message = AgentMessage::Assistant(partial.clone());
                    self.emit(AgentEvent::MessageStart { message });
                }
            }
            ProviderEvent::Delta(ev) => {
                if let Some(w) = watch {
                    let fired = self.state.rules.check(w, &ev);
                    if !fired.is_empty() {
                        return self.interrupt_for_rules(fired);
                    }
                }
                // Announced before the delta applies: the writer follows the message from here.
                let announce = (!*started).then(|| AgentMessage::Assistant(partial.clone()));
                partial.apply(&ev);
                *started = true;
                if let Some(message) = announce {
                    self.emit(AgentEvent::MessageStart { message });
                }
                let added = ev.delta_len();
                self.emit_update(ev);
                self.unattended_delta(stream_id, added);
            }
            ProviderEvent::Usage(usage) => self.unattended_usage(stream_id, &usage),
            ProviderEvent::Done(message) => {
                if !self.unattended_commit(&message) {
                    self.finish_streamed(*message)
                }
            }
            ProviderEvent::Failed(failure) => {
                if !self.unattended_commit(&failure.message) {
                    self.on_failure(*failure)
                }
            }
        }
    }

    /// Conditional rules matched the stream: it is stopped and its partial reply discarded (the
    /// host sees that message end, the context never holds it), the rules are announced,
    /// remembered in the session file and added as a reminder, and the request is sent again.
    /// This is part of the same turn and run, and not a retry.
    fn interrupt_for_rules(&mut self, fired: Vec<usize>) {
        let Some(run) = &mut self.run else { return };
        let Phase::Streaming {
            handle,
            mut partial,
            started,
            ..
        } = run.leave()
        else {
            return;
        };
        handle.abort();
        let rules: Vec<crate::rules::Rule> = fired
            .iter()
            .map(|&i| self.state.rules.get(i).clone())
            .collect();
        let names: Vec<String> = rules.iter().map(|r| r.name.clone()).collect();
        if started {
            partial.stop_reason = StopReason::Aborted;
            partial.error_message = Some(format!("Interrupted by rule: {}", names.join(", ")));
            strip_partial_json(&mut partial);
            self.emit(AgentEvent::MessageEnd {
                message: AgentMessage::Assistant(partial),
            });
        }
        self.emit(AgentEvent::TtsrTriggered {
            rules: rules.iter().map(crate::rules::Rule::to_wire).collect(),
        });
        let entry = self.state.store.ttsr.record(&names);
        let _ = self.state.store.append("ttsr_injection", entry);
        self.emit_store_notices();
        self.add_message(AgentMessage::User(crate::rules::reminder(&rules)));
        self.request_model();
    }

    fn stream_started(&self) -> bool {
        self.run
            .as_ref()
            .is_some_and(|r| matches!(r.phase(), Phase::Streaming { started: true, .. }))
    }

    fn finish_streamed(&mut self, message: AssistantMessage) {
        // A finished reply is a turn for the repeat gap of conditional rules.
        self.state.store.ttsr.turn_done();
        let told = Told::started(self.stream_started());
        self.finish_assistant(message, told);
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
                Err(e) => self.emit(AgentEvent::AutoCompactionEnd {
                    action: "context-full",
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(e.to_string()),
                }),
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
            self.set_status(RETRY_STATUS, Some(status));
            if let Some(run) = &mut self.run {
                run.retry_attempt = attempt;
                run.enter(Phase::RetryWait {
                    until: Instant::now() + delay,
                    failed: failure.message,
                    told: if started { Told::Ended } else { Told::Nothing },
                });
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
            self.set_status(RETRY_STATUS, None);
            if let Some(run) = &mut self.run {
                run.retry_attempt = 0;
            }
        }
        self.finish_assistant(failure.message, Told::started(started));
    }

    pub fn on_timer(&mut self) {
        let stall = stall_timeout(&self.state.settings);
        let Some(run) = &mut self.run else { return };
        match run.phase() {
            Phase::RetryWait { until, .. } if Instant::now() >= *until => self.request_model(),
            Phase::AwaitServers { .. } => self.resume_after_servers(true),
            Phase::Streaming {
                last_event,
                handle,
                partial,
                ..
            } if last_event.elapsed() >= stall => {
                handle.abort();
                let mut failed = partial.clone();
                failed.stop_reason = StopReason::Error;
                failed.error_message = Some(format!(
                    "stream stalled: no data for {} s",
                    stall.as_secs_f64()
                ));
                strip_partial_json(&mut failed);
                self.on_failure(ProviderFailure {
                    message: failed,
                    transient: true,
                    retry_after: None,
                    overflow: false,
                });
            }
            // A call whose clock the session keeps (an MCP call on no thread) timed out.
            Phase::Tools {
                running: Some((call, handle)),
                ..
            } => {
                if let Some(output) = handle.expire(Instant::now()) {
                    let msg = ToolMsg {
                        generation: run.generation,
                        call_id: call.id.clone(),
                        event: ToolEvent::Done(output.into()),
                    };
                    self.on_tool(msg);
                }
            }
            _ => {}
        }
    }
}
