//! Host sub-protocols: host tools, host-owned URIs, extension UI and the ask tool, including
//! aborts, unknown ids, invalid schemas and arguments, streaming updates, and stdin closing while
//! a host call is pending.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{gjc, types, Gjc, TIMEOUT};

fn echo_tool() -> Value {
    json!({"name": "echo_host", "label": "Echo Host", "description": "Echo a value from the host",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false}})
}

fn with_turns(turns: Value, extra: &[&str]) -> Gjc {
    gjc().script(json!({ "turns": turns })).args(extra).spawn()
}

fn call_turn(name: &str, args: Value) -> Value {
    json!({"content": [{"type": "toolCall", "id": "tc1", "name": name, "arguments": args}]})
}

fn final_turn() -> Value {
    json!({"content": [{"type": "text", "text": "thanks"}]})
}

fn frame(g: &mut Gjc, kind: &str) -> Value {
    g.client
        .wait_for(|f| f["type"] == kind, TIMEOUT)
        .unwrap_or_else(|e| panic!("no {kind} frame: {e}"))
}

#[test]
fn set_host_tools_validates_and_replaces() {
    let mut g = gjc().spawn();
    let d = g.ok(json!({"type": "set_host_tools", "tools": [echo_tool()]}));
    assert_eq!(d, json!({"toolNames": ["echo_host"]}));
    let s = g.ok(json!({"type": "get_state", "include": ["tools"]}));
    assert!(s["dumpTools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "echo_host"));
    let bad = json!({"name": "bad_schema", "description": "x", "parameters": {"type": "object", "properties": {"a": {"type": 12}}}});
    let r = g.request(json!({"type": "set_host_tools", "tools": [bad]}));
    assert_eq!(r["success"], false);
    assert!(r["error"].as_str().unwrap().contains("bad_schema"), "{r}");
    let clash = json!({"name": "read", "description": "x", "parameters": {"type": "object"}});
    let r = g.request(json!({"type": "set_host_tools", "tools": [clash]}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("clashes with a built-in"),
        "{r}"
    );
    let r = g.request(json!({"type": "set_host_tools", "tools": [echo_tool(), echo_tool()]}));
    assert!(r["error"].as_str().unwrap().contains("duplicate"), "{r}");
    g.ok(json!({"type": "set_host_tools", "tools": []}));
    let s = g.ok(json!({"type": "get_state", "include": ["tools"]}));
    assert!(
        !s["dumpTools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo_host"),
        "re-sending replaces the set"
    );
}

#[test]
fn host_tool_round_trip_with_updates() {
    let mut g = with_turns(
        json!([
            call_turn("echo_host", json!({"message": "hello"})),
            final_turn()
        ]),
        &[],
    );
    g.ok(json!({"type": "set_host_tools", "tools": [echo_tool()]}));
    g.ok(json!({"type": "prompt", "message": "use it"}));
    let call = frame(&mut g, "host_tool_call");
    assert_eq!(call["toolCallId"], "tc1");
    assert_eq!(call["toolName"], "echo_host");
    assert_eq!(call["arguments"], json!({"message": "hello"}));
    let id = call["id"].clone();
    for i in 0..1000 {
        g.client.send(&json!({"type": "host_tool_update", "id": id, "partialResult": {"content": [{"type": "text", "text": format!("working {i}")}]}})).unwrap();
    }
    g.client.send(&json!({"type": "host_tool_result", "id": id, "result": {"content": [{"type": "text", "text": "echo: hello"}]}})).unwrap();
    let events = g.run_events();
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update")
        .collect();
    assert_eq!(updates.len(), 1000);
    assert_eq!(
        updates[999]["partialResult"]["content"][0]["text"],
        "working 999"
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["result"]["content"][0]["text"], "echo: hello");
    assert_eq!(end["isError"], false);
    // A late or duplicate result for a finished call is ignored.
    g.client
        .send(&json!({"type": "host_tool_result", "id": id, "result": {"content": []}}))
        .unwrap();
    g.client
        .send(&json!({"type": "host_tool_result", "id": "nobody", "result": {"content": []}}))
        .unwrap();
    g.ok(json!({"type": "get_state"}));
}

#[test]
fn host_tool_error_results_and_invalid_arguments() {
    let mut g = with_turns(
        json!([
            call_turn("echo_host", json!({"message": 5})),
            call_turn("echo_host", json!({"message": "x"})),
            final_turn()
        ]),
        &[],
    );
    g.ok(json!({"type": "set_host_tools", "tools": [echo_tool()]}));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let end = g.event("tool_execution_end");
    assert!(end["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Invalid arguments for tool echo_host"));
    let call = frame(&mut g, "host_tool_call");
    assert_eq!(
        call["arguments"],
        json!({"message": "x"}),
        "the invalid call never reached the host"
    );
    g.client.send(&json!({"type": "host_tool_result", "id": call["id"], "isError": true, "result": {"content": [{"type": "text", "text": "no such row"}]}})).unwrap();
    let end = g.event("tool_execution_end");
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["content"][0]["text"], "no such row");
    g.event("agent_end");
}

#[test]
fn abort_while_the_host_works_sends_a_cancel() {
    let mut g = with_turns(
        json!([call_turn("echo_host", json!({"message": "slow"}))]),
        &[],
    );
    g.ok(json!({"type": "set_host_tools", "tools": [echo_tool()]}));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let call = frame(&mut g, "host_tool_call");
    g.ok(json!({"type": "abort"}));
    let cancel = frame(&mut g, "host_tool_cancel");
    assert_eq!(cancel["targetId"], call["id"]);
    let events = g.run_events();
    assert_eq!(
        events.iter().filter(|e| e["type"] == "agent_end").count(),
        1
    );
    g.client
        .send(&json!({"type": "host_tool_result", "id": call["id"], "result": {"content": []}}))
        .unwrap();
    g.ok(json!({"type": "get_state"}));
}

#[test]
fn stdin_closing_with_a_pending_host_call_exits_zero() {
    let mut g = with_turns(
        json!([call_turn("echo_host", json!({"message": "x"}))]),
        &[],
    );
    g.ok(json!({"type": "set_host_tools", "tools": [echo_tool()]}));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let call = frame(&mut g, "host_tool_call");
    // A user `bash` in flight at EOF is answered too.
    let bash_id = g.client.next_id();
    g.client
        .send(&json!({"id": bash_id, "type": "bash", "command": "sleep 30"}))
        .unwrap();
    let status = g.close_and_wait().expect("gjc exited");
    assert!(status.success(), "{status:?}");
    let rest: Vec<Value> = g
        .client
        .take_backlog()
        .into_iter()
        .map(|f| f.value)
        .collect();
    let mut rest = rest.into_iter();
    let mut seen = Vec::new();
    while let Ok(f) = g.client.recv(Duration::from_millis(200)) {
        seen.push(f.value);
    }
    let frames: Vec<Value> = rest.by_ref().chain(seen).collect();
    assert!(
        frames
            .iter()
            .any(|f| f["type"] == "host_tool_cancel" && f["targetId"] == call["id"]),
        "the host is told to stop: {frames:?}"
    );
    let bash = frames
        .iter()
        .find(|f| f["type"] == "response" && f["id"] == bash_id.as_str())
        .expect("the pending bash is answered");
    assert_eq!(bash["success"], false);
    assert!(bash["error"].as_str().unwrap().starts_with("cancelled: "));
}

#[test]
fn host_uris_read_write_and_refusals() {
    let turns = json!([
        {"content": [
            {"type": "toolCall", "id": "r", "name": "read", "arguments": {"path": "db://users/42"}},
            {"type": "toolCall", "id": "w", "name": "write", "arguments": {"path": "db://users/42", "content": "name=Bob\n"}},
            {"type": "toolCall", "id": "ro", "name": "write", "arguments": {"path": "ro://x", "content": "y"}},
            {"type": "toolCall", "id": "e", "name": "edit", "arguments": {"path": "db://users/42", "edits": [{"oldText": "a", "newText": "b"}]}}
        ]},
        final_turn()
    ]);
    let mut g = with_turns(turns, &[]);
    let d = g.ok(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "DB", "description": "rows", "writable": true}, {"scheme": "ro"}]}));
    assert_eq!(d, json!({"schemes": ["db", "ro"]}));
    let r = g.request(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "9x"}]}));
    assert_eq!(r["success"], false);
    g.ok(json!({"type": "prompt", "message": "go"}));
    let read = frame(&mut g, "host_uri_request");
    assert_eq!(
        (read["operation"].as_str(), read["url"].as_str()),
        (Some("read"), Some("db://users/42"))
    );
    g.client.send(&json!({"type": "host_uri_result", "id": read["id"], "content": "id=42\nname=Alice\n", "contentType": "text/plain", "notes": ["fresh"]})).unwrap();
    let write = frame(&mut g, "host_uri_request");
    assert_eq!(write["operation"], "write");
    assert_eq!(write["content"], "name=Bob\n");
    g.client
        .send(&json!({"type": "host_uri_result", "id": write["id"]}))
        .unwrap();
    let events = g.run_events();
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert!(ends[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("id=42\nname=Alice\n"));
    assert_eq!(
        ends[1]["result"]["content"][0]["text"],
        "Successfully wrote 9 bytes to db://users/42"
    );
    assert!(ends[2]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("read-only"));
    assert!(ends[3]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("use the write tool"));
    assert!(
        g.client
            .take_backlog()
            .iter()
            .all(|f| f.value["type"] != "host_uri_request"),
        "refusals never reach the host"
    );
}

