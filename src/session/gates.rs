//! The session's side of workflow gates: it owns the broker (one per session id, reloaded when
//! the session changes), opens gates for tool calls and writes their frames, answers
//! `workflow_gate_response` and `get_pending_workflow_gates`, starts workflow stages from
//! `/deep-interview`, `/ralplan` and `/ultragoal` prompts, and applies answers to the stage.

use serde_json::{json, Value};

use super::reply::CommandError;
use super::SessionLoop;
use crate::control::AuditEvent;
use crate::gates::{Broker, GateRequest, OpenWhat, Opened, Waiter};
use crate::protocol::command::WorkflowGateResponseParams;
use crate::protocol::gate::{PendingGates, WorkflowGate};
use crate::protocol::message::{AgentMessage, UserMessage};
use crate::protocol::{AgentEvent, FlatFrame, Outbound};
use crate::workflow::{self, StageState};

impl SessionLoop {
    /// Takes the current session's broker out of the state (loading it when the session changed
    /// or at first use); `put_broker` gives it back.
    fn take_broker(&mut self) -> Broker {
        match self.state.workflow.broker.take() {
            Some(b) if b.session_id() == self.state.id => b,
            _ => self.load_broker(),
        }
    }

    /// Loads the broker and stage of the current session when the session changed
    /// (`new_session`, `switch_session`), so the previous session's stage no longer applies.
    pub fn sync_workflow(&mut self) {
        let broker = self.take_broker();
        self.put_broker(broker);
    }

    /// Why the stage in progress refuses this call, if it does.
    pub(super) fn workflow_refusal(&mut self, tool: &str, args: &Value) -> Option<String> {
        self.sync_workflow();
        self.state.workflow.refusal(tool, args)
    }

    fn put_broker(&mut self, broker: Broker) {
        self.state.workflow.broker = Some(broker);
    }

    fn load_broker(&mut self) -> Broker {
        let dir = self
            .state
            .store
            .is_persistent()
            .then(|| self.state.session_dir.clone());
        let (mut broker, notice) = Broker::load(dir.as_deref(), &self.state.id);
        broker.test_abort_after_accept = self.state.settings.test_abort_after_gate_accept;
        self.state.workflow.stage = serde_json::from_value(broker.workflow().clone()).ok();
        if let Some(message) = notice {
            log::error!("{message}");
            self.emit(AgentEvent::Notice {
                level: "error",
                message,
                source: Some("workflow_gates"),
            });
        }
        broker
    }

    /// At start-up: gates accepted but not advanced when the previous process died are applied
    /// now, once.
    pub fn recover_gates(&mut self) {
        let mut broker = self.take_broker();
        let mut recovered = Vec::new();
        broker.recover(&mut |gate, answer| {
            self.note_orphan_answer(gate, answer);
            self.audit_gate("gate_advance_recovered", gate, Some(answer), None);
            recovered.push((gate.stage.clone(), gate.kind.clone(), answer.clone()));
        });
        self.put_broker(broker);
        for (stage, kind, answer) in recovered {
            self.apply_answer(&stage, &kind, &answer);
        }
    }

    /// A request from a tool call; `current`: the owner of the running call, when it comes from
    /// it. Only an `Open` needs the call to be current; withdrawals of an abandoned call still
    /// reach the broker.
    pub(super) fn on_gate_request(&mut self, current: Option<String>, request: GateRequest) {
        match request {
            GateRequest::Open { what, reply } => {
                if let Some(owner) = current {
                    let opened = self.open_gate(what, owner);
                    // The gate frame goes out before the call learns of its gate: a dialog the
                    // call shows next is written by the host thread, which must come after it.
                    self.flush_out();
                    let _ = reply.send(opened);
                }
            }
            GateRequest::ResolvedElsewhere { gate_id, answer } => {
                let mut broker = self.take_broker();
                let gate = broker.gate(&gate_id).cloned();
                broker.resolve_elsewhere(&gate_id, answer.clone());
                self.put_broker(broker);
                if let Some(g) = gate {
                    self.apply_answer(&g.stage, &g.kind, &answer);
                }
            }
            GateRequest::Withdraw { gate_id } => {
                let mut broker = self.take_broker();
                broker.withdraw(&gate_id);
                self.put_broker(broker);
            }
        }
    }

    /// The running call `owner` is being aborted: its gates are withdrawn now, before the run's
    /// `agent_end` is written, not when its thread gets round to it.
    pub(super) fn withdraw_gates_of(&mut self, owner: &str) {
        let mut broker = self.take_broker();
        broker.withdraw_owned(owner);
        self.put_broker(broker);
    }

