//! The session's MCP servers (`crate::mcp`): started when the session starts, without delaying
//! `ready` or any answer; their tools join the session's tools as each server becomes ready (and
//! again when one changes its list); the first model request waits for servers still starting up
//! to their start-up timeout, then goes without them; stopped when the session ends. Hosts list,
//! add, remove and restart them (`list_mcp_servers` ...) and see each one's state in `get_state`
//! and the `mcp_server_state` event.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};

use super::run::{Phase, Run};
use super::SessionLoop;
use crate::mcp::config::{self, ServerConfig};
use crate::mcp::server::{Changed, Server, State};
use crate::protocol::mcp::{McpServerStatus, McpServers as ServersReply};
use crate::protocol::AgentEvent;
use crate::tools::Tool;

/// The session's servers.
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    changed: (Sender<Changed>, Receiver<Changed>),
    /// Servers handed over by the front end (ACP `mcpServers`), started with the config's.
    extra: Vec<ServerConfig>,
}

impl Default for McpServers {
    fn default() -> Self {
        McpServers {
            servers: Vec::new(),
            changed: unbounded(),
            extra: Vec::new(),
        }
    }
}

impl McpServers {
    /// Servers to start with the session besides the config files' (the editor's).
    pub fn with_extra(extra: Vec<ServerConfig>) -> McpServers {
        McpServers {
            extra,
            ..McpServers::default()
        }
    }

    pub fn changes(&self) -> &Receiver<Changed> {
        &self.changed.1
    }

    fn add(&mut self, config: ServerConfig, cwd: PathBuf) -> Result<(), String> {
        if self.servers.iter().any(|s| s.config.name == config.name) {
            return Err(format!(
                "an MCP server named {} already exists",
                config.name
            ));
        }
        if self.servers.len() >= config::MAX_SERVERS {
            return Err(format!(
                "a session has at most {} MCP servers",
                config::MAX_SERVERS
            ));
        }
        let server = Server::new(config, cwd, self.changed.0.clone());
        server.start();
        self.servers.push(server);
        Ok(())
    }

    fn find(&self, name: &str) -> Result<&Arc<Server>, String> {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .ok_or_else(|| format!("no MCP server named {name}"))
    }

    pub fn statuses(&self) -> Vec<McpServerStatus> {
        self.servers.iter().map(|s| status(s)).collect()
    }

    /// Every ready server's tools, named for the model.
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut taken: Vec<String> = Vec::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.servers {
            for def in server.tools() {
                let name = crate::mcp::names::model_name(&server.config.name, &def.name, &taken);
                taken.push(name.clone());
                tools.push(Arc::new(crate::mcp::tool::McpTool {
                    name,
                    def,
                    server: server.clone(),
                }));
            }
        }
        tools
    }

    /// Until when the first model request waits: the latest start-up deadline of the servers
    /// still starting; `None` when none is.
    fn starting_until(&self) -> Option<Instant> {
        self.servers
            .iter()
            .filter(|s| s.state() == State::Starting)
            .map(|s| {
                *s.started_at.lock().unwrap_or_else(|e| e.into_inner()) + s.config.startup_timeout
            })
            .max()
    }

    /// Stops every server at once and returns when all are gone (each bounded by its grace).
    pub fn stop_all(&mut self) {
        let stopping: Vec<_> = self
            .servers
            .drain(..)
            .map(|server| std::thread::spawn(move || server.stop()))
            .collect();
        for handle in stopping {
            let _ = handle.join();
        }
    }
}

fn status(server: &Server) -> McpServerStatus {
    let state = server.state();
    McpServerStatus {
        name: server.config.name.clone(),
        state: state.label().to_string(),
        tools: match state {
            State::Ready { tools } => Some(tools),
            _ => None,
        },
        reason: match state {
            State::Failed { reason } => Some(reason),
            _ => None,
        },
    }
}