#[test]
fn host_uri_errors_surface_to_the_model() {
    let mut g = with_turns(
        json!([
            call_turn("read", json!({"path": "db://users/7"})),
            final_turn()
        ]),
        &[],
    );
    g.ok(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "db"}]}));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let req = frame(&mut g, "host_uri_request");
    g.client.send(&json!({"type": "host_uri_result", "id": req["id"], "isError": true, "error": "row 7 not found"})).unwrap();
    let end = g.event("tool_execution_end");
    assert_eq!(end["isError"], true);
    assert!(end["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("row 7 not found"));
}

#[test]
fn ask_tool_uses_select_and_input_dialogs() {
    let ask = json!({"questions": [
        {"id": "db", "question": "Which database?", "options": [{"label": "sqlite"}, {"label": "postgres"}]},
        {"id": "name", "question": "Project name?"},
        {"id": "skip", "question": "Anything else?"}
    ]});
    let mut g = with_turns(
        json!([call_turn("ask", ask), final_turn()]),
        &["--tools", "read,ask"],
    );
    g.ok(json!({"type": "prompt", "message": "set up"}));
    let select = frame(&mut g, "extension_ui_request");
    assert_eq!(select["method"], "select");
    assert_eq!(select["title"], "Which database?");
    assert_eq!(select["options"], json!(["sqlite", "postgres"]));
    g.client
        .send(&json!({"type": "extension_ui_response", "id": "unknown", "value": "ignored"}))
        .unwrap();
    g.client
        .send(&json!({"type": "extension_ui_response", "id": select["id"], "value": "postgres"}))
        .unwrap();
    let input = frame(&mut g, "extension_ui_request");
    assert_eq!(input["method"], "input");
    g.client
        .send(&json!({"type": "extension_ui_response", "id": input["id"], "value": "rocket"}))
        .unwrap();
    let third = frame(&mut g, "extension_ui_request");
    g.client
        .send(&json!({"type": "extension_ui_response", "id": third["id"], "cancelled": true}))
        .unwrap();
    let end = g.event("tool_execution_end");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Which database?\nAnswer: postgres")
            && text.contains("Answer: rocket")
            && text.contains("dismissed"),
        "{text}"
    );
    assert_eq!(
        end["result"]["details"]["answers"][0],
        json!({"id": "db", "question": "Which database?", "answer": "postgres"})
    );
    g.event("agent_end");
}

