//! `handoff`: the model writes a handoff document (one scripted turn's text), which is saved where
//! the response says, and the session continues in a new session whose context holds it; the old
//! session file is left as it was. Busy, aborted and empty documents are refused with the
//! reference's errors and change nothing.

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

const DOCUMENT: &str = "## Goal\nShip the parser.\n\n## Next steps\nRun the tests in src/parse.rs.";

fn answer(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn state(g: &mut Gjc) -> (String, String) {
    let s = g.ok(json!({"type": "get_state"}));
    (
        s["sessionId"].as_str().unwrap().to_string(),
        s["sessionFile"].as_str().unwrap().to_string(),
    )
}

fn exchange(g: &mut Gjc, q: &str) {
    g.ok(json!({"type": "prompt", "message": q}));
    g.run_events();
}

#[test]
fn the_document_is_saved_and_the_session_continues_in_a_new_one() {
    let mut g = gjc()
        .script(json!({"turns": [answer("a1"), answer(DOCUMENT), answer("a2")]}))
        .spawn();
    let r = g.request(json!({"type": "handoff"}));
    assert_eq!(r["error"], "Nothing to hand off (no messages yet)", "{r}");
    exchange(&mut g, "q1");
    let (old_id, old_file) = state(&mut g);
    let old_bytes = std::fs::read(&old_file).unwrap();

    let d = g.ok(json!({"type": "handoff", "customInstructions": "focus on the parser"}));
    let saved = d["savedPath"].as_str().expect("savedPath");
    assert_eq!(std::fs::read_to_string(saved).unwrap(), DOCUMENT);

    let (new_id, new_file) = state(&mut g);
    assert_ne!(new_id, old_id, "a new session");
    assert_ne!(new_file, old_file);
    assert_eq!(
        std::fs::read(&old_file).unwrap(),
        old_bytes,
        "the old session file is untouched"
    );
    let new_text = std::fs::read_to_string(&new_file).unwrap();
    let header: Value = serde_json::from_str(new_text.lines().next().unwrap()).unwrap();
    assert_eq!(header["parentSession"], old_file.as_str(), "{header}");
    assert!(
        new_text.contains("Ship the parser."),
        "the document is saved in the new session"
    );

    let messages = g.messages();
    assert_eq!(
        messages.len(),
        1,
        "the context is the document: {messages:?}"
    );
    let text = messages[0]["content"].to_string();
    assert!(
        messages[0]["role"] == "user"
            && text.contains("<handoff-context>")
            && text.contains("Ship the parser."),
        "{messages:?}"
    );
    // The work goes on in the new session.
    exchange(&mut g, "q2");
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "a2"
    );
    assert_eq!(g.messages().len(), 3);
    assert_eq!(state(&mut g).0, new_id);
}

