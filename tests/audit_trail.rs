//! The unattended audit trail keeps every attempt: one record per event, numbered by `seq`,
//! nothing merged because two events look alike.

use serde_json::{json, Value};

use crate::support::gjc;
use crate::unattended::{audit_files, audit_records};

/// Reads, read-only bash, prompts and gate answers, with `tool_calls` units.
fn declaration(tool_calls: u64) -> Value {
    json!({"type": "negotiate_unattended", "declaration": {"actor": "ci/runner",
        "budget": {"max_tokens": 1e9, "max_tool_calls": tool_calls, "max_wall_time_ms": 600000, "max_cost_usd": 5},
        "scopes": ["prompt", "message:read", "bash", "control"],
        "action_allowlist": ["command.message_read", "bash.readonly", "command.control"]}})
}

fn rm_call() -> Value {
    json!({"content": [{"type": "toolCall", "id": "tc1", "name": "bash", "arguments": {"command": "rm -rf keep.txt"}}]})
}

fn count(records: &[Value], event: &str) -> usize {
    records.iter().filter(|r| r["event"] == event).count()
}

#[test]
fn every_attempt_is_one_numbered_record() {
    // The model asks for the same denied command twice under the same call id.
    let turns = json!([rm_call(), rm_call(), {"content": [{"type": "text", "text": "gave up"}]}]);
    let mut g = gjc().script(json!({"turns": turns})).spawn();
    std::fs::write(g.project.join("keep.txt"), "keep").unwrap();
    // The same declaration three times.
    for _ in 0..3 {
        g.ok(declaration(100));
    }
    g.ok(json!({"type": "prompt", "message": "clean up"}));
    g.event("agent_end");
    assert!(g.project.join("keep.txt").exists());
    // The same unknown gate answered twice.
    for _ in 0..2 {
        let r = g.request(json!({"type": "workflow_gate_response", "gate_id": "wg_x_ralplan_000001", "answer": {}}));
        assert_eq!(r["success"], false, "{r}");
    }
    // The same breach twice, each after the same declaration.
    for _ in 0..2 {
        g.ok(declaration(1));
        g.ok(json!({"type": "bash", "command": "true"}));
        let r = g.request(json!({"type": "bash", "command": "true"}));
        assert!(
            r["error"].as_str().unwrap().starts_with("budget_exceeded"),
            "{r}"
        );
    }

    let files = audit_files(&g);
    assert_eq!(files.len(), 1, "{files:?}");
    let records = audit_records(&files[0]);
    let text = json!(records).to_string();
    assert_eq!(count(&records, "unattended_negotiated"), 5, "{text}");
    assert_eq!(count(&records, "action_denied"), 2, "{text}");
    assert_eq!(count(&records, "gate_response_unknown_gate"), 2, "{text}");
    assert_eq!(count(&records, "budget_exceeded"), 2, "{text}");
    assert_eq!(count(&records, "unattended_aborted"), 2, "{text}");
    let denied: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "action_denied")
        .collect();
    assert_eq!(denied[0]["error"]["toolCallId"], "tc1");
    assert_eq!(denied[1]["error"]["toolCallId"], "tc1");
    // Numbered 1, 2, … in the order written, each with its own id and key, although the trail
    // was reopened at every negotiation.
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=records.len() as u64).collect();
    assert_eq!(seqs, expected, "{text}");
    for field in ["event_id", "dedupe_key"] {
        let distinct: std::collections::HashSet<&str> =
            records.iter().map(|r| r[field].as_str().unwrap()).collect();
        assert_eq!(distinct.len(), records.len(), "{field} names one event");
    }
}
