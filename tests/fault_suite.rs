//! The standing fault suite: each provider fault gjc can meet, served by the loopback provider,
//! and the same invariants checked after every one: the run ends with exactly one `agent_end`
//! (its last event), every assistant `message_start` is closed by exactly one `message_end`
//! before the next one opens, and no `message_end` arrives without its start.

use serde_json::{json, Value};

use crate::faults::{count, openai};
use crate::support::fake_provider::{openai_text, sse_events};
use crate::support::{types, Chunk, FakeProvider, Gjc, Reply};

/// Checks the run's shape; `what` names the fault in messages.
fn assert_balanced(what: &str, events: &[Value]) {
    let kinds = summary(events);
    let agent_ends = count(events, "agent_end");
    assert_eq!(agent_ends, 1, "{what}: one agent_end in {kinds:?}");
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some(json!("agent_end")),
        "{what}: agent_end is last"
    );
    let mut open: Option<usize> = None;
    for (i, e) in events.iter().enumerate() {
        let role = e["message"]["role"].as_str();
        match (e["type"].as_str(), role) {
            (Some("message_start"), Some("assistant")) => {
                assert!(
                    open.is_none(),
                    "{what}: assistant message_start at {i} while the one at {open:?} is open: {kinds:?}"
                );
                open = Some(i);
            }
            (Some("message_end"), Some("assistant")) => {
                assert!(
                    open.take().is_some(),
                    "{what}: assistant message_end at {i} without a message_start: {kinds:?}"
                );
            }
            _ => {}
        }
    }
    assert_eq!(
        open, None,
        "{what}: an assistant message never ended: {kinds:?}"
    );
    for role in ["user", "toolResult"] {
        let of = |t: &str| {
            events
                .iter()
                .filter(|e| e["type"] == t && e["message"]["role"] == role)
                .count()
        };
        assert_eq!(
            of("message_start"),
            of("message_end"),
            "{what}: {role} starts and ends"
        );
    }
}

/// Event types, with the role and stop reason of message events: `message_end(assistant:error)`.
fn summary(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let kind = e["type"].as_str().unwrap_or("?");
            match (
                e["message"]["role"].as_str(),
                e["message"]["stopReason"].as_str(),
            ) {
                (Some(role), Some(stop)) => format!("{kind}({role}:{stop})"),
                (Some(role), None) => format!("{kind}({role})"),
                _ => kind.to_string(),
            }
        })
        .collect()
}

/// Serves `replies` in order to one prompt and returns the run's events, checked.
fn run(what: &str, replies: Vec<Reply>, envs: &[(&str, &str)]) -> (Gjc, Vec<Value>) {
    let fake = FakeProvider::start();
    for r in replies {
        fake.push(r);
    }
    let mut builder = openai(&fake).env("GJC_RETRY_BASE_MS", "1");
    for (k, v) in envs {
        builder = builder.env(k, v);
    }
    let mut g = builder.spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    assert_balanced(what, &events);
    (g, events)
}

fn last_assistant(events: &[Value]) -> &Value {
    &events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .expect("an assistant message_end")["message"]
}

fn recovered(events: &[Value], retries: usize) {
    assert_eq!(
        count(events, "auto_retry_start"),
        retries,
        "{:?}",
        types(events)
    );
    let last = last_assistant(events);
    assert_eq!(last["stopReason"], "stop", "{last}");
    assert_eq!(last["content"][0]["text"], "ok");
}

fn ok() -> Reply {
    Reply::sse(openai_text(&["ok"]))
}

fn chunk(delta: Value) -> String {
    sse_events(
        &[json!({"choices":[{"index":0,"delta":delta,"finish_reason":null}]})],
        false,
    )
}

fn text_then(c: Chunk) -> Reply {
    Reply::sse_chunks(vec![
        Chunk::Bytes(chunk(json!({"content": "partial "})).into_bytes()),
        c,
    ])
}

/// A tool call whose arguments have begun (`{"command": "ec`) and then `c`.
fn tool_args_then(c: Chunk) -> Reply {
    let start = chunk(
        json!({"tool_calls":[{"index":0,"id":"call_1","type":"function",
        "function":{"name":"bash","arguments":""}}]}),
    );
    let args =
        chunk(json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"command\": \"ec"}}]}));
    Reply::sse_chunks(vec![Chunk::Bytes((start + &args).into_bytes()), c])
}

#[test]
fn rate_limited_with_retry_after() {
    let limited = Reply::status(
        429,
        r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#,
    )
    .header("retry-after", "1");
    let (_, events) = run("429", vec![limited, ok()], &[]);
    recovered(&events, 1);
    let start = events
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .unwrap();
    assert_eq!(start["delayMs"], 1000);
}

