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
