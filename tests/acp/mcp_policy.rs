//! An MCP tool in an editor's session is asked for like a command: a permission request before
//! the call, the server reached only when the user allows it, and plan mode refusing it without
//! asking. The server records each call it gets (misbehaving.js, `MCP_CALL_LOG`), so what reached
//! it is read from the server's side.

use serde_json::{json, Value};

use super::{acp, first_text, node, updates, Acp};

/// The calls that reached the server, one tool name a line.
fn reached(log: &std::path::Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// Prompts and answers the permission request for `call_id` with `option`.
fn prompt_and_answer(g: &mut Acp, session: &str, call_id: &str, option: &str) -> Vec<Value> {
    let id = g.prompt(session, "call it");
    let before = g.until(|m| m["method"] == "session/request_permission");
    let ask = before.last().unwrap().clone();
    assert_eq!(ask["params"]["toolCall"]["toolCallId"], call_id, "{ask}");
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": option}}),
    );
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    updates(&after)
}

#[test]
fn an_mcp_tool_asks_permission_like_a_command_and_plan_mode_refuses_it() {
    let call = |id: &str| json!({"content": [{"type": "toolCall", "name": "mcp__bad__ok", "id": id, "arguments": {}}]});
    let say = json!({"content": [{"type": "text", "text": "ok"}]});
    let mut g = acp(json!({"turns": [call("c1"), say, call("c2"), say, call("c3"), say]}));
    g.initialize(json!({}));
    let log = g.home.path().join("calls.log");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/misbehaving.js");
    let id = g.request(
        "session/new",
        json!({"cwd": g.project, "mcpServers": [{
            "name": "bad", "command": node(), "args": [script],
            "env": [{"name": "MCP_CALL_LOG", "value": log}],
        }]}),
    );
    let (created, _) = g.response(id);
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();

    // Refused: the call fails as denied and never reaches the server.
    let ups = prompt_and_answer(&mut g, &session, "c1", "reject_once");
    let failed = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed")
        .expect("failed update");
    assert!(first_text(failed).contains("denied"), "{failed}");
    assert_eq!(reached(&log), "");

    // Allowed: the server answers.
    let ups = prompt_and_answer(&mut g, &session, "c2", "allow_once");
    let done = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .expect("completed update");
    assert_eq!(first_text(done), "fine");
    assert_eq!(reached(&log), "ok\n");

    // Plan mode: refused without asking.
    let set = g.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    let (response, _) = g.response(set);
    assert!(response.get("error").is_none(), "{response}");
    let id = g.prompt(&session, "call it");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(before
        .iter()
        .all(|m| m["method"] != "session/request_permission"));
    let failed = updates(&before)
        .into_iter()
        .find(|u| u["status"] == "failed")
        .expect("refused call");
    assert!(first_text(&failed).contains("plan mode"), "{failed}");
    assert_eq!(reached(&log), "ok\n");
}
