//! The client contract: the checker itself rejects what the published client rejects, and runs
//! driven the way that client drives gjc end with exactly one `agent_end` each, every frame on
//! the way passing the checker (which every `Gjc` applies to everything it reads).

use serde_json::{json, Value};

use crate::support::contract::Contract;
use crate::support::{gjc, types, Gjc};

fn violations(frames: &[Value]) -> Vec<String> {
    let c = Contract::default();
    for f in frames {
        c.check(&f.to_string());
    }
    c.violations()
}

fn event(inner: Value) -> Value {
    json!({"type": "event", "protocol_version": 2, "session_id": "s", "seq": 1, "frame_id": "f",
        "payload": {"event_type": inner["type"], "event": inner}})
}

#[test]
fn the_checker_rejects_what_the_client_rejects() {
    let assistant = json!({"role": "assistant", "content": []});
    let bad = [
        // Values the client's enums refuse.
        vec![
            event(json!({"type": "agent_start"})),
            event(json!({"type": "agent_end", "messages": [], "stopReason": "cancelled"})),
        ],
        // A delta without its partial snapshot.
        vec![
            event(json!({"type": "message_start", "message": assistant})),
            event(json!({"type": "message_update", "message": assistant,
                "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x"}})),
        ],
        // Tool results without their role.
        vec![event(
            json!({"type": "turn_end", "message": assistant, "toolResults": [{"toolCallId": "c"}]}),
        )],
        // An error object, and data that is not an object.
        vec![json!({"type": "response", "command": "x", "success": false, "error": {"code": "c"}})],
        vec![json!({"type": "response", "command": "x", "success": true, "data": [1]})],
        // A float timeout in a UI request.
        vec![
            json!({"type": "extension_ui_request", "id": "u", "method": "select", "timeout": 1.5}),
        ],
        // A model without its base URL.
        vec![
            json!({"type": "response", "command": "set_model", "success": true,
            "data": {"id": "m", "name": "m", "api": "a", "provider": "p"}}),
        ],
        // Todo notes as a list.
        vec![
            json!({"type": "response", "command": "set_todos", "success": true,
            "data": {"todoPhases": [{"name": "p", "tasks": [{"content": "c", "notes": ["n"]}]}]}}),
        ],
        // A message_end nobody started.
        vec![event(json!({"type": "message_end", "message": assistant}))],
        // Log text on stdout.
        vec![json!("starting up")],
    ];
    for frames in bad {
        assert!(!violations(&frames).is_empty(), "accepted: {frames:?}");
    }
    let good = vec![
        event(json!({"type": "agent_start"})),
        event(json!({"type": "message_start", "message": assistant})),
        event(json!({"type": "message_update", "message": assistant,
            "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x",
                "partial": assistant}})),
        event(json!({"type": "message_end", "message": assistant})),
        event(
            json!({"type": "agent_end", "messages": [assistant], "stopReason": "completed",
            "outcome": "aborted"}),
        ),
    ];
    assert_eq!(violations(&good), Vec::<String>::new());
}

fn one_run(g: &mut Gjc, command: Value) -> Vec<Value> {
    g.ok(command);
    let events = g.run_events();
    let ends = types(&events).iter().filter(|t| *t == "agent_end").count();
    assert_eq!(ends, 1, "{:?}", types(&events));
    events
}

fn last_agent_end(events: &[Value]) -> &Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "agent_end")
        .unwrap()
}

