//! Aborts, retries and provider faults: abort mid-stream and during back-off, 429 with a hint,
//! retries exhausted, in-stream errors, drops and stalls, missing keys. Every run ends with exactly
//! one `agent_end`.

use serde_json::{json, Value};

use crate::support::fake_provider::{openai_text, sse_events};
use crate::support::{gjc, types, Chunk, FakeProvider, Gjc, Reply, TIMEOUT};

pub(crate) fn openai(fake: &FakeProvider) -> crate::support::gjc::GjcBuilder {
    gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-openai", "--model", "m"])
}

pub(crate) fn count(events: &[Value], t: &str) -> usize {
    events.iter().filter(|e| e["type"] == t).count()
}

fn first_delta_then(chunk: Chunk) -> Reply {
    let head = sse_events(
        &[json!({"choices":[{"index":0,"delta":{"content":"partial "},"finish_reason":null}]})],
        false,
    );
    Reply::sse_chunks(vec![Chunk::Bytes(head.into_bytes()), chunk])
}

#[test]
fn abort_mid_stream_keeps_the_partial_message() {
    let fake = FakeProvider::start();
    fake.push(first_delta_then(Chunk::Stall));
    let mut g = openai(&fake).spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    // Synchronise on the delta itself: the abort overtakes deltas still queued behind text_start.
    g.client
        .wait_for(
            |f| f["payload"]["event"]["assistantMessageEvent"]["type"] == "text_delta",
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(
        g.ok(json!({"type": "get_state"}))["isStreaming"],
        true,
        "get_state answers while streaming"
    );
    let abort_id = g.client.next_id();
    g.client
        .send(&json!({"id": abort_id, "type": "abort"}))
        .unwrap();
    let frames = g
        .client
        .collect_until(|f| f["id"] == abort_id, TIMEOUT)
        .unwrap();
    let events: Vec<Value> = frames
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| f["payload"]["event"].clone())
        .collect();
    assert_eq!(count(&events, "agent_end"), 1);
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap();
    assert_eq!(end["message"]["stopReason"], "aborted");
    assert_eq!(end["message"]["content"][0]["text"], "partial ");
    assert_eq!(events.last().unwrap()["stopReason"], "completed");
    assert_eq!(events.last().unwrap()["outcome"], "aborted");
    assert_eq!(g.ok(json!({"type": "get_state"}))["isStreaming"], false);
    // The aborted turn is not replayed to the model.
    fake.push(Reply::sse(openai_text(&["fresh"])));
    g.ok(json!({"type": "prompt", "message": "again"}));
    g.run_events();
    fake.request(TIMEOUT);
    let req = fake.request(TIMEOUT);
    let roles: Vec<&str> = req.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "user"]);
}

#[test]
fn abort_and_prompt_replaces_the_run() {
    let fake = FakeProvider::start();
    fake.push(first_delta_then(Chunk::Stall));
    fake.push(Reply::sse(openai_text(&["replacement"])));
    let mut g = openai(&fake).spawn();
    g.ok(json!({"type": "prompt", "message": "slow"}));
    g.event("message_update");
    g.ok(json!({"type": "abort_and_prompt", "message": "instead"}));
    g.event("agent_end");
    let events = g.run_events();
    assert_eq!(
        events.first().map(|e| e["type"].clone()),
        Some(json!("agent_start"))
    );
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "replacement"
    );
}

#[test]
fn retry_after_429_then_success_inside_one_run() {
    let fake = FakeProvider::start();
    fake.push(
        Reply::status(
            429,
            r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#,
        )
        .header("retry-after-ms", "20"),
    );
    fake.push(Reply::sse(openai_text(&["ok"])));
    let mut g = openai(&fake).spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let t = types(&events);
    assert_eq!(count(&events, "agent_start"), 1);
    assert_eq!(count(&events, "agent_end"), 1);
    let start = events
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .expect("auto_retry_start");
    assert_eq!(start["attempt"], 1);
    assert_eq!(start["delayMs"], 20);
    assert!(
        start["errorMessage"].as_str().unwrap().contains("HTTP 429"),
        "{start}"
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "auto_retry_end")
        .expect("auto_retry_end");
    assert_eq!(end["success"], true);
    let retry_pos = t.iter().position(|e| e == "auto_retry_start").unwrap();
    assert!(
        retry_pos > 0 && retry_pos < t.len() - 1,
        "retries happen between agent_start and agent_end"
    );
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "ok"
    );
}

#[test]
fn retries_exhausted_end_the_run_with_the_error() {
    let fake = FakeProvider::start();
    for _ in 0..4 {
        fake.push(Reply::status(
            503,
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
        ));
    }
    let mut g = openai(&fake).env("GJC_RETRY_BASE_MS", "1").spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    assert_eq!(count(&events, "auto_retry_start"), 3);
    let end = events
        .iter()
        .find(|e| e["type"] == "auto_retry_end")
        .unwrap();
    assert_eq!(end["success"], false);
    assert!(end["finalError"].as_str().unwrap().contains("HTTP 503"));
    let last_msg = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap();
    assert_eq!(last_msg["message"]["stopReason"], "error");
    assert_eq!(last_msg["message"]["errorStatus"], 503);
    assert_eq!(count(&events, "agent_end"), 1);
}