    /// Persists the gate, then queues its frame.
    fn open_gate(&mut self, what: OpenWhat, owner: String) -> Result<Opened, String> {
        let spec = match what {
            OpenWhat::Question(spec) => spec,
            OpenWhat::Decision { title, summary } => self
                .state
                .workflow
                .stage
                .as_ref()
                .filter(|s| !s.cleared)
                .and_then(|s| workflow::decision_spec(s, title, &summary))
                .ok_or("no_workflow_decision: workflow_gate is for presenting a plan during /ralplan, or a course of action during /ultragoal, before it is approved")?,
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut broker = self.take_broker();
        let opened = broker.open(spec, Some(Waiter { answer: tx, owner }));
        self.put_broker(broker);
        let gate = opened.map_err(|e| format!("{}: {}", e.code, e.message))?;
        let gate_id = gate.gate_id.clone();
        self.audit_gate("gate_emitted", &gate, None, None);
        self.send(Outbound::Frame(FlatFrame::WorkflowGate(gate)));
        Ok(Opened {
            gate_id,
            unattended: self.unattended.is_unattended(),
            answer: rx,
        })
    }

    /// `workflow_gate_response`: the response is written (by the caller) only after the
    /// accepted answer was persisted, handed to the waiting call (or applied to the session
    /// when nothing waits), and marked advanced.
    pub(super) fn workflow_gate_response(
        &mut self,
        p: WorkflowGateResponseParams,
    ) -> Result<Value, CommandError> {
        let mut broker = self.take_broker();
        let gate = broker.gate(&p.gate_id).cloned();
        let was_accepted = broker.is_accepted(&p.gate_id);
        let result = broker.respond(
            &p.gate_id,
            p.answer.clone(),
            p.idempotency_key,
            &mut |gate, answer| self.note_orphan_answer(gate, answer),
        );
        self.put_broker(broker);
        let event = match (&result, was_accepted) {
            (Ok(r), _) if r.status == "rejected" => "gate_response_rejected",
            (Ok(_), true) => "gate_response_idempotent_replay",
            (Ok(_), false) => "gate_response_accepted",
            (Err(e), _) if e.code == "idempotency_conflict" => "gate_response_idempotency_conflict",
            (Err(e), _) if e.code == "already_resolved" => "gate_response_already_resolved",
            (Err(_), _) => "gate_response_unknown_gate",
        };
        let error = result
            .as_ref()
            .err()
            .map(|e| json!({"code": e.code, "message": e.message}));
        match &gate {
            Some(g) => self.audit_gate(event, g, Some(&p.answer), error),
            None => {
                let ev = AuditEvent {
                    event,
                    gate_id: Some(&p.gate_id),
                    error,
                    ..Default::default()
                };
                let sid = self.state.id.clone();
                self.unattended.audit(ev, &sid);
            }
        }
        let resolution = result?;
        if let (Some(g), "accepted", false) = (gate, resolution.status.as_str(), was_accepted) {
            self.apply_answer(&g.stage, &g.kind, &p.answer);
        }
        serde_json::to_value(&resolution).map_err(|e| CommandError::Internal(e.to_string()))
    }

    pub(super) fn pending_workflow_gates(&mut self) -> PendingGates {
        let broker = self.take_broker();
        let gates = broker.pending();
        self.put_broker(broker);
        PendingGates { gates }
    }

    /// Records a gate event in the unattended audit trail (only once unattended; answers are
    /// hashed, never stored).
    fn audit_gate(
        &mut self,
        event: &'static str,
        gate: &WorkflowGate,
        answer: Option<&Value>,
        error: Option<Value>,
    ) {
        let ev = AuditEvent {
            event,
            gate_id: Some(&gate.gate_id),
            stage: Some(&gate.stage),
            kind: Some(&gate.kind),
            answer,
            error,
            ..Default::default()
        };
        let sid = self.state.id.clone();
        self.unattended.audit(ev, &sid);
    }

    /// An answer nobody waited for (its call ended with the previous process): the model is
    /// told in the conversation, so the next turn can act on it.
    fn note_orphan_answer(&mut self, gate: &WorkflowGate, answer: &Value) {
        let title = gate
            .context
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("");
        let text = format!(
            "[workflow gate {} ({} {}) \"{title}\" was answered after the call that asked it had ended. Answer: {}]",
            gate.gate_id, gate.stage, gate.kind, answer
        );
        self.record(AgentMessage::User(UserMessage::new(&text, &[])));
        self.emit(AgentEvent::Notice {
            level: "info",
            message: format!(
                "workflow gate {} answered; the answer was added to the conversation",
                gate.gate_id
            ),
            source: Some("workflow_gates"),
        });
    }

    /// Applies an accepted answer to the stage in progress and saves the stage.
    fn apply_answer(&mut self, stage: &str, kind: &str, answer: &Value) {
        let before = self.state.workflow.stage.clone();
        self.state.workflow.apply_answer(stage, kind, answer);
        if self.run.is_none() {
            // A denial with no run in progress (recovered after a restart) has nothing to end.
            self.state.workflow.denied = None;
        }
        if self.state.workflow.stage != before {
            self.save_stage();
        }
    }

    fn save_stage(&mut self) {
        let state = json!(self.state.workflow.stage);
        let mut broker = self.take_broker();
        let saved = broker.set_workflow(state);
        self.put_broker(broker);
        if let Err(e) = saved {
            log::warn!("workflow stage not saved: {e}");
        }
    }

    /// A prompt that starts a stage becomes the stage's instructions plus the task; the stage's
    /// tools are activated. Any other prompt is returned as it is.
    pub(super) fn start_stage_if_asked(&mut self, text: &str) -> String {
        let Some((stage, task)) = workflow::parse_command(text) else {
            return text.to_string();
        };
        let prompt = workflow::stage_prompt(stage, &self.state.project.agent_dir, &self.state.cwd);
        let tool = if stage == "deep-interview" {
            "ask"
        } else {
            workflow::GATE_TOOL
        };
        self.state.tools.ensure_builtin(tool);
        self.state.workflow.denied = None;
        self.state.workflow.stage = Some(StageState {
            stage: stage.into(),
            task: task.clone(),
            cleared: false,
        });
        self.save_stage();
        workflow::stage_message(stage, &task, &prompt)
    }

    /// Ends the run as `denied` when a decision said so; true when it did.
    pub(super) fn take_denial(&mut self) -> Option<String> {
        self.state.workflow.denied.take()
    }
}
