//! Many live sessions in one process: each prompts on its own, every update carries its own
//! `sessionId`, closing one leaves the others running, a burst of `session/new` is answered by
//! backpressure.

use super::*;

/// A scripted turn streaming `text` in chunks of `chunk` characters, a millisecond apart.
fn turn(text: &str, chunk: usize) -> Value {
    json!({"content": [{"type": "text", "text": text}], "chunkChars": chunk, "delayMs": 1})
}

fn chunks_of(messages: &[Value], session: &str) -> String {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

#[test]
fn the_first_of_two_sessions_still_prompts() {
    let mut g = acp(json!({"turns": [turn("one", 8), turn("two", 8)]}));
    g.initialize(json!({}));
    let first = g.new_session();
    let second = g.new_session();
    assert_ne!(first, second);
    let id = g.prompt(&first, "hi");
    let (reason, _) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
}

#[test]
fn two_sessions_stream_at_once_each_tagged_with_its_own_id() {
    let text = "A reply long enough to come in several chunks of eight characters.";
    let mut g = acp(json!({"turns": [turn(text, 8), turn(text, 8)]}));
    g.initialize(json!({}));
    let a = g.new_session();
    let b = g.new_session();
    let ask_a = g.prompt(&a, "hi");
    let ask_b = g.prompt(&b, "hi");
    let seen = g.until(|m| m["id"] == ask_a && m.get("method").is_none());
    let mut rest = seen.clone();
    if !seen
        .iter()
        .any(|m| m["id"] == ask_b && m.get("method").is_none())
    {
        rest.extend(g.until(|m| m["id"] == ask_b && m.get("method").is_none()));
    }
    assert_eq!(chunks_of(&rest, &a), text, "session a's stream");
    assert_eq!(chunks_of(&rest, &b), text, "session b's stream");
}

#[test]
fn closing_one_session_leaves_the_other_streaming() {
    let text = "The other session's reply, streamed in small chunks to the end.";
    let mut g = acp(json!({"turns": [turn(text, 4)]}));
    g.initialize(json!({}));
    let a = g.new_session();
    let b = g.new_session();
    let ask_b = g.prompt(&b, "hi");
    let close = g.request("session/close", json!({"sessionId": a}));
    let closed = g.result(close);
    assert!(closed.is_object(), "{closed}");
    let (response, before) = g.response(ask_b);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(chunks_of(&before, &b), text);
    // The closed one is gone.
    let again = g.prompt(&a, "hi");
    let (response, _) = g.response(again);
    assert_eq!(response["error"]["code"], -32002);
}

#[test]
fn a_burst_of_new_sessions_is_answered_every_one() {
    const BURST: i64 = 10_000;
    let mut g = acp(json!({"turns": []}));
    g.initialize(json!({}));
    let first = g.next_id;
    let mut batch = String::new();
    for n in 0..BURST {
        let id = first + n;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/new",
            "params": {"cwd": g.project, "mcpServers": []}});
        batch.push_str(&line.to_string());
        batch.push('\n');
    }
    g.next_id = first + BURST;
    // Written from another thread while gjc reads: a blocked write is the backpressure.
    let mut pipe = g.stdin.take().unwrap();
    let writer = std::thread::spawn(move || pipe.write_all(batch.as_bytes()));
    let mut ids = std::collections::HashSet::new();
    let last = first + BURST - 1;
    for message in g.until(|m| m["id"] == last && m.get("method").is_none()) {
        if message.get("method").is_some() || message["id"].is_null() {
            continue;
        }
        assert!(message.get("error").is_none(), "{message}");
        ids.insert(message["result"]["sessionId"].as_str().unwrap().to_string());
    }
    assert_eq!(
        ids.len() as i64,
        BURST,
        "every request answered with its own session"
    );
    writer.join().unwrap().unwrap();
}

#[test]
fn a_permission_answer_is_handled_under_the_session_that_asked() {
    let mut g = acp(write_turns("a.txt", "allowed\n"));
    g.initialize(json!({}));
    let a = g.new_session();
    let id = g.prompt(&a, "write it");
    let before = g.until(|m| m["method"] == "session/request_permission");
    let ask = before.last().unwrap().clone();
    assert_eq!(ask["params"]["sessionId"], a);
    // The front end works on another session before the user answers.
    let b = g.new_session();
    assert_ne!(a, b);
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    let tool_updates: Vec<&Value> = after
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .collect();
    assert!(
        tool_updates
            .iter()
            .any(|m| m["params"]["update"]["status"] == "in_progress"),
        "{after:?}"
    );
    for m in tool_updates {
        assert_eq!(m["params"]["sessionId"], a, "{m}");
    }
}

#[test]
fn idle_live_sessions_hold_no_descriptors() {
    let mut g = acp(json!({"turns": []}));
    g.initialize(json!({}));
    let pid = g.child.id();
    let open = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    // A session has started when it has answered a command (its start comes first).
    let started = |g: &mut Acp, session: &str| {
        let set = g.request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "scripted/scripted"}),
        );
        g.result(set);
    };
    let first = g.new_session();
    started(&mut g, &first);
    let with_one = open();
    for _ in 0..20 {
        let session = g.new_session();
        started(&mut g, &session);
    }
    assert_eq!(
        open(),
        with_one,
        "descriptors held by 20 more idle sessions"
    );
}

