//! `new_session`, `switch_session` and `branch` replace the session's actor: nothing of the old
//! session (its run, its user `bash`, its host callbacks, its todos, its unattended declaration)
//! shows after the answer, what the host set for the connection stays, and a refused swap
//! leaves the old session going as it was.

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

fn echo_tool() -> Value {
    json!({"name": "echo_host", "label": "Echo Host", "description": "Echo a value from the host",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}})
}

fn todos() -> Value {
    json!({"type": "set_todos", "phases": [{"id": "phase-1", "name": "Old work", "tasks": [
        {"id": "task-1", "content": "left from before", "status": "in_progress"}]}]})
}

fn unattended(scopes: Value, allow: Value) -> Value {
    json!({"type": "negotiate_unattended", "declaration": {"actor": "ci", "scopes": scopes, "action_allowlist": allow,
        "budget": {"max_tokens": 1e9, "max_tool_calls": 100, "max_wall_time_ms": 600000, "max_cost_usd": 100}}})
}

/// Sends `command` with `id` and returns every frame up to and including its response.
fn until_answer(g: &mut Gjc, id: &str, mut command: Value) -> Vec<Value> {
    command["id"] = json!(id);
    g.client.send(&command).unwrap();
    g.client
        .collect_until(|f| f["type"] == "response" && f["id"] == id, TIMEOUT)
        .expect("the response")
}

/// The frames after everything so far: a `get_state` is sent and every frame up to its answer
/// returned (the session handles commands in order, so whatever the old session still had to
/// say would come before it).
fn frames_until_state(g: &mut Gjc) -> (Vec<Value>, Value) {
    let mut frames = until_answer(g, "sync", json!({"type": "get_state"}));
    let state = frames.pop().unwrap();
    assert_eq!(state["success"], true, "{state}");
    (frames, state["data"].clone())
}

fn events_of(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| {
            f["payload"]["event_type"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        })
        .collect()
}

/// A user `bash` still running belongs to the old session: it is answered (cancelled) before
/// the new session's answer, and its output is not recorded in the new session.
#[test]
fn a_running_user_bash_ends_with_the_old_session() {
    let mut g = gjc().spawn();
    g.client
        .send(&json!({"id": "b1", "type": "bash", "command": "echo started; sleep 30"}))
        .unwrap();
    let frames = until_answer(&mut g, "n1", json!({"type": "new_session"}));
    let answer = frames.last().unwrap();
    assert_eq!(answer["success"], true, "{answer}");
    let bash = frames
        .iter()
        .find(|f| f["type"] == "response" && f["id"] == "b1")
        .unwrap_or_else(|| panic!("the bash was not answered before the swap: {frames:?}"));
    assert_eq!(bash["success"], false, "{bash}");
    assert!(
        bash["error"].as_str().unwrap().contains("cancelled"),
        "{bash}"
    );
    let (after, state) = frames_until_state(&mut g);
    assert!(after.is_empty(), "frames of the old session: {after:?}");
    assert_eq!(state["messageCount"], 0, "{state}");
    assert!(g.messages().is_empty());
}

/// A run waiting on a host tool call ends before the answer; the call's late result reaches
/// nobody, and no frame of the old run follows the answer.
#[test]
fn a_new_session_while_a_host_tool_call_is_pending() {
    let turns = json!([
        {"content": [{"type": "toolCall", "id": "tc1", "name": "echo_host", "arguments": {"message": "hi"}}]},
        {"content": [{"type": "text", "text": "done"}]}
    ]);
    let mut g = gjc().script(json!({ "turns": turns })).spawn();
    g.ok(json!({"type": "set_host_tools", "tools": [echo_tool()]}));
    g.ok(json!({"type": "prompt", "message": "use it"}));
    let call = g
        .client
        .wait_for(|f| f["type"] == "host_tool_call", TIMEOUT)
        .expect("the host tool call");
    let frames = until_answer(&mut g, "n1", json!({"type": "new_session"}));
    assert_eq!(frames.last().unwrap()["success"], true);
    let events = events_of(&frames);
    assert!(
        events.iter().any(|e| e == "agent_end"),
        "the run ends before the answer: {events:?}"
    );
    // The old call's result comes too late: it must not start or feed anything.
    let result = json!({"type": "host_tool_result", "id": call["id"], "result": {"content": [{"type": "text", "text": "late"}]}});
    g.client.send(&result).unwrap();
    let (after, state) = frames_until_state(&mut g);
    assert!(after.is_empty(), "frames after the answer: {after:?}");
    assert_eq!(state["isStreaming"], false);
    assert_eq!(state["messageCount"], 0, "{state}");
    // The host's tools stay for the connection, and a new run can use them.
    assert_has_tool(&mut g, "echo_host");
}

/// The unattended declaration is the session's: the new session starts without one.
#[test]
fn the_unattended_declaration_stays_with_the_old_session() {
    let mut g = gjc().spawn();
    g.ok(unattended(
        json!(["session", "message:read", "control"]),
        json!(["command.session", "command.message_read", "command.control"]),
    ));
    g.ok(todos());
    let before = g.ok(json!({"type": "get_state"}));
    assert!(before.get("unattended").is_some(), "{before}");
    g.ok(json!({"type": "new_session"}));
    let after = g.ok(json!({"type": "get_state"}));
    assert!(after.get("unattended").is_none(), "leaked: {after}");
    assert_eq!(after["todoPhases"], json!([]), "{after}");
    assert_ne!(after["sessionId"], before["sessionId"]);
}

