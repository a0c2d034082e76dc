//! MCP tools under the policies of built-in tools, as seen from outside: hooks see every call and
//! a call a hook denies never reaches its server. (The approval guard and ACP permission requests:
//! tests/acp/mcp_policy.rs; the unattended plane: `unattended_runs_call_mcp_tools_only_when_their_
//! action_class_is_allowed` in tests/mcp.rs.) The server records each call it gets in a file
//! (misbehaving.js, `MCP_CALL_LOG`), so what reached it is read from the server's side.

use serde_json::json;

use crate::hooks::{hooks_file, logged, script};
use crate::mcp::{add, call, misbehaving, results, say, state_event, text_of};
use crate::support::gjc;

#[test]
fn hooks_see_mcp_calls_and_a_call_they_deny_never_reaches_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let hook_log = dir.path().join("hooks.jsonl");
    let server_log = dir.path().join("calls.log");
    let deny = script(
        dir.path(),
        "deny.sh",
        &hook_log,
        r#"echo '{"decision":"deny","reason":"not this one"}'"#,
    );
    let record = script(dir.path(), "record.sh", &hook_log, "exit 0");
    let agent = dir.path().join("agent");
    hooks_file(
        &agent.join("hooks.json"),
        json!([
            {"event": "before_tool_call", "command": deny, "tools": ["mcp__bad__crash"]},
            {"event": "after_tool_call", "command": record, "tools": ["mcp__bad__ok"]},
        ]),
    );
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.to_str().unwrap())
        .script(json!({"turns": [
            call("mcp__bad__crash", json!({})),
            call("mcp__bad__ok", json!({})),
            say("done"),
        ]}))
        .spawn();
    let mut server = misbehaving(&[], 5.0);
    server["env"] = json!({"MCP_CALL_LOG": server_log});
    add(&mut g, "bad", server);
    state_event(&mut g, "bad", "ready");
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends[0]["isError"], true);
    assert_eq!(text_of(&ends[0]), "Denied by hook: not this one");
    assert_eq!(ends[1]["isError"], false, "{}", ends[1]);
    assert_eq!(text_of(&ends[1]), "fine");
    // The denied call never reached the server (which would have crashed on it).
    assert_eq!(std::fs::read_to_string(&server_log).unwrap(), "ok\n");
    let seen = logged(&hook_log);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["event"], "before_tool_call");
    assert_eq!(seen[0]["toolName"], "mcp__bad__crash");
    assert_eq!(seen[1]["event"], "after_tool_call");
    assert_eq!(seen[1]["toolName"], "mcp__bad__ok");
    assert_eq!(seen[1]["result"]["content"][0]["text"], "fine");
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["mcpServers"][0]["state"], "ready", "{state}");
}
