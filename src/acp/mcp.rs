//! The editor's MCP servers (`mcpServers` of `session/new`, `session/load`, `session/resume`):
//! handed to that session as `add_mcp_server` commands, replacing the ones the editor gave it
//! before (each session has its own). stdio and streamable HTTP servers are started; an SSE one
//! (the old HTTP+SSE transport) is added too and fails with the reason, which the editor sees as
//! a notice like any failed server.

use std::io::Write;

use agent_client_protocol_schema::v1::McpServer;
use serde_json::{json, Map, Value};

use super::front::{Front, Waiting};

impl<W: Write> Front<W> {
    /// Starts `servers` for the session now served; returns the names of those left out.
    pub(super) fn use_mcp_servers(&mut self, servers: &[McpServer]) -> Vec<String> {
        for name in std::mem::take(&mut self.c.editor_mcp) {
            self.command("remove_mcp_server", json!({"name": name}), Waiting::Nobody);
        }
        let mut skipped = Vec::new();
        for server in servers {
            let (name, config) = match server {
                McpServer::Stdio(stdio) => {
                    let env: Map<String, Value> = stdio
                        .env
                        .iter()
                        .map(|v| (v.name.clone(), Value::String(v.value.clone())))
                        .collect();
                    let config = json!({
                        "command": stdio.command.to_string_lossy(),
                        "args": stdio.args,
                        "env": env,
                    });
                    (&stdio.name, config)
                }
                McpServer::Http(http) => {
                    let headers: Map<String, Value> = http
                        .headers
                        .iter()
                        .map(|h| (h.name.clone(), Value::String(h.value.clone())))
                        .collect();
                    let config = json!({"type": "http", "url": http.url, "headers": headers});
                    (&http.name, config)
                }
                McpServer::Sse(sse) => (&sse.name, json!({"type": "sse", "url": sse.url})),
                _ => {
                    skipped.push(name_of(server));
                    continue;
                }
            };
            let name = server_name(name);
            let fields = json!({"name": name, "config": config});
            self.command("add_mcp_server", fields, Waiting::Nobody);
            self.c.editor_mcp.push(name);
        }
        skipped
    }

    /// Tells the editor which of its servers were left out.
    pub(super) fn tell_skipped(&mut self, skipped: &[String]) -> std::io::Result<()> {
        if skipped.is_empty() {
            return Ok(());
        }
        self.notice(&format!(
            "gjc connects to stdio and streamable HTTP MCP servers only; not started: {}",
            skipped.join(", ")
        ))
    }
}

/// An editor's server name ("human-readable") as a server name gjc accepts.
fn server_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().take(64) {
        let c = if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push_str("server");
    }
    out
}

fn name_of(server: &McpServer) -> String {
    match server {
        McpServer::Http(h) => h.name.clone(),
        McpServer::Sse(s) => s.name.clone(),
        McpServer::Stdio(s) => s.name.clone(),
        _ => "unnamed".into(),
    }
}