/// A `new_session` the unattended declaration refuses, or one with a bad folder, leaves the old
/// session as it was: same id, todos, declaration, and it goes on answering.
#[test]
fn a_refused_new_session_leaves_the_old_one_going() {
    let mut g = gjc().spawn();
    g.ok(todos());
    let missing = g.project.join("missing");
    let r = g.request(json!({"type": "new_session", "cwd": missing}));
    assert_eq!(r["success"], false, "{r}");
    g.ok(unattended(
        json!(["message:read", "control"]),
        json!(["command.message_read", "command.control"]),
    ));
    let before = g.ok(json!({"type": "get_state"}));
    let r = g.request(json!({"type": "new_session"}));
    assert_eq!(r["success"], false, "{r}");
    let after = g.ok(json!({"type": "get_state"}));
    assert_eq!(after["sessionId"], before["sessionId"]);
    assert_eq!(after["todoPhases"], before["todoPhases"]);
    assert!(after["todoPhases"][0]["tasks"][0]["content"] == "left from before");
    assert_eq!(
        after["unattended"]["run_id"],
        before["unattended"]["run_id"]
    );
}

/// A `switch_session` to a file that is not there changes nothing; one to a real file gives that
/// session, with what the host set for the connection and none of the old session's todos.
#[test]
fn switch_session_fails_untouched_or_swaps_keeping_the_hosts_settings() {
    let turns = json!([{"content": [{"type": "text", "text": "a1"}]}]);
    let mut g = gjc().script(json!({ "turns": turns })).spawn();
    g.ok(json!({"type": "set_session_name", "name": "first"}));
    g.ok(json!({"type": "prompt", "message": "q1"}));
    g.run_events();
    let first = g.ok(json!({"type": "get_state"}));
    let first_file = first["sessionFile"].as_str().unwrap().to_string();
    g.ok(json!({"type": "new_session"}));
    g.ok(todos());
    g.ok(json!({"type": "set_thinking_level", "level": "high"}));
    g.ok(json!({"type": "set_steering_mode", "mode": "all"}));
    g.ok(json!({"type": "set_host_tools", "tools": [echo_tool()]}));
    let second = g.ok(json!({"type": "get_state"}));
    let bad = g.project.join("nowhere.jsonl");
    let r = g.request(json!({"type": "switch_session", "sessionPath": bad}));
    assert_eq!(r["success"], false, "{r}");
    let same = g.ok(json!({"type": "get_state"}));
    assert_eq!(same, second, "a failed switch changed the session");
    // Pipelined: the commands behind the switch are the new session's.
    g.client
        .send(&json!({"id": "s1", "type": "switch_session", "sessionPath": first_file}))
        .unwrap();
    let (frames, state) = frames_until_state(&mut g);
    let answer = frames
        .iter()
        .find(|f| f["id"] == "s1")
        .expect("the switch's answer");
    assert_eq!(answer["success"], true, "{answer}");
    assert_eq!(state["sessionId"], first["sessionId"]);
    assert_eq!(state["sessionName"], "first");
    assert_eq!(state["messageCount"], 2, "{state}");
    assert_eq!(state["todoPhases"], json!([]), "leaked: {state}");
    // The loaded file names its thinking level; the host's queue mode and tools stay.
    assert_eq!(state["thinkingLevel"], "off");
    assert_eq!(state["steeringMode"], "all");
    assert_has_tool(&mut g, "echo_host");
}

/// Commands queued behind a `new_session` when stdin closes are answered by the new session.
#[test]
fn commands_queued_behind_a_swap_at_stdin_eof_are_answered() {
    let mut g = gjc().spawn();
    g.ok(todos());
    let old = g.ok(json!({"type": "get_state"}))["sessionId"].clone();
    for (id, kind) in [("n1", "new_session"), ("g1", "get_state")] {
        g.client.send(&json!({"id": id, "type": kind})).unwrap();
    }
    g.client.close_stdin();
    let frames = g
        .client
        .collect_until(|f| f["type"] == "response" && f["id"] == "g1", TIMEOUT)
        .expect("both answers");
    let state = frames.last().unwrap();
    assert_ne!(state["data"]["sessionId"], old);
    assert_eq!(state["data"]["todoPhases"], json!([]));
    assert!(g.client.wait_exit(TIMEOUT).is_some(), "gjc exits");
}

/// A manual `handoff` replaces the actor too: the new session starts with the document only,
/// without the old session's unattended declaration.
#[test]
fn a_manual_handoff_starts_a_session_of_its_own() {
    let say = |text: &str| json!({"content": [{"type": "text", "text": text}]});
    let turns = json!([say("a1"), say("## Goal\nShip it.")]);
    let mut g = gjc().script(json!({ "turns": turns })).spawn();
    g.ok(json!({"type": "prompt", "message": "q1"}));
    g.run_events();
    g.ok(unattended(
        json!(["admin", "message:read", "control"]),
        json!(["command.admin", "command.message_read", "command.control"]),
    ));
    let before = g.ok(json!({"type": "get_state"}));
    assert!(before.get("unattended").is_some(), "{before}");
    let saved = g.ok(json!({"type": "handoff"}))["savedPath"].clone();
    assert!(saved.is_string(), "{saved}");
    // What came before the answer (the status while the document was written) is done with.
    g.client.take_backlog();
    let (after, state) = frames_until_state(&mut g);
    assert!(after.is_empty(), "frames after the answer: {after:?}");
    assert_ne!(state["sessionId"], before["sessionId"]);
    assert!(state.get("unattended").is_none(), "leaked: {state}");
    assert_eq!(state["messageCount"], 1, "only the document: {state}");
}

/// `get_state`'s tool dump names `name`.
fn assert_has_tool(g: &mut Gjc, name: &str) {
    let tools = g.ok(json!({"type": "get_state", "include": ["tools"]}))["dumpTools"].clone();
    assert!(
        tools.as_array().unwrap().iter().any(|t| t["name"] == name),
        "{tools}"
    );
}