#[test]
fn server_errors() {
    let replies = [500, 502, 503]
        .iter()
        .map(|s| Reply::status(*s, r#"{"error":{"message":"boom","type":"server_error"}}"#))
        .chain([ok()])
        .collect();
    let (_, events) = run("5xx", replies, &[]);
    recovered(&events, 3);
}

#[test]
fn overloaded_529() {
    let overloaded = Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    let (_, events) = run("529", vec![overloaded, ok()], &[]);
    recovered(&events, 1);
}

#[test]
fn drop_before_any_event() {
    let (_, events) = run(
        "drop before any event",
        vec![Reply::sse_chunks(vec![Chunk::Drop]), ok()],
        &[],
    );
    recovered(&events, 1);
}

#[test]
fn drop_after_text_started() {
    let (_, events) = run("drop after text", vec![text_then(Chunk::Drop), ok()], &[]);
    recovered(&events, 1);
}

#[test]
fn drop_mid_tool_call_arguments() {
    let (_, events) = run(
        "drop mid tool arguments",
        vec![tool_args_then(Chunk::Drop), ok()],
        &[],
    );
    recovered(&events, 1);
    assert_eq!(
        count(&events, "tool_execution_start"),
        0,
        "no half call runs"
    );
}

#[test]
fn drops_until_retries_are_exhausted() {
    let replies = (0..4).map(|_| text_then(Chunk::Drop)).collect();
    let (_, events) = run("drops exhausted", replies, &[]);
    assert_eq!(count(&events, "auto_retry_start"), 3);
    assert_eq!(last_assistant(&events)["stopReason"], "error");
}

#[test]
fn stall_before_any_event() {
    let (_, events) = run(
        "stall before any event",
        vec![Reply::sse_chunks(vec![Chunk::Stall]), ok()],
        &[("GJC_STREAM_IDLE_TIMEOUT_MS", "300")],
    );
    recovered(&events, 1);
}

#[test]
fn stall_after_text_started() {
    let (_, events) = run(
        "stall after text",
        vec![text_then(Chunk::Stall), ok()],
        &[("GJC_STREAM_IDLE_TIMEOUT_MS", "300")],
    );
    recovered(&events, 1);
}

#[test]
fn slow_first_byte() {
    let slow = Reply::sse_chunks(vec![
        Chunk::Pause(std::time::Duration::from_millis(400)),
        Chunk::Bytes(openai_text(&["ok"]).into_bytes()),
    ]);
    let (_, events) = run("slow first byte", vec![slow], &[]);
    recovered(&events, 0);
}

#[test]
fn garbage_lines_without_a_field_are_ignored() {
    let body = format!(
        "this is not sse\n\u{1}\u{2}binary junk\n:comment\n\n{}",
        openai_text(&["ok"])
    );
    let (_, events) = run("garbage lines", vec![Reply::sse(body)], &[]);
    recovered(&events, 0);
}

#[test]
fn non_json_data_fails_the_message() {
    let body = format!(
        "{}data: {{not json at all\n\n",
        chunk(json!({"content": "partial "}))
    );
    let (_, events) = run("non-JSON data", vec![Reply::sse(body), ok()], &[]);
    let last = last_assistant(&events);
    assert_eq!(last["stopReason"], "error");
    assert!(
        last["errorMessage"]
            .as_str()
            .unwrap()
            .starts_with("malformed stream event"),
        "{last}"
    );
    assert_eq!(last["content"][0]["text"], "partial ");
}

#[test]
fn truncated_tool_arguments() {
    // The stream finishes normally, but the arguments it sent are cut off.
    let finish = sse_events(
        &[json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})],
        false,
    ) + "data: [DONE]\n\n";
    let replies = vec![tool_args_then(Chunk::Bytes(finish.into_bytes())), ok()];
    let (_, events) = run("truncated tool arguments", replies, &[]);
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 1, "{:?}", types(&events));
    assert_eq!(ends[0]["isError"], true, "{}", ends[0]);
    recovered(&events, 0);
}

#[test]
fn giant_line_over_the_cap() {
    let giant = Reply::sse_chunks(vec![
        Chunk::Bytes(format!("{}data: ", chunk(json!({"content": "partial "}))).into_bytes()),
        Chunk::Repeat {
            byte: b'x',
            len: 4 << 20,
        },
        Chunk::Bytes(b"\n\n".to_vec()),
    ]);
    let (_, events) = run(
        "giant line",
        vec![giant, ok()],
        &[("GJC_SSE_MAX_LINE_BYTES", "1048576")],
    );
    assert_eq!(count(&events, "auto_retry_start"), 0);
    let last = last_assistant(&events);
    assert_eq!(last["stopReason"], "error");
    assert!(
        last["errorMessage"].as_str().unwrap().contains("1 MiB"),
        "{last}"
    );
}

/// A run that failed once and is waiting out a long back-off, with every event so far kept.
fn waiting_for_retry(first: Reply) -> Gjc {
    let fake = FakeProvider::start();
    fake.push(first);
    let mut g = openai(&fake).env("GJC_RETRY_BASE_MS", "60000").spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    // Other frames stay queued for `run_events`.
    g.event("auto_retry_start");
    g
}

fn boom() -> Reply {
    Reply::status(500, r#"{"error":{"message":"boom"}}"#)
}

#[test]
fn abort_during_retry_backoff() {
    let mut g = waiting_for_retry(boom());
    g.ok(json!({"type": "abort"}));
    let events = g.run_events();
    assert_balanced("abort during back-off", &events);
    assert_eq!(events.last().unwrap()["stopReason"], "completed");
    assert_eq!(events.last().unwrap()["outcome"], "aborted");
}

#[test]
fn abort_retry_during_backoff() {
    let mut g = waiting_for_retry(boom());
    g.ok(json!({"type": "abort_retry"}));
    let events = g.run_events();
    assert_balanced("abort_retry during back-off", &events);
    assert_eq!(last_assistant(&events)["stopReason"], "error");
}

#[test]
fn abort_during_backoff_after_a_started_stream_dropped() {
    let mut g = waiting_for_retry(text_then(Chunk::Drop));
    g.ok(json!({"type": "abort"}));
    let events = g.run_events();
    assert_balanced("abort after a dropped stream", &events);
}
