//! The gate broker: the one owner of gates. It builds a gate (checking its schema), persists it
//! before anyone may emit its frame, validates answers, binds idempotency keys on acceptance,
//! and hands accepted answers to whoever waits. It lives on the session thread, which owns it
//! like the rest of the session state; producers (tool calls) reach it through `ToolEvent::Gate`.

use std::collections::HashMap;
use std::path::Path;

use crossbeam_channel::Sender;
use serde_json::{json, Map, Value};

use super::canonical::hash;
use super::schema::{check_schema, validate};
use super::store::{GateError, GateStore, Record, Status};
use crate::protocol::gate::{GateAnswerError, GateOption, GateResolution, WorkflowGate};
use crate::protocol::outbound::TypedError;

pub const STAGES: &[&str] = &["deep-interview", "ralplan", "ultragoal"];
pub const KINDS: &[&str] = &["question", "approval", "execution"];

/// What a producer asks for; the broker adds the id, hash and time.
#[derive(Debug, Clone)]
pub struct GateSpec {
    pub stage: String,
    pub kind: String,
    pub schema: Value,
    pub options: Option<Vec<GateOption>>,
    pub context: Map<String, Value>,
}

pub struct Broker {
    store: GateStore,
    session_id: String,
    /// The live continuation of each gate this process opened and still waits on.
    waiters: HashMap<String, Waiter>,
    /// `Settings::test_abort_after_gate_accept` (debug builds only): die between an acceptance
    /// and its advance, as a crash would.
    pub test_abort_after_accept: bool,
}

/// Who waits on a gate: the channel its answer goes to, and the tool call that opened it (an
/// abort withdraws that call's gates at once, see [`Broker::withdraw_owned`]).
#[derive(Debug)]
pub struct Waiter {
    pub answer: Sender<Value>,
    pub owner: String,
}

fn err(code: &'static str, message: String) -> TypedError {
    TypedError { code, message }
}

/// `wg_` ids carry the last 8 letters or digits of the run id (the session id).
pub fn run8(run_id: &str) -> String {
    let alnum: Vec<char> = run_id.chars().filter(char::is_ascii_alphanumeric).collect();
    if alnum.is_empty() {
        return "run".into();
    }
    alnum[alnum.len().saturating_sub(8)..].iter().collect()
}

