//! Model requests reuse their connection: a tool loop talks to the provider over one kept-alive
//! connection, while an aborted or failed request's connection is never used again.

use serde_json::{json, Value};

use crate::faults::{count, openai};
use crate::support::fake_provider::{openai_text, openai_tool_call, sse_events};
use crate::support::{Chunk, FakeProvider, Reply, TIMEOUT};

#[test]
fn a_twenty_turn_tool_loop_uses_one_connection() {
    let fake = FakeProvider::start();
    let mut g = openai(&fake).spawn();
    for i in 0..20 {
        let call = openai_tool_call(&format!("c{i}"), "bash", &json!({"command": "echo hi"}));
        fake.push(Reply::sse(call));
    }
    fake.push(Reply::sse(openai_text(&["done"])));
    g.ok(json!({"type": "prompt", "message": "loop"}));
    let events = g.run_events();
    assert_eq!(count(&events, "tool_execution_end"), 20);
    for _ in 0..21 {
        fake.request(TIMEOUT);
    }
    assert_eq!(
        fake.connections(),
        1,
        "every request went over the first connection"
    );
}

fn stalled_after_a_delta() -> Reply {
    let head = sse_events(
        &[json!({"choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]})],
        false,
    );
    Reply::sse_chunks(vec![Chunk::Bytes(head.into_bytes()), Chunk::Stall])
}

#[test]
fn aborted_and_failed_requests_leave_no_connection_to_reuse() {
    let fake = FakeProvider::start();
    let mut g = openai(&fake).spawn();
    fake.push(Reply::sse(openai_text(&["one"])));
    g.ok(json!({"type": "prompt", "message": "one"}));
    g.run_events();
    assert_eq!(fake.connections(), 1);

    // The kept connection carries the next request, which is aborted mid-stream.
    fake.push(stalled_after_a_delta());
    g.ok(json!({"type": "prompt", "message": "two"}));
    g.client.wait_event("message_update", TIMEOUT).unwrap();
    g.ok(json!({"type": "abort"}));
    g.client.wait_event("agent_end", TIMEOUT).unwrap();
    assert_eq!(fake.connections(), 1);

    // A failed request (HTTP 400) after the abort: a new connection, not the aborted one.
    fake.push(Reply::status(400, r#"{"error":{"message":"bad"}}"#));
    g.ok(json!({"type": "prompt", "message": "three"}));
    let events: Vec<Value> = g.run_events();
    assert_eq!(count(&events, "agent_end"), 1);
    assert_eq!(fake.connections(), 2);

    // And after the failure, another new one.
    fake.push(Reply::sse(openai_text(&["four"])));
    g.ok(json!({"type": "prompt", "message": "four"}));
    g.run_events();
    assert_eq!(fake.connections(), 3);
    for _ in 0..4 {
        fake.request(TIMEOUT);
    }
}
