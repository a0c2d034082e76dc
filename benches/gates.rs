//! Workflow gate round trip, durable: from the `workflow_gate` frame read to the accepted
//! `workflow_gate_response` read (the answer validated, persisted with fsync and rename, handed to
//! the waiting `ask` call, marked advanced, persisted again), median and p99 over one `ask` call
//! of many questions, beside a plain `get_state` round trip in the same run.
//!
//! Run: `cargo bench --bench gates`

mod common;

use std::time::{Duration, Instant};

use common::*;
use gjc::client::RpcClient;
use serde_json::json;

const GATES: usize = 100;
const WAIT: Duration = Duration::from_secs(60);

fn main() {
    let questions: Vec<_> = (0..GATES)
        .map(|i| json!({"id": format!("q{i}"), "question": format!("Question {i}?"), "options": [{"label": "yes"}, {"label": "no"}]}))
        .collect();
    let turns = json!({"turns": [
        {"content": [{"type": "toolCall", "name": "ask", "arguments": {"questions": questions}}]},
        {"content": [{"type": "text", "text": "done"}]}]});
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut c = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", dir.path())
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .args(["--tools", "ask", "--provider", "scripted", "--script"])
        .arg(&script)
        .spawn()
        .unwrap();
    c.recv(WAIT).unwrap();
    c.request(json!({"type": "prompt", "message": "go"}), WAIT)
        .unwrap();
    let mut gate_lat = Vec::with_capacity(GATES);
    let mut state_lat = Vec::with_capacity(GATES);
    for _ in 0..GATES {
        let gate = c.wait_for(|f| f["type"] == "workflow_gate", WAIT).unwrap();
        let t = Instant::now();
        let cmd = json!({"type": "workflow_gate_response", "gate_id": gate["gate_id"], "answer": {"selected": ["yes"]}});
        let r = c.request(cmd, WAIT).unwrap();
        assert_eq!(r["data"]["status"], "accepted", "{r}");
        gate_lat.push(ms(t.elapsed()));
        let t = Instant::now();
        c.request(json!({"type": "get_state"}), WAIT).unwrap();
        state_lat.push(ms(t.elapsed()));
    }
    c.wait_event("agent_end", WAIT).unwrap();
    println!(
        "gate answered -> accepted (durable), {GATES} gates: median {:.3} ms, p99 {:.3} ms",
        median(&mut gate_lat.clone()),
        percentile(&mut gate_lat, 0.99)
    );
    println!(
        "get_state round trip, same run:            median {:.3} ms, p99 {:.3} ms",
        median(&mut state_lat.clone()),
        percentile(&mut state_lat, 0.99)
    );
}