#[test]
fn abort_during_retry_backoff() {
    let fake = FakeProvider::start();
    fake.push(Reply::status(500, r#"{"error":{"message":"boom"}}"#));
    let mut g = openai(&fake).env("GJC_RETRY_BASE_MS", "60000").spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("auto_retry_start");
    g.ok(json!({"type": "abort"}));
    let events = g.run_events();
    let end = events
        .iter()
        .find(|e| e["type"] == "auto_retry_end")
        .unwrap();
    assert_eq!(
        end,
        &json!({"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "Retry cancelled"})
    );
    assert_eq!(count(&events, "agent_end"), 1);
}

#[test]
fn abort_retry_gives_up_the_pending_retry() {
    let fake = FakeProvider::start();
    fake.push(Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    let mut g = openai(&fake).env("GJC_RETRY_BASE_MS", "60000").spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("auto_retry_start");
    g.ok(json!({"type": "abort_retry"}));
    let events = g.run_events();
    assert_eq!(
        events
            .iter()
            .find(|e| e["type"] == "auto_retry_end")
            .unwrap()["finalError"],
        "Retry cancelled"
    );
    assert_eq!(events.last().unwrap()["stopReason"], "completed");
}

#[test]
fn non_transient_errors_are_not_retried_and_surface_the_message() {
    let fake = FakeProvider::start();
    fake.push(Reply::status(
        400,
        r#"{"error":{"message":"bad tool schema","type":"invalid_request_error"}}"#,
    ));
    let mut g = openai(&fake).spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    assert_eq!(count(&events, "auto_retry_start"), 0);
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap();
    assert_eq!(
        end["message"]["errorMessage"],
        "HTTP 400: invalid_request_error: bad tool schema"
    );
}

#[test]
fn in_stream_error_after_200() {
    let fake = FakeProvider::start();
    let body = sse_events(
        &[
            json!({"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}),
            json!({"error":{"message":"content policy","type":"invalid_request_error"}}),
        ],
        false,
    );
    fake.push(Reply::sse(body));
    let mut g = openai(&fake).spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap();
    assert_eq!(end["message"]["stopReason"], "error");
    assert_eq!(
        end["message"]["errorMessage"],
        "invalid_request_error: content policy"
    );
    assert_eq!(
        end["message"]["content"][0]["text"], "x",
        "partial content is kept"
    );
}

#[test]
fn dropped_and_stalled_streams_are_retried() {
    let fake = FakeProvider::start();
    fake.push(first_delta_then(Chunk::Drop));
    fake.push(first_delta_then(Chunk::Stall));
    fake.push(Reply::sse(openai_text(&["recovered"])));
    let mut g = openai(&fake)
        .env("GJC_RETRY_BASE_MS", "1")
        .env("GJC_STREAM_IDLE_TIMEOUT_MS", "300")
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let retries: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "auto_retry_start")
        .collect();
    assert_eq!(retries.len(), 2, "{:?}", types(&events));
    assert!(
        retries[0]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("stream"),
        "{}",
        retries[0]
    );
    assert!(
        retries[1]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("stalled"),
        "{}",
        retries[1]
    );
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "recovered"
    );
    assert_eq!(count(&events, "agent_end"), 1);
}

#[test]
fn a_stream_without_finish_is_an_error_not_a_completed_turn() {
    let fake = FakeProvider::start();
    for _ in 0..4 {
        fake.push(Reply::sse(sse_events(
            &[json!({"choices":[{"index":0,"delta":{"content":"half"},"finish_reason":null}]})],
            false,
        )));
    }
    let mut g = openai(&fake).env("GJC_RETRY_BASE_MS", "1").spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap();
    assert_eq!(end["message"]["stopReason"], "error");
    assert!(end["message"]["errorMessage"]
        .as_str()
        .unwrap()
        .contains("finish_reason"));
}

#[test]
fn missing_key_is_a_prompt_error_not_a_startup_error() {
    let fake = FakeProvider::start();
    let mut g: Gjc = gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-nokey", "--model", "m"])
        .spawn();
    let r = g.request(json!({"type": "prompt", "message": "go"}));
    assert_eq!(r["success"], false);
    assert_eq!(
        r["error"],
        "No API key for fake-nokey: set FAKE_UNSET_API_KEY"
    );
    assert!(fake.try_request().is_none());
}

#[test]
fn abort_during_a_long_bash_tool_leaves_no_process() {
    let marker = format!("gjc-abort-test-{}", std::process::id());
    let mut g = gjc()
        .script(json!({"turns": [{"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": format!("sleep 1000 & sleep 1001; echo {marker}")}}]}]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("tool_execution_start");
    // Wait until both sleeps exist, then abort.
    let pid_of = running;
    let deadline = std::time::Instant::now() + TIMEOUT;
    while !pid_of("sleep 1001") && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    g.ok(json!({"type": "abort"}));
    let events = g.run_events();
    assert_eq!(count(&events, "agent_end"), 1);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["isError"], true);
    let deadline = std::time::Instant::now() + TIMEOUT;
    while (pid_of("sleep 1000") || pid_of("sleep 1001")) && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert!(
        !pid_of("sleep 1000") && !pid_of("sleep 1001"),
        "the process group was not killed"
    );
}

/// Whether a process whose command line contains `pattern` exists (reads /proc, no pgrep).
fn running(pattern: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(Result::ok).any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        text.contains(pattern)
            && !text.contains("cargo")
            && std::fs::read_to_string(e.path().join("stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
    })
}

#[test]
fn a_slow_first_byte_is_waited_for_and_state_stays_answerable() {
    let fake = FakeProvider::start();
    let body = openai_text(&["late but fine"]);
    fake.push(Reply::sse_chunks(vec![
        Chunk::Pause(std::time::Duration::from_millis(400)),
        Chunk::Bytes(body.into_bytes()),
    ]));
    let mut g = openai(&fake).spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    fake.request(TIMEOUT);
    assert_eq!(g.ok(json!({"type": "get_state"}))["isStreaming"], true);
    let events = g.run_events();
    assert_eq!(count(&events, "auto_retry_start"), 0);
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "late but fine"
    );
}