/// Every message until each of `ids` has been answered (responses included).
fn until_answered(g: &mut Acp, ids: &[i64]) -> Vec<Value> {
    let mut seen: Vec<Value> = Vec::new();
    let answered = |seen: &[Value], id: i64| {
        seen.iter()
            .any(|m| m["id"] == id && m.get("method").is_none())
    };
    while let Some(&left) = ids.iter().find(|&&id| !answered(&seen, id)) {
        seen.extend(g.until(|m| m["id"] == left && m.get("method").is_none()));
    }
    seen
}

#[test]
fn ten_sessions_prompt_at_once_each_stream_complete_and_tagged() {
    let text = "Ten at once, each in chunks of six characters.";
    let turns: Vec<Value> = (0..10).map(|_| turn(text, 6)).collect();
    let mut g = acp(json!({ "turns": turns }));
    g.initialize(json!({}));
    let sessions: Vec<String> = (0..10).map(|_| g.new_session()).collect();
    let asks: Vec<i64> = sessions.iter().map(|s| g.prompt(s, "hi")).collect();
    let seen = until_answered(&mut g, &asks);
    for (session, ask) in sessions.iter().zip(&asks) {
        assert_eq!(
            chunks_of(&seen, session),
            text,
            "session {session}'s stream"
        );
        let answer = seen
            .iter()
            .find(|m| m["id"] == *ask && m.get("method").is_none());
        assert_eq!(answer.unwrap()["result"]["stopReason"], "end_turn");
    }
}

#[test]
fn a_tool_call_runs_in_one_session_while_another_is_cancelled() {
    let long = "A long reply that is still streaming when its session is cancelled. ".repeat(20);
    let mut script = write_turns("a.txt", "written\n");
    script["turns"]
        .as_array_mut()
        .unwrap()
        .insert(0, turn(&long, 2));
    let mut g = acp(script);
    g.initialize(json!({}));
    let streaming = g.new_session();
    let writing = g.new_session();
    let ask_streaming = g.prompt(&streaming, "talk");
    g.until(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let ask_writing = g.prompt(&writing, "write it");
    let before = g.until(|m| m["method"] == "session/request_permission");
    let permission = before.last().unwrap().clone();
    assert_eq!(permission["params"]["sessionId"], writing);
    g.notify("session/cancel", json!({"sessionId": streaming}));
    g.answer(
        &permission["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let seen = until_answered(&mut g, &[ask_streaming, ask_writing]);
    let reason = |id: i64| {
        seen.iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .map(|m| m["result"]["stopReason"].clone())
    };
    assert_eq!(reason(ask_streaming), Some(json!("cancelled")));
    assert_eq!(reason(ask_writing), Some(json!("end_turn")));
    assert_eq!(
        std::fs::read_to_string(g.project.join("a.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn session_list_shows_live_sessions_without_a_file() {
    let mut g = acp(json!({"turns": []}));
    g.initialize(json!({}));
    let a = g.new_session();
    let b = g.new_session();
    let list = g.request("session/list", json!({}));
    let listed = g.result(list);
    let sessions = listed["sessions"].as_array().unwrap();
    for live in [&a, &b] {
        let shown = sessions.iter().find(|s| s["sessionId"] == *live);
        let shown = shown.unwrap_or_else(|| panic!("{live} not listed: {listed}"));
        assert_eq!(shown["cwd"], json!(g.project), "{shown}");
    }
}

#[test]
fn each_session_keeps_its_own_folder_and_project_context() {
    use crate::support::fake_provider::{openai_text, FakeProvider, Reply};
    let fake = FakeProvider::start();
    for _ in 0..2 {
        fake.push(Reply::sse(openai_text(&["Done."])));
    }
    let home = tempfile::tempdir().unwrap();
    let agent = home.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    crate::support::gjc::write_models_json(&agent, &fake.base_url);
    let other = home.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("AGENTS.md"),
        "Only the other project: MARKER-OTHER.\n",
    )
    .unwrap();
    let other = other.canonicalize().unwrap();
    let mut g = spawn_with(home, &["--provider", "fake-openai", "--model", "m"]);
    g.initialize(json!({}));
    let here = g.new_session();
    let id = g.request("session/new", json!({"cwd": other, "mcpServers": []}));
    let there = g.result(id)["sessionId"].as_str().unwrap().to_string();
    let system_prompt = |g: &mut Acp, session: &str| {
        let ask = g.prompt(session, "hi");
        let request = fake.request(std::time::Duration::from_secs(10));
        assert_eq!(g.stop_reason(ask).0, "end_turn");
        request.body.to_string()
    };
    let seen_here = system_prompt(&mut g, &here);
    let seen_there = system_prompt(&mut g, &there);
    assert!(!seen_here.contains("MARKER-OTHER"), "{seen_here}");
    assert!(seen_there.contains("MARKER-OTHER"), "{seen_there}");
    assert!(
        seen_there.contains(&*other.to_string_lossy()),
        "{seen_there}"
    );
    assert!(
        !seen_here.contains(&*other.to_string_lossy()),
        "{seen_here}"
    );
}