#[test]
fn busy_and_aborted_handoffs_change_nothing() {
    let mut g = gjc()
        .script(json!({"turns": [
            answer("a1"),
            json!({"content": [{"type": "text", "text": "never ends"}], "stall": true}),
            json!({"content": [{"type": "text", "text": "half a docu"}], "stall": true}),
        ]}))
        .spawn();
    exchange(&mut g, "q1");
    let before = state(&mut g);

    // A run streams: refused, as a prompt would be.
    g.ok(json!({"type": "prompt", "message": "q2"}));
    g.event("message_update");
    let r = g.request(json!({"type": "handoff"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Agent is already processing"),
        "{r}"
    );
    g.ok(json!({"type": "abort"}));
    g.run_events();

    // Aborted while the document is written.
    let id = g.client.next_id();
    g.client
        .send(&json!({"id": id, "type": "handoff"}))
        .unwrap();
    assert_eq!(g.ok(json!({"type": "get_state"}))["isCompacting"], true);
    g.ok(json!({"type": "abort"}));
    let r = g.client.wait_for(|f| f["id"] == id, TIMEOUT).unwrap();
    assert_eq!(r["error"], "Handoff cancelled", "{r}");
    assert_eq!(state(&mut g), before, "still the same session");
    assert_eq!(g.messages().len(), 4, "q1, a1, q2 and its aborted answer");
}

/// In a process of its own: an aborted request may or may not have taken its scripted turn.
#[test]
fn an_empty_document_is_an_error_and_changes_nothing() {
    let mut g = gjc()
        .script(json!({"turns": [answer("a1"), answer("  \n")]}))
        .spawn();
    exchange(&mut g, "q1");
    let before = state(&mut g);
    let r = g.request(json!({"type": "handoff"}));
    assert_eq!(r["error"], "Handoff generation produced no content", "{r}");
    assert_eq!(state(&mut g), before, "still the same session");
    assert_eq!(g.messages().len(), 2);
}

#[test]
fn without_a_session_file_there_is_no_saved_path() {
    let mut g = gjc()
        .script(json!({"turns": [answer("a1"), answer(DOCUMENT)]}))
        .args(&["--no-session"])
        .spawn();
    exchange(&mut g, "q1");
    let r = g.request(json!({"type": "handoff"}));
    assert_eq!(r["success"], true, "{r}");
    assert!(r["data"].get("savedPath").is_none(), "{r}");
    let messages = g.messages();
    assert_eq!(messages.len(), 1);
    assert!(messages[0]["content"]
        .to_string()
        .contains("Ship the parser."));
}

/// A turn whose reported usage puts the context past the threshold (window 200,000 − 16,384).
fn big_answer(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "usage": {"input": 190_000, "output": 10}})
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[test]
fn the_handoff_strategy_continues_past_the_threshold_in_a_new_session() {
    let mut g = gjc()
        .env("GJC_COMPACTION_STRATEGY", "handoff")
        .script(json!({"turns": [answer("a1"), big_answer("a2"), answer(DOCUMENT), answer("a3")]}))
        .spawn();
    exchange(&mut g, "q1");
    let (old_id, old_file) = state(&mut g);
    g.ok(json!({"type": "prompt", "message": "q2"}));
    let events = g.run_events();
    let start = of_type(&events, "auto_compaction_start");
    assert_eq!(start.len(), 1, "{events:?}");
    assert_eq!(start[0]["reason"], "threshold");
    assert_eq!(start[0]["action"], "handoff");
    let end = of_type(&events, "auto_compaction_end");
    assert_eq!(end.len(), 1, "{events:?}");
    assert_eq!(end[0]["action"], "handoff");
    assert_eq!(end[0]["aborted"], false);
    assert_eq!(end[0]["result"]["summary"], DOCUMENT, "{}", end[0]);
    assert_eq!(events.last().unwrap()["type"], "agent_end");

    let (new_id, new_file) = state(&mut g);
    assert_ne!(new_id, old_id);
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&new_file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["parentSession"], old_file.as_str());
    let saved = new_file.trim_end_matches(".jsonl").to_string() + ".handoff.md";
    assert_eq!(std::fs::read_to_string(saved).unwrap(), DOCUMENT);
    let old = std::fs::read_to_string(&old_file).unwrap();
    assert!(
        old.contains("a2") && !old.contains("Ship the parser."),
        "{old}"
    );
    let messages = g.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0]["content"]
        .to_string()
        .contains("<handoff-context>"));
    exchange(&mut g, "q3");
    assert_eq!(g.messages().len(), 3, "the work goes on in the new session");
}

#[test]
fn with_no_document_the_strategy_falls_back_to_a_summary_in_place() {
    let mut g = gjc()
        .env("GJC_COMPACTION_STRATEGY", "handoff")
        .env("GJC_COMPACT_KEEP_TOKENS", "1")
        .script(json!({"turns": [answer("a1"), big_answer("a2"), answer(" "), answer("SUMMARY")]}))
        .spawn();
    exchange(&mut g, "q1");
    let before = state(&mut g);
    g.ok(json!({"type": "prompt", "message": "q2"}));
    let events = g.run_events();
    let actions: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e["type"] == "auto_compaction_start" || e["type"] == "auto_compaction_end")
        .map(|e| (&e["type"], &e["action"]))
        .collect();
    assert_eq!(
        actions,
        [
            (&json!("auto_compaction_start"), &json!("handoff")),
            (&json!("auto_compaction_end"), &json!("handoff")),
            (&json!("auto_compaction_start"), &json!("context-full")),
            (&json!("auto_compaction_end"), &json!("context-full")),
        ],
        "{events:?}"
    );
    let ends = of_type(&events, "auto_compaction_end");
    assert_eq!(
        ends[0]["errorMessage"],
        "Handoff generation produced no content"
    );
    assert_eq!(ends[1]["result"]["summary"], "SUMMARY");
    assert_eq!(state(&mut g), before, "compacted in place");
}
