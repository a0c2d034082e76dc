//! How assistant messages end on the wire: every block that started gets exactly one `*_end`
//! update, in order, before `message_end`, whether the provider closed it or the stream simply
//! ended (a Chat tool call, Gemini's last block, a call cut off by the output limit).

use serde_json::{json, Value};

use crate::support::fake_provider::sse_events;
use crate::support::{gjc, Chunk, FakeProvider, Reply};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/providers/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The events of one run answered by `body` from `provider` (a second request, made after a tool
/// call, gets an error that ends the run).
fn run(provider: &str, body: Vec<u8>) -> Vec<Value> {
    let fake = FakeProvider::start();
    fake.push(Reply::sse_chunks(vec![Chunk::Bytes(body)]));
    fake.push(Reply::status(400, r#"{"error":{"message":"end of test"}}"#));
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&["--provider", provider, "--model", "m"])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "hi"}));
    g.run_events()
}

/// Checks the first assistant message of `events`: each `*_start` closed by one matching
/// `*_end` before the next block starts and before `message_end`. Returns the ends' types.
fn check_block_ends(events: &[Value]) -> Vec<String> {
    let start = events
        .iter()
        .position(|e| e["type"] == "message_start" && e["message"]["role"] == "assistant")
        .expect("an assistant message_start");
    let end = start
        + events[start..]
            .iter()
            .position(|e| e["type"] == "message_end")
            .expect("its message_end");
    let stop = &events[end]["message"]["stopReason"];
    assert!(
        ["stop", "length", "toolUse"].contains(&stop.as_str().unwrap_or("")),
        "{stop}"
    );
    let mut open: Option<(String, u64)> = None;
    let mut ends = Vec::new();
    for e in &events[start..end] {
        let ev = &e["assistantMessageEvent"];
        let Some(kind) = ev["type"].as_str() else {
            continue;
        };
        let index = ev["contentIndex"].as_u64();
        if let Some(block) = kind.strip_suffix("_start") {
            assert!(open.is_none(), "{kind} while {open:?} is still open");
            open = Some((block.to_string(), index.expect("contentIndex")));
        } else if let Some(block) = kind.strip_suffix("_end") {
            let (was, at) = open.take().unwrap_or_else(|| panic!("{kind} of no block"));
            assert_eq!((block, index), (was.as_str(), Some(at)), "{kind}");
            ends.push(kind.to_string());
        }
    }
    assert!(open.is_none(), "{open:?} never ended before message_end");
    ends
}

#[test]
fn openai_chat_tool_call_gets_its_end() {
    let events = run("fake-openai", fixture("openai-chat-tool-call-usage.sse"));
    assert_eq!(check_block_ends(&events), ["toolcall_end"]);
}

#[test]
fn gemini_last_text_block_gets_its_end() {
    let events = run("fake-google", fixture("gemini-thinking-text.sse"));
    assert_eq!(check_block_ends(&events), ["thinking_end", "text_end"]);
}

#[test]
fn tool_call_cut_off_by_the_output_limit_gets_its_end() {
    let body = sse_events(
        &[
            json!({"choices":[{"index":0,"delta":{"content":"Writing."}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":"{\"path\": \"a"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}),
        ],
        false,
    ) + "data: [DONE]\n\n";
    let events = run("fake-openai", body.into_bytes());
    assert_eq!(check_block_ends(&events), ["text_end", "toolcall_end"]);
    let call_end = events
        .iter()
        .find(|e| e["assistantMessageEvent"]["type"] == "toolcall_end")
        .unwrap();
    let call = &call_end["assistantMessageEvent"]["toolCall"];
    assert_eq!(call["id"], "call_1", "{call}");
}

/// An in-stream error with usage in the same chunk (Groq's tool-call validation failure): the
/// message that ends the run keeps the usage, the error's code and its status.
#[test]
fn in_stream_error_keeps_its_usage_code_and_status() {
    let body = sse_events(
        &[
            json!({"choices":[{"index":0,"delta":{"reasoning":"Let me call it."}}]}),
            json!({"error":{"message":"tool call validation failed","type":"invalid_request_error",
                "code":"tool_use_failed","status_code":400},
                "usage":{"prompt_tokens":120,"completion_tokens":7,"total_tokens":127}}),
        ],
        false,
    );
    let events = run("fake-openai", body.into_bytes());
    let end = events
        .iter()
        .rfind(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .expect("the assistant message_end");
    let m = &end["message"];
    assert_eq!(m["stopReason"], "error", "{m}");
    assert_eq!(
        m["errorMessage"],
        "invalid_request_error (tool_use_failed): tool call validation failed"
    );
    assert_eq!(m["errorStatus"], 400);
    assert_eq!(
        (&m["usage"]["input"], &m["usage"]["output"]),
        (&json!(120), &json!(7))
    );
    assert_eq!(m["usage"]["totalTokens"], 127);
}