impl Broker {
    /// The broker of session `session_id`: durable in `session_dir`, in memory without one. The
    /// notice says what was wrong with a store that could not be loaded.
    pub fn load(session_dir: Option<&Path>, session_id: &str) -> (Broker, Option<String>) {
        let (store, notice) = match session_dir.map(|d| GateStore::path_for(d, session_id)) {
            Some(Ok(path)) => GateStore::load(path),
            // An id that cannot name a file keeps the gates in memory, and the host is told.
            Some(Err(e)) => (GateStore::in_memory(), Some(e.to_string())),
            None => (GateStore::in_memory(), None),
        };
        let broker = Broker {
            store,
            session_id: session_id.into(),
            waiters: HashMap::new(),
            test_abort_after_accept: false,
        };
        (broker, notice)
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn is_durable(&self) -> bool {
        self.store.is_durable()
    }

    /// Builds and persists a pending gate; only then may its frame be written. `waiter` gets the
    /// accepted answer.
    pub fn open(
        &mut self,
        spec: GateSpec,
        waiter: Option<Waiter>,
    ) -> Result<WorkflowGate, TypedError> {
        if !STAGES.contains(&spec.stage.as_str()) {
            let m = format!("stage \"{}\" is not a v1 workflow stage", spec.stage);
            return Err(err("invalid_workflow_stage", m));
        }
        if !KINDS.contains(&spec.kind.as_str()) {
            let m = format!("kind \"{}\" is not a workflow gate kind", spec.kind);
            return Err(err("invalid_workflow_gate_kind", m));
        }
        check_schema(&spec.schema).map_err(|m| err("invalid_workflow_gate_schema", m))?;
        // The counter moves on even if the write below fails: an id is never issued twice.
        let seq = {
            let c = self
                .store
                .data
                .counters
                .entry(spec.stage.clone())
                .or_insert(0);
            let Some(next) = c.checked_add(1) else {
                let m = format!("the {} gate counter is exhausted", spec.stage);
                return Err(err("gate_store_unavailable", m));
            };
            *c = next;
            next
        };
        let gate = WorkflowGate {
            gate_id: format!("wg_{}_{}_{seq:06}", run8(&self.session_id), spec.stage),
            stage: spec.stage,
            kind: spec.kind,
            schema_hash: hash(&spec.schema),
            schema: spec.schema,
            options: spec.options,
            context: spec.context,
            created_at: crate::ids::iso_now(),
            required: true,
        };
        let record = Record::pending(gate.clone());
        self.store.data.gates.insert(gate.gate_id.clone(), record);
        if let Err(e) = self.store.save() {
            self.store.data.gates.remove(&gate.gate_id);
            return Err(err("gate_store_unavailable", e.to_string()));
        }
        if let Some(w) = waiter {
            self.waiters.insert(gate.gate_id.clone(), w);
        }
        Ok(gate)
    }

    /// Pending gates, oldest first.
    pub fn pending(&self) -> Vec<WorkflowGate> {
        let mut gates: Vec<WorkflowGate> = self
            .store
            .data
            .gates
            .values()
            .filter(|r| r.status == Status::Pending)
            .map(|r| r.gate.clone())
            .collect();
        gates.sort_by(|a, b| (&a.created_at, &a.gate_id).cmp(&(&b.created_at, &b.gate_id)));
        gates
    }

    pub fn gate(&self, gate_id: &str) -> Option<&WorkflowGate> {
        self.store.data.gates.get(gate_id).map(|r| &r.gate)
    }

    /// Whether the gate was already accepted (a second answer is a replay or refused).
    pub fn is_accepted(&self, gate_id: &str) -> bool {
        self.store
            .data
            .gates
            .get(gate_id)
            .is_some_and(|r| r.status == Status::Accepted)
    }

    pub fn pending_ids(&self) -> Vec<String> {
        self.pending().into_iter().map(|g| g.gate_id).collect()
    }

    /// Answers a gate (`workflow_gate_response`). An accepted answer is persisted, handed to the
    /// waiting work (or, when nothing waits, e.g. after a restart, to `orphan`), then marked
    /// advanced, all before this returns. A schema-invalid answer is `Ok` with status `rejected`.
    pub fn respond(
        &mut self,
        gate_id: &str,
        answer: Value,
        key: Option<String>,
        orphan: &mut dyn FnMut(&WorkflowGate, &Value),
    ) -> Result<GateResolution, TypedError> {
        let Some(record) = self.store.data.gates.get(gate_id) else {
            return Err(err("unknown_gate", format!("no pending gate {gate_id}")));
        };
        let response_hash = hash(&json!({"gate_id": gate_id, "answer": answer}));
        match record.status {
            Status::Withdrawn => {
                return Err(err("unknown_gate", format!("no pending gate {gate_id}")))
            }
            Status::Accepted => return replay(record, gate_id, key.as_deref(), &response_hash),
            Status::Pending => {}
        }
        let answer_hash = hash(&answer);
        let errors = validate(&record.gate.schema, &answer);
        if !errors.is_empty() {
            return Ok(GateResolution {
                gate_id: gate_id.into(),
                status: "rejected".into(),
                answer_hash,
                resolved_at: crate::ids::iso_now(),
                error: Some(GateAnswerError {
                    code: "invalid_workflow_gate_answer".into(),
                    gate_id: gate_id.into(),
                    schema_hash: record.gate.schema_hash.clone(),
                    errors,
                }),
            });
        }
        let resolution = GateResolution {
            gate_id: gate_id.into(),
            status: "accepted".into(),
            answer_hash,
            resolved_at: crate::ids::iso_now(),
            error: None,
        };
        let previous = record.clone();
        let record = self.store.data.gates.get_mut(gate_id).expect("present");
        record.status = Status::Accepted;
        record.idempotency_key = key;
        record.response_hash = Some(response_hash);
        record.answer = Some(answer.clone());
        record.resolution = Some(resolution.clone());
        record.origin = Some("host".into());
        if let Err(e) = self.store.save() {
            self.store.data.gates.insert(gate_id.into(), previous);
            return Err(err("gate_store_unavailable", e.to_string()));
        }
        // Debug builds only: die between the acceptance and the advance, as a crash would.
        #[cfg(debug_assertions)]
        if self.test_abort_after_accept {
            std::process::abort();
        }
        self.advance(gate_id, &answer, orphan);
        Ok(resolution)
    }

    /// Gives the answer to the waiting work, or to `orphan` when nothing waits any more, then
    /// persists that it was done.
    fn advance(
        &mut self,
        gate_id: &str,
        answer: &Value,
        orphan: &mut dyn FnMut(&WorkflowGate, &Value),
    ) {
        let delivered = self
            .waiters
            .remove(gate_id)
            .is_some_and(|w| w.answer.send(answer.clone()).is_ok());
        let Some(record) = self.store.data.gates.get_mut(gate_id) else {
            return;
        };
        if !delivered {
            orphan(&record.gate, answer);
        }
        record.advanced = true;
        if let Err(e) = self.store.save() {
            // The answer was applied; at the next start it may be applied again.
            log::warn!("gate {gate_id} advanced but not recorded as such: {e}");
        }
    }

    /// At start-up: gates accepted but not advanced when the last process died are applied once.
    pub fn recover(&mut self, orphan: &mut dyn FnMut(&WorkflowGate, &Value)) -> usize {
        let due: Vec<(String, Value)> = self
            .store
            .data
            .gates
            .iter()
            .filter(|(_, r)| r.status == Status::Accepted && !r.advanced)
            .map(|(id, r)| (id.clone(), r.answer.clone().unwrap_or(Value::Null)))
            .collect();
        for (id, answer) in &due {
            self.advance(id, answer, orphan);
        }
        due.len()
    }

    /// The host answered the gate's UI dialog first: the gate is settled with that answer and
    /// is no longer answerable (`already_resolved`).
    pub fn resolve_elsewhere(&mut self, gate_id: &str, answer: Value) {
        self.waiters.remove(gate_id);
        let Some(record) = self.store.data.gates.get_mut(gate_id) else {
            return;
        };
        if record.status != Status::Pending {
            return;
        }
        let resolution = GateResolution {
            gate_id: gate_id.into(),
            status: "accepted".into(),
            answer_hash: hash(&answer),
            resolved_at: crate::ids::iso_now(),
            error: None,
        };
        record.status = Status::Accepted;
        record.answer = Some(answer);
        record.resolution = Some(resolution);
        record.advanced = true;
        record.origin = Some("extension_ui".into());
        self.save_or_log(gate_id);
    }

    /// The producer gave up (its tool call was cancelled): the gate leaves the pending list.
    pub fn withdraw(&mut self, gate_id: &str) {
        self.waiters.remove(gate_id);
        if let Some(r) = self.store.data.gates.get_mut(gate_id) {
            if r.status == Status::Pending {
                r.status = Status::Withdrawn;
                self.save_or_log(gate_id);
            }
        }
    }

    /// The call `owner` was aborted: every gate it still waits on is withdrawn now, before the
    /// run's end is told, so an answer after `agent_end` is `unknown_gate` rather than accepted
    /// and applied nowhere. Returns the gates withdrawn.
    pub fn withdraw_owned(&mut self, owner: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.owner == owner)
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        for id in &ids {
            self.withdraw(id);
        }
        ids
    }

