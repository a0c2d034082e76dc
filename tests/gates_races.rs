//! Workflow gates at their edges: a gate answered right after its run was aborted, the order of
//! a gate frame and its dialog, and gate numbers past six digits after a corrupt store.

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

fn ask_turn(questions: Value) -> Value {
    json!({"content": [{"type": "toolCall", "id": "tc1", "name": "ask", "arguments": {"questions": questions}}]})
}

fn question(n: usize) -> Value {
    json!({"id": format!("q{n}"), "question": format!("Question {n}?"), "options": [{"label": "yes"}, {"label": "no"}]})
}

fn frame(g: &mut Gjc, kind: &str) -> Value {
    g.client
        .wait_for(|f| f["type"] == kind, TIMEOUT)
        .unwrap_or_else(|e| panic!("no {kind} frame: {e}"))
}

fn respond(g: &mut Gjc, gate_id: &Value) -> Value {
    g.request(json!({"type": "workflow_gate_response", "gate_id": gate_id, "answer": {"selected": ["yes"]}}))
}

fn negotiate(g: &mut Gjc) {
    g.ok(json!({"type": "negotiate_unattended", "declaration": {"actor": "ci",
        "scopes": ["prompt", "control", "message:read"],
        "action_allowlist": ["command.prompt", "command.control", "command.message_read"],
        "budget": {"max_tokens": 1e9, "max_tool_calls": 1000, "max_wall_time_ms": 600000, "max_cost_usd": 100}}}));
}

/// Aborts the run waiting on its gate, then answers the gate the moment `agent_end` is read:
/// the gate was withdrawn before `agent_end`, so the answer is `unknown_gate`, never accepted.
fn abort_then_answer(g: &mut Gjc, round: usize) {
    g.ok(json!({"type": "prompt", "message": format!("round {round}")}));
    let gate = frame(g, "workflow_gate");
    g.ok(json!({"type": "abort"}));
    let end = g.event("agent_end");
    assert_eq!(end["outcome"], "aborted", "{end}");
    let r = respond(g, &gate["gate_id"]);
    assert_eq!(
        r["success"], false,
        "round {round}: answered after the abort: {r}"
    );
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("unknown_gate: "), "round {round}: {r}");
    let pending = g.ok(json!({"type": "get_pending_workflow_gates"}));
    assert_eq!(pending["gates"], json!([]), "round {round}");
}

#[test]
fn an_aborted_call_withdraws_its_gate_before_agent_end() {
    const ROUNDS: usize = 8;
    let turns: Vec<Value> = (0..2 * ROUNDS)
        .map(|i| ask_turn(json!([question(i)])))
        .collect();
    let mut g = gjc()
        .script(json!({"turns": turns}))
        .args(&["--tools", "ask"])
        .spawn();
    // Attended: the dialog is open beside the gate.
    for round in 0..ROUNDS {
        abort_then_answer(&mut g, round);
    }
    // Unattended: only the gate waits.
    negotiate(&mut g);
    for round in ROUNDS..2 * ROUNDS {
        abort_then_answer(&mut g, round);
    }
}

#[test]
fn a_gate_frame_always_precedes_its_dialog() {
    const ASKS: usize = 30;
    let questions: Vec<Value> = (0..ASKS).map(question).collect();
    let mut g = gjc()
        .script(json!({"turns": [ask_turn(json!(questions)), {"content": [{"type": "text", "text": "ok"}]}]}))
        .args(&["--tools", "ask"])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let mut late = Vec::new();
    for n in 0..ASKS {
        let title = format!("Question {n}?");
        let frames = g
            .client
            .collect_until(
                |f| f["type"] == "extension_ui_request" && f["method"] == "select",
                TIMEOUT,
            )
            .unwrap_or_else(|e| panic!("no dialog for question {n}: {e}"));
        let dialog = frames.last().unwrap().clone();
        assert_eq!(dialog["title"], title, "{dialog}");
        let gate_first = frames
            .iter()
            .any(|f| f["type"] == "workflow_gate" && f["context"]["title"] == title);
        if !gate_first {
            late.push(n);
            frame(&mut g, "workflow_gate");
        }
        g.client
            .send(&json!({"type": "extension_ui_response", "id": dialog["id"], "value": "yes"}))
            .unwrap();
    }
    let end = g.event("tool_execution_end");
    assert_eq!(end["isError"], false, "{end}");
    assert!(
        late.is_empty(),
        "the dialog came before its gate for {} of {ASKS} questions: {late:?}",
        late.len()
    );
}

#[test]
fn gate_numbers_past_six_digits_survive_a_corrupt_store() {
    let tmp = tempfile::tempdir().unwrap();
    let sid = "0193aaaa-bbbb-7ccc-8ddd-eeeeffff0004";
    let dir = tmp.path().join("workflow-gates");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{sid}.json")),
        "{\"gates\": {\"wg_ffff0004_deep-interview_1000041\": [",
    )
    .unwrap();
    let mut g = gjc()
        .script(json!({"turns": [ask_turn(json!([question(1)]))]}))
        .args(&[
            "--tools",
            "ask",
            "--provider-session-id",
            sid,
            "--session-dir",
            tmp.path().to_str().unwrap(),
        ])
        .spawn();
    let notice = g.event("notice");
    assert!(
        notice["message"].as_str().unwrap().contains("was corrupt"),
        "{notice}"
    );
    g.ok(json!({"type": "prompt", "message": "go"}));
    assert_eq!(
        frame(&mut g, "workflow_gate")["gate_id"],
        json!("wg_ffff0004_deep-interview_1000042")
    );
}