impl SessionLoop {
    /// Loads the config files and starts every server (the session is starting).
    pub(super) fn start_mcp(&mut self) {
        let agent_dir = self.state.project.agent_dir.clone();
        let trusted = crate::trust::TrustStore::new(&agent_dir).is_trusted(&self.state.cwd);
        let (mut servers, errors) = config::load(&agent_dir, &self.state.cwd, trusted);
        for error in errors {
            log::warn!("MCP config: {error}");
            self.emit(AgentEvent::Notice {
                level: "warning",
                message: format!("MCP config skipped: {error}"),
                source: None,
            });
        }
        for extra in std::mem::take(&mut self.mcp.extra) {
            servers.retain(|s| s.name != extra.name);
            servers.push(extra);
        }
        for server in servers {
            if let Err(e) = self.mcp.add(server, self.state.cwd.clone()) {
                log::warn!("MCP: {e}");
            }
        }
    }

    /// A server changed state: the host is told, the tools follow, and a model request waiting
    /// for servers goes once none is starting.
    pub fn on_mcp_changed(&mut self, changed: Changed) {
        // Several changes may be queued: each is told, the tools are rebuilt once.
        let mut names = vec![changed.0];
        while let Ok(Changed(more)) = self.mcp.changes().try_recv() {
            if !names.contains(&more) {
                names.push(more);
            }
        }
        for name in names {
            if let Ok(server) = self.mcp.find(&name) {
                let server = status(server);
                self.emit(AgentEvent::McpServerState { server });
            }
        }
        let tools = self.mcp.tools();
        self.state.tools.set_mcp_tools(tools);
        self.resume_after_servers(false);
    }

    /// Whether the model request should wait for servers still starting; if so, the run waits
    /// in `AwaitServers` (the timer or the servers' changes end it).
    pub(super) fn await_servers(&mut self) -> bool {
        let Some(until) = self.mcp.starting_until().filter(|u| *u > Instant::now()) else {
            return false;
        };
        if let Some(run) = &mut self.run {
            run.enter(Phase::AwaitServers { until });
            return true;
        }
        false
    }

    /// The run waiting for servers makes its request once none is starting, or at its deadline.
    pub(super) fn resume_after_servers(&mut self, timer: bool) {
        let Some(Phase::AwaitServers { until }) = self.run.as_ref().map(Run::phase) else {
            return;
        };
        let due = timer && Instant::now() >= *until;
        if due || self.mcp.starting_until().is_none() {
            self.request_model();
        }
    }

    pub(super) fn list_mcp_servers(&self) -> ServersReply {
        ServersReply {
            servers: self.mcp.statuses(),
        }
    }

    pub(super) fn add_mcp_server(
        &mut self,
        p: crate::protocol::mcp::AddMcpServerParams,
    ) -> Result<ServersReply, String> {
        let config = config::entry(&p.name, p.config, &|v| std::env::var(v).ok())
            .map_err(|e| e.to_string())?;
        self.mcp.add(config, self.state.cwd.clone())?;
        Ok(self.list_mcp_servers())
    }

    pub(super) fn remove_mcp_server(&mut self, name: &str) -> Result<ServersReply, String> {
        let server = self.mcp.find(name)?.clone();
        self.mcp.servers.retain(|s| s.config.name != name);
        // Stopping waits for the process to go: not on the session thread.
        std::thread::spawn(move || server.stop());
        let server = McpServerStatus {
            name: name.to_string(),
            state: State::Stopped.label().into(),
            tools: None,
            reason: None,
        };
        self.emit(AgentEvent::McpServerState { server });
        let tools = self.mcp.tools();
        self.state.tools.set_mcp_tools(tools);
        Ok(self.list_mcp_servers())
    }

    pub(super) fn restart_mcp_server(&mut self, name: &str) -> Result<ServersReply, String> {
        self.mcp.find(name)?.restart();
        Ok(self.list_mcp_servers())
    }
}
