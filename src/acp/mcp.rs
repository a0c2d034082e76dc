//! The editor's MCP servers (`mcpServers` of `session/new`, `session/load`, `session/resume`):
//! handed to the session as `add_mcp_server` commands, replacing the servers the editor gave for
//! the session served before (each session has its own). stdio servers only, for now: HTTP and
//! SSE ones are reported to the editor as not started.

use std::io::Write;
use std::path::Path;

use agent_client_protocol_schema::v1::McpServer;
use serde_json::{json, Map, Value};

use super::front::{Front, Waiting};

impl<W: Write> Front<W> {
    /// Starts `servers` for the session now served; returns the names of those left out.
    pub(super) fn use_mcp_servers(&mut self, servers: &[McpServer]) -> Vec<String> {
        for name in std::mem::take(&mut self.editor_mcp) {
            self.command("remove_mcp_server", json!({"name": name}), Waiting::Nobody);
        }
        let mut skipped = Vec::new();
        for server in servers {
            let McpServer::Stdio(stdio) = server else {
                skipped.push(name_of(server));
                continue;
            };
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
            let name = server_name(&stdio.name);
            let fields = json!({"name": name, "config": config});
            self.command("add_mcp_server", fields, Waiting::Nobody);
            self.editor_mcp.push(name);
        }
        skipped
    }

    /// The editor's servers for a session it loads or resumes, once the request is valid.
    pub(super) fn mcp_for_stored(
        &mut self,
        wanted: &str,
        cwd: &Path,
        servers: &[agent_client_protocol_schema::v1::McpServer],
    ) -> std::io::Result<()> {
        if super::sessions::session_id(wanted).is_err()
            || super::sessions::project(cwd).is_err()
            || self.turn.is_some()
        {
            return Ok(());
        }
        if !self.use_mcp_servers(servers).is_empty() {
            self.notice("gjc connects to stdio MCP servers only; the HTTP and SSE ones listed were not started")?;
        }
        Ok(())
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
