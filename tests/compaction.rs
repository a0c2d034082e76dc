//! Compaction, manual and automatic, through the fake provider: what is sent for the summary,
//! what the next request contains, the compaction entry, overflow retry, abort.

use serde_json::{json, Value};

use crate::support::fake_provider::{openai_text, sse_events};
use crate::support::{gjc, types, Chunk, FakeProvider, Gjc, Reply, TIMEOUT};

fn text_with_usage(text: &str, prompt_tokens: u64) -> Reply {
    let mut body = sse_events(
        &[
            json!({"choices":[{"index":0,"delta":{"content":text},"finish_reason":null}]}),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
            json!({"choices":[],"usage":{"prompt_tokens":prompt_tokens,"completion_tokens":5,"total_tokens":prompt_tokens + 5}}),
        ],
        false,
    );
    body.push_str("data: [DONE]\n\n");
    Reply::sse(body)
}

fn spawn(fake: &FakeProvider) -> Gjc {
    gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-openai", "--model", "m"])
        .env("GJC_COMPACT_KEEP_TOKENS", "1")
        .spawn()
}

fn exchange(g: &mut Gjc, fake: &FakeProvider, q: &str, a: &str) {
    fake.push(Reply::sse(openai_text(&[a])));
    g.ok(json!({"type": "prompt", "message": q}));
    g.run_events();
    fake.request(TIMEOUT);
}

#[test]
fn manual_compaction_summarises_and_rebuilds_the_context() {
    let fake = FakeProvider::start();
    let mut g = spawn(&fake);
    assert_eq!(
        g.request(json!({"type": "compact"}))["error"],
        "Nothing to compact (session too small)"
    );
    exchange(&mut g, &fake, "q1", "a1");
    exchange(&mut g, &fake, "q2", "a2");
    fake.push(Reply::sse(openai_text(&["SUMMARY: the user asked q1."])));
    let d = g.ok(json!({"type": "compact", "customInstructions": "mention q1"}));
    assert_eq!(d["summary"], "SUMMARY: the user asked q1.");
    assert!(d["firstKeptEntryId"].as_str().unwrap().len() == 8);
    let req = fake.request(TIMEOUT);
    assert!(req.body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .starts_with("You are a context summarization assistant"));
    let prompt = req.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("[User]: q1")
            && prompt.contains("[Assistant]: a1")
            && !prompt.contains("q2"),
        "{prompt}"
    );
    assert!(prompt.ends_with("Additional focus: mention q1"));
    assert!(
        req.body.get("tools").is_none(),
        "the summary request offers no tools"
    );
    let msgs = g.messages();
    assert_eq!(msgs[0]["role"], "compactionSummary");
    assert_eq!(msgs.len(), 3, "summary + the kept turn (q2, a2)");
    assert_eq!(
        g.request(json!({"type": "compact"}))["error"],
        "Already compacted"
    );
    // The next request starts with the summary.
    exchange(&mut g, &fake, "q3", "a3");
    let path = g.ok(json!({"type": "get_state"}))["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let entries: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let c = entries
        .iter()
        .find(|e| e["type"] == "compaction")
        .expect("compaction entry");
    assert_eq!(c["firstKeptEntryId"], d["firstKeptEntryId"]);
    // Reopening gives the same context.
    let mut h = gjc().spawn();
    h.ok(json!({"type": "switch_session", "sessionPath": path}));
    let reopened = h.messages();
    assert_eq!(reopened[0]["role"], "compactionSummary");
    assert_eq!(reopened.len(), 5);
}

#[test]
fn the_request_after_compaction_carries_the_summary() {
    let fake = FakeProvider::start();
    let mut g = spawn(&fake);
    exchange(&mut g, &fake, "q1", "a1");
    exchange(&mut g, &fake, "q2", "a2");
    fake.push(Reply::sse(openai_text(&["THE SUMMARY"])));
    g.ok(json!({"type": "compact"}));
    fake.request(TIMEOUT);
    fake.push(Reply::sse(openai_text(&["a3"])));
    g.ok(json!({"type": "prompt", "message": "q3"}));
    g.run_events();
    let req = fake.request(TIMEOUT);
    let first = req.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        first.contains("<summary>\nTHE SUMMARY\n</summary>"),
        "{first}"
    );
    assert_eq!(req.body["messages"][2]["content"], "q2");
}

#[test]
fn automatic_compaction_past_the_threshold() {
    let fake = FakeProvider::start();
    let mut g = spawn(&fake);
    exchange(&mut g, &fake, "q1", "a1");
    fake.push(text_with_usage("big answer", 95_000));
    fake.push(Reply::sse(openai_text(&["AUTO SUMMARY"])));
    g.ok(json!({"type": "prompt", "message": "q2"}));
    let events = g.run_events();
    let t = types(&events);
    let start = events
        .iter()
        .find(|e| e["type"] == "auto_compaction_start")
        .expect("auto_compaction_start");
    assert_eq!(
        start,
        &json!({"type": "auto_compaction_start", "reason": "threshold", "action": "context-full"})
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "auto_compaction_end")
        .unwrap();
    assert_eq!(end["result"]["summary"], "AUTO SUMMARY");
    assert_eq!(
        (end["aborted"].as_bool(), end["willRetry"].as_bool()),
        (Some(false), Some(false))
    );
    assert!(
        t.iter().position(|x| x == "auto_compaction_end") < t.iter().position(|x| x == "agent_end"),
        "inside the run"
    );
    assert_eq!(g.messages()[0]["role"], "compactionSummary");
    g.ok(json!({"type": "set_auto_compaction", "enabled": false}));
}

#[test]
fn context_overflow_compacts_and_retries_once() {
    let fake = FakeProvider::start();
    let mut g = spawn(&fake);
    exchange(&mut g, &fake, "q1", "a1");
    fake.push(Reply::status(400, r#"{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum","type":"invalid_request_error"}}"#));
    fake.push(Reply::sse(openai_text(&["OVERFLOW SUMMARY"])));
    fake.push(Reply::sse(openai_text(&["answer after compaction"])));
    g.ok(json!({"type": "prompt", "message": "q2"}));
    let events = g.run_events();
    let start = events
        .iter()
        .find(|e| e["type"] == "auto_compaction_start")
        .unwrap();
    assert_eq!(start["reason"], "overflow");
    let end = events
        .iter()
        .find(|e| e["type"] == "auto_compaction_end")
        .unwrap();
    assert_eq!(end["willRetry"], true);
    assert_eq!(
        events.iter().filter(|e| e["type"] == "agent_end").count(),
        1
    );
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "answer after compaction"
    );
}

#[test]
fn abort_cancels_a_compaction() {
    let fake = FakeProvider::start();
    let mut g = spawn(&fake);
    exchange(&mut g, &fake, "q1", "a1");
    exchange(&mut g, &fake, "q2", "a2");
    fake.push(Reply::sse_chunks(vec![Chunk::Stall]));
    let id = g.client.next_id();
    g.client
        .send(&json!({"id": id, "type": "compact"}))
        .unwrap();
    fake.request(TIMEOUT);
    assert_eq!(g.ok(json!({"type": "get_state"}))["isCompacting"], true);
    g.ok(json!({"type": "abort"}));
    let r = g.client.wait_for(|f| f["id"] == id, TIMEOUT).unwrap();
    assert_eq!(r["error"], "Compaction cancelled");
    assert_eq!(g.ok(json!({"type": "get_state"}))["isCompacting"], false);
    assert_eq!(g.messages().len(), 4, "the context is untouched");
}