    fn save_or_log(&self, gate_id: &str) {
        if let Err(e) = self.store.save() {
            log::warn!("gate {gate_id}: {e}");
        }
    }

    /// The workflow stage state kept with the gates (null when none).
    pub fn workflow(&self) -> &Value {
        &self.store.data.workflow
    }

    pub fn set_workflow(&mut self, state: Value) -> Result<(), GateError> {
        self.store.data.workflow = state;
        self.store.save()
    }
}

/// A second answer to an accepted gate: the stored resolution when the same key comes with the
/// same body, a conflict when the body differs, else `already_resolved`.
fn replay(
    record: &Record,
    gate_id: &str,
    key: Option<&str>,
    response_hash: &str,
) -> Result<GateResolution, TypedError> {
    let same_key = key.is_some() && record.idempotency_key.as_deref() == key;
    match (&record.resolution, same_key) {
        (Some(stored), true) if record.response_hash.as_deref() == Some(response_hash) => {
            Ok(stored.clone())
        }
        (_, true) => Err(err(
            "idempotency_conflict",
            format!("gate {gate_id} resolved with a different body"),
        )),
        _ => Err(err("already_resolved", format!("gate {gate_id}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(stage: &str) -> GateSpec {
        GateSpec {
            stage: stage.into(),
            kind: "approval".into(),
            schema: json!({"type": "object", "properties": {"decision": {"type": "string", "enum": ["approve", "reject"]}}, "required": ["decision"], "additionalProperties": false}),
            options: None,
            context: Map::new(),
        }
    }

    fn none(_: &WorkflowGate, _: &Value) {}

    #[test]
    fn ids_count_per_stage_and_survive_a_reload() {
        let tmp = tempfile::tempdir().unwrap();
        let sid = "01932c4e-7a10-7c3b-9d2e-5f6a7b8c9d0e";
        let (mut b, _) = Broker::load(Some(tmp.path()), sid);
        assert_eq!(
            b.open(spec("ralplan"), None).unwrap().gate_id,
            "wg_7b8c9d0e_ralplan_000001"
        );
        assert_eq!(
            b.open(spec("ralplan"), None).unwrap().gate_id,
            "wg_7b8c9d0e_ralplan_000002"
        );
        assert_eq!(
            b.open(spec("ultragoal"), None).unwrap().gate_id,
            "wg_7b8c9d0e_ultragoal_000001"
        );
        let e = b.open(spec("team"), None).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                "invalid_workflow_stage",
                "stage \"team\" is not a v1 workflow stage"
            )
        );
        let mut bad = spec("ralplan");
        bad.schema = json!({"allOf": []});
        assert_eq!(
            b.open(bad, None).unwrap_err().code,
            "invalid_workflow_gate_schema"
        );
        let (mut again, _) = Broker::load(Some(tmp.path()), sid);
        assert_eq!(again.pending_ids().len(), 3);
        assert_eq!(
            again.open(spec("ralplan"), None).unwrap().gate_id,
            "wg_7b8c9d0e_ralplan_000003"
        );
        assert_eq!(run8("--"), "run");
        assert_eq!(run8("ab-c"), "abc");
    }

    #[test]
    fn ids_past_six_digits_grow_wider_and_a_spent_counter_issues_nothing() {
        let (mut b, _) = Broker::load(None, "abcd1234");
        b.store.data.counters.insert("ralplan".into(), 999_999);
        assert_eq!(
            b.open(spec("ralplan"), None).unwrap().gate_id,
            "wg_abcd1234_ralplan_1000000"
        );
        b.store.data.counters.insert("ralplan".into(), u64::MAX);
        let e = b.open(spec("ralplan"), None).unwrap_err();
        assert_eq!(e.code, "gate_store_unavailable");
        assert_eq!(b.pending_ids(), vec!["wg_abcd1234_ralplan_1000000"]);
    }

    /// Answers `{decision}` with `key`, nothing waiting.
    fn decide(
        b: &mut Broker,
        id: &str,
        decision: &str,
        key: Option<&str>,
    ) -> Result<GateResolution, TypedError> {
        let answer = json!({"decision": decision});
        b.respond(id, answer, key.map(str::to_string), &mut none)
    }

    #[test]
    fn every_outcome_of_an_answer() {
        let (mut b, _) = Broker::load(None, "s");
        let id = b.open(spec("ralplan"), None).unwrap().gate_id;
        let e = b.respond("wg_nope", json!(1), None, &mut none).unwrap_err();
        assert_eq!(e.code, "unknown_gate");
        let r = decide(&mut b, &id, "maybe", Some("k")).unwrap();
        assert_eq!(r.status, "rejected");
        assert_eq!(r.error.unwrap().errors[0].path, "#/decision");
        let mut applied = Vec::new();
        let answer = json!({"decision": "approve"});
        let ok = b
            .respond(&id, answer, Some("k".into()), &mut |g, a| {
                applied.push((g.gate_id.clone(), a.clone()))
            })
            .unwrap();
        assert_eq!(ok.status, "accepted");
        assert_eq!(
            applied.len(),
            1,
            "no waiter: the answer goes to the orphan path"
        );
        assert_eq!(decide(&mut b, &id, "approve", Some("k")).unwrap(), ok);
        let conflict = decide(&mut b, &id, "reject", Some("k")).unwrap_err();
        assert_eq!(conflict.code, "idempotency_conflict");
        for key in [None, Some("other")] {
            let e = decide(&mut b, &id, "approve", key).unwrap_err();
            assert_eq!(e.code, "already_resolved");
        }
        assert!(b.pending_ids().is_empty());
    }

    #[test]
    fn a_waiter_gets_the_answer_and_withdrawn_gates_are_unknown() {
        let (mut b, _) = Broker::load(None, "s");
        let (tx, rx) = crossbeam_channel::bounded(1);
        let waiter = Waiter {
            answer: tx,
            owner: "1/tc1".into(),
        };
        let id = b.open(spec("ralplan"), Some(waiter)).unwrap().gate_id;
        b.respond(&id, json!({"decision": "reject"}), None, &mut |_, _| {
            panic!("a waiter exists")
        })
        .unwrap();
        assert_eq!(rx.try_recv().unwrap(), json!({"decision": "reject"}));
        let id2 = b.open(spec("ralplan"), None).unwrap().gate_id;
        b.withdraw(&id2);
        assert_eq!(
            b.respond(&id2, json!({}), None, &mut none)
                .unwrap_err()
                .code,
            "unknown_gate"
        );
        let id3 = b.open(spec("ralplan"), None).unwrap().gate_id;
        b.resolve_elsewhere(&id3, json!({"decision": "approve"}));
        assert_eq!(
            b.respond(&id3, json!({"decision": "approve"}), None, &mut none)
                .unwrap_err()
                .code,
            "already_resolved"
        );
    }

    #[test]
    fn an_aborted_call_withdraws_only_its_own_gates() {
        let (mut b, _) = Broker::load(None, "s");
        let mut keep = Vec::new();
        let mut open = |b: &mut Broker, owner: &str| {
            let (tx, rx) = crossbeam_channel::bounded(1);
            keep.push(rx);
            let waiter = Waiter {
                answer: tx,
                owner: owner.into(),
            };
            b.open(spec("ralplan"), Some(waiter)).unwrap().gate_id
        };
        let mine = [open(&mut b, "2/tc1"), open(&mut b, "2/tc1")];
        let other = open(&mut b, "1/tc1");
        assert_eq!(b.withdraw_owned("2/tc1"), mine.to_vec());
        assert_eq!(b.pending_ids(), vec![other]);
        for id in &mine {
            let e = decide(&mut b, id, "approve", None).unwrap_err();
            assert_eq!(e.code, "unknown_gate");
        }
        assert!(b.withdraw_owned("2/tc1").is_empty());
    }

    #[test]
    fn accepted_but_not_advanced_is_advanced_once_after_a_restart() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut b, _) = Broker::load(Some(tmp.path()), "s");
        let id = b.open(spec("ralplan"), None).unwrap().gate_id;
        // As if the process died between persisting the acceptance and advancing.
        let r = b.store.data.gates.get_mut(&id).unwrap();
        r.status = Status::Accepted;
        r.answer = Some(json!({"decision": "approve"}));
        b.store.save().unwrap();
        let (mut b2, _) = Broker::load(Some(tmp.path()), "s");
        let mut n = 0;
        assert_eq!(b2.recover(&mut |_, _| n += 1), 1);
        let (mut b3, _) = Broker::load(Some(tmp.path()), "s");
        assert_eq!(b3.recover(&mut |_, _| n += 1), 0);
        assert_eq!(n, 1);
    }
}
