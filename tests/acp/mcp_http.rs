//! An editor's streamable HTTP MCP server (`{type: "http", name, url, headers}` in
//! `session/new`): the reference server's tool used by the model; an SSE one fails, said so.

use serde_json::{json, Value};

use super::{acp, updates};
use crate::mcp_http::everything_http;

#[test]
fn an_http_server_of_session_new_is_used_by_the_model() {
    let everything = everything_http();
    let call = json!({"content": [{"type": "toolCall", "name": "mcp__everything__echo",
        "arguments": {"message": "hello from acp"}}]});
    let say = json!({"content": [{"type": "text", "text": "ok"}]});
    let mut g = acp(json!({"turns": [call, say]}));
    g.initialize(json!({"session": {"notices": {}}}));
    let id = g.request(
        "session/new",
        json!({"cwd": g.project, "mcpServers": [
            {"type": "http", "name": "everything", "url": everything.url,
             "headers": [{"name": "X-Editor", "value": "1"}]},
            {"type": "sse", "name": "old", "url": everything.url, "headers": []},
        ]}),
    );
    let (created, mut seen) = g.response(id);
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    // What comes meanwhile is kept: the SSE server's notice may be among it.
    let set = g.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "permissions", "value": "allow_all"}),
    );
    seen.extend(g.response(set).1);
    let id = g.prompt(&session, "echo");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    let shown = serde_json::to_string(&updates(&before)).unwrap();
    assert!(shown.contains("Echo: hello from acp"), "{shown}");
    seen.extend(before);
    let is_notice = |m: &Value| {
        m["params"]["update"]["sessionUpdate"] == "notice" && m.to_string().contains("old failed")
    };
    if !seen.iter().any(is_notice) {
        seen.extend(g.until(is_notice));
    }
    let notice = seen.iter().find(|m| is_notice(m)).unwrap();
    assert!(notice.to_string().contains("HTTP+SSE"), "{notice}");
}