#[test]
fn a_streamed_turn_with_thinking_text_and_a_tool_loop() {
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [
                {"type": "thinking", "thinking": "Let me list the folder first."},
                {"type": "text", "text": "Listing."},
                {"type": "toolCall", "name": "bash", "arguments": {"command": "echo hi"}}],
             "chunkChars": 4},
            {"content": [{"type": "text", "text": "It printed hi."}]}
        ]}))
        .spawn();
    let events = one_run(&mut g, json!({"type": "prompt", "message": "go"}));
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "message_update")
        .map(|e| e["assistantMessageEvent"]["type"].as_str().unwrap())
        .collect();
    for kind in [
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let turn_end = events.iter().find(|e| e["type"] == "turn_end").unwrap();
    assert_eq!(turn_end["toolResults"][0]["role"], "toolResult");
    let end = last_agent_end(&events);
    assert_eq!(end["stopReason"], "completed");
    assert_eq!(end["outcome"], "completed");
    let last = end["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["content"][0]["text"], "It printed hi.");
}

#[test]
fn abort_mid_stream_and_abort_and_prompt_each_end_their_run_once() {
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [{"type": "text", "text": "never finishes"}], "stall": true},
            {"content": [{"type": "text", "text": "also stalls"}], "stall": true},
            {"content": [{"type": "text", "text": "done"}]}
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "one"}));
    g.event("message_update");
    g.ok(json!({"type": "abort"}));
    let events = g.run_events();
    assert_eq!(last_agent_end(&events)["outcome"], "aborted");
    g.ok(json!({"type": "prompt", "message": "two"}));
    g.event("message_update");
    let events = one_run(
        &mut g,
        json!({"type": "abort_and_prompt", "message": "three"}),
    );
    assert_eq!(last_agent_end(&events)["outcome"], "aborted");
    let events = g.run_events();
    assert_eq!(last_agent_end(&events)["outcome"], "completed");
}

#[test]
fn a_provider_error_ends_the_run_with_its_message() {
    let mut g = gjc()
        .script(json!({"turns": [{"stopReason": "error", "errorMessage": "model exploded"}]}))
        .spawn();
    let events = one_run(&mut g, json!({"type": "prompt", "message": "go"}));
    let end = last_agent_end(&events);
    assert_eq!(end["stopReason"], "completed");
    assert_eq!(end["outcome"], "error");
    assert_eq!(end["errorMessage"], "model exploded");
}

#[test]
fn session_commands_answer_in_the_client_shapes() {
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [{"type": "text", "text": "first answer"}]}
        ]}))
        .spawn();
    one_run(&mut g, json!({"type": "prompt", "message": "hello"}));
    let state = g.ok(json!({"type": "get_state"}));
    let file = state["sessionFile"].as_str().unwrap().to_string();
    assert!(state["model"]["baseUrl"].is_string());
    let model = g.ok(json!({"type": "set_model", "provider": "scripted", "modelId": "scripted"}));
    assert_eq!(model["id"], "scripted", "the model object itself");
    assert!(g.ok(json!({"type": "cycle_model"}))["model"].is_object());
    let exported = g.ok(json!({"type": "export_html"}));
    assert!(exported["path"].as_str().unwrap().ends_with(".html"));
    let branches = g.ok(json!({"type": "get_branch_messages"}));
    let entry = branches["messages"][0]["entryId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        g.ok(json!({"type": "new_session"})),
        json!({"cancelled": false})
    );
    g.ok(json!({"type": "switch_session", "sessionPath": file}));
    let branched = g.ok(json!({"type": "branch", "entryId": entry}));
    assert_eq!(branched["text"], "hello");
    let stats = g.ok(json!({"type": "get_session_stats"}));
    assert!(stats["tokens"].is_object());
    let todos = g.ok(json!({"type": "set_todos", "phases": [{"id": null, "name": "Plan",
        "tasks": [{"content": "a", "notes": null, "details": null}, {"content": "b", "notes": "why"}]}]}));
    assert_eq!(todos["todoPhases"][0]["tasks"][1]["notes"], "why");
    let providers = g.ok(json!({"type": "get_login_providers"}));
    assert!(providers["providers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["id"] == "scripted" && p["authenticated"] == true));
}

#[test]
fn the_registry_lists_a_running_gjc_until_it_exits() {
    let mut g = gjc().args(&["--provider", "scripted"]).spawn();
    let state = g.ok(json!({"type": "get_state"}));
    let dir = g.home.path().join("agent/rpc-sessions");
    let path = dir.join(format!("{}.json", state["sessionId"].as_str().unwrap()));
    let record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(record["pid"], g.client.pid());
    assert_eq!(record["transport"], "stdio");
    assert_eq!(record["model"], "scripted/scripted");
    assert!(record["startedAt"].as_str().unwrap().ends_with('Z'));
    let first = g.ok(json!({"type": "get_state"}))["sessionId"].clone();
    g.ok(json!({"type": "new_session"}));
    let second = g.ok(json!({"type": "get_state"}))["sessionId"].clone();
    assert_ne!(first, second);
    assert!(!path.exists(), "the old session's record is replaced");
    assert!(dir
        .join(format!("{}.json", second.as_str().unwrap()))
        .exists());
    assert!(g.close_and_wait().is_some());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "removed at exit"
    );
}