#[test]
fn retry_sets_a_status_for_the_host() {
    let mut g = with_turns(
        json!([{"stopReason": "error", "errorMessage": "overloaded", "transient": true}, final_turn()]),
        &[],
    );
    let _ = Duration::ZERO;
    g.ok(json!({"type": "prompt", "message": "go"}));
    let status = frame(&mut g, "extension_ui_request");
    assert_eq!(status["method"], "setStatus");
    assert!(status["statusText"]
        .as_str()
        .unwrap()
        .starts_with("Retrying (attempt 1 of 3)"));
    // Once the retry has succeeded, the status is cleared: the same key without a text.
    let cleared = frame(&mut g, "extension_ui_request");
    assert_eq!(cleared["method"], "setStatus");
    assert_eq!(cleared["statusKey"], "gjc.retry");
    assert!(cleared.get("statusText").is_none(), "{cleared}");
    let events = g.run_events();
    assert_eq!(types(&events).last().unwrap(), "agent_end");
}

#[test]
fn confirm_editor_widget_and_editor_text_requests() {
    let ask = json!({"questions": [
        {"question": "Delete the branch?", "confirm": true},
        {"question": "Write the release notes", "multiline": true, "prefill": "## Changes"}
    ]});
    let mut g = with_turns(
        json!([call_turn("ask", ask), final_turn()]),
        &["--tools", "ask"],
    );
    g.ok(json!({"type": "set_todos", "phases": [{"name": "Ship", "tasks": [{"content": "Tag", "status": "completed"}]}]}));
    let widget = frame(&mut g, "extension_ui_request");
    assert_eq!(widget["method"], "setWidget");
    assert_eq!(widget["widgetLines"], json!(["Ship", "  [x] Tag"]));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let confirm = frame(&mut g, "extension_ui_request");
    assert_eq!(
        (confirm["method"].as_str(), confirm["message"].as_str()),
        (Some("confirm"), Some("Delete the branch?"))
    );
    g.client
        .send(&json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": false}))
        .unwrap();
    let editor = frame(&mut g, "extension_ui_request");
    assert_eq!(
        (editor["method"].as_str(), editor["prefill"].as_str()),
        (Some("editor"), Some("## Changes"))
    );
    g.client.send(&json!({"type": "extension_ui_response", "id": editor["id"], "value": "## Changes\n- faster"})).unwrap();
    let end = g.event("tool_execution_end");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Answer: false") && text.contains("- faster"),
        "{text}"
    );
    g.event("agent_end");
    let cleared = frame(&mut g, "extension_ui_request");
    assert_eq!(
        (cleared["method"].as_str(), &cleared["widgetLines"]),
        (Some("setWidget"), &json!([])),
        "a list with every task done is cleared when the run ends"
    );
    let branches = g.ok(json!({"type": "get_branch_messages"}));
    let entry = branches["messages"][0]["entryId"].clone();
    g.ok(json!({"type": "branch", "entryId": entry}));
    let set_text = frame(&mut g, "extension_ui_request");
    assert_eq!(
        (set_text["method"].as_str(), set_text["text"].as_str()),
        (Some("set_editor_text"), Some("go"))
    );
}

#[test]
fn abort_during_a_host_uri_read_sends_a_cancel() {
    let mut g = with_turns(
        json!([call_turn("read", json!({"path": "db://slow/1"}))]),
        &[],
    );
    g.ok(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "db"}]}));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let req = frame(&mut g, "host_uri_request");
    g.ok(json!({"type": "abort"}));
    let cancel = frame(&mut g, "host_uri_cancel");
    assert_eq!(cancel["targetId"], req["id"]);
    assert!(cancel["id"].as_str().unwrap().starts_with("uri_cancel_"));
    g.event("agent_end");
}

#[test]
fn set_title_is_emitted_only_when_asked_for() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "set_session_name", "name": "quiet"}));
    assert!(g
        .client
        .take_backlog()
        .iter()
        .all(|f| f.value["method"] != "setTitle"));
    let mut g = gjc().env("GJC_RPC_EMIT_TITLE", "1").spawn();
    g.ok(json!({"type": "set_session_name", "name": "loud"}));
    let title = frame(&mut g, "extension_ui_request");
    assert_eq!(
        (title["method"].as_str(), title["title"].as_str()),
        (Some("setTitle"), Some("loud"))
    );
}
