//! The session's side of the kernel sandbox (`crate::sandbox`): the limits the user's other
//! choices put on the host's policy, the commands tool calls, hooks and the host's `bash` start
//! with, and `set_sandbox`.

use super::SessionLoop;
use crate::protocol::message::ToolCall;
use crate::protocol::outbound::TypedError;
use crate::protocol::sandbox::{SandboxState, SetSandboxParams};
use crate::sandbox::audit::Escalated;
use crate::sandbox::{self, Commands, Launch, Limits};

impl SessionLoop {
    /// How commands start now: the host's policy, narrowed by a workflow stage still waiting for
    /// its gate, plan mode and the unattended declaration, for the session's current cwd.
    pub(super) fn sandbox_commands(&mut self) -> Commands {
        self.sandbox.set_limits(self.sandbox_limits());
        self.sandbox.set_cwd(&self.state.cwd);
        let commands = self.sandbox.commands();
        if let Some(hooks) = &self.hooks {
            hooks.set_launch(commands.launch.clone());
        }
        commands
    }

    fn sandbox_limits(&self) -> Limits {
        Limits {
            stage: self
                .state
                .workflow
                .stage
                .as_ref()
                .is_some_and(|s| !s.cleared),
            plan: self.tool_policy.read_only,
            unattended: self.unattended.sandbox_limit(),
        }
    }

    /// A call that asked the host to leave the sandbox is recorded, approved or not.
    pub(super) fn audit_escalation(&mut self, call: &ToolCall, to: &str, approved: bool) {
        let escalated = Escalated {
            session_id: &self.state.id,
            tool_call_id: &call.id,
            command: call
                .arguments
                .get("command")
                .and_then(|c| c.as_str())
                .unwrap_or(""),
            to,
            approved,
        };
        let session_dir = self.state.session_dir.clone();
        if let Err(e) = self.sandbox.record_escalation(&session_dir, &escalated) {
            log::error!("sandbox audit: {e}");
        }
    }

    /// How the host's `bash` and hooks start commands now; hooks are told too.
    pub(super) fn sandbox_launch(&mut self) -> Launch {
        self.sandbox.set_limits(self.sandbox_limits());
        self.sandbox.set_cwd(&self.state.cwd);
        let launch = self.sandbox.launch();
        if let Some(hooks) = &self.hooks {
            hooks.set_launch(launch.clone());
        }
        launch
    }

    /// `get_state.sandbox`.
    pub(super) fn sandbox_state(&mut self) -> SandboxState {
        self.sandbox.set_limits(self.sandbox_limits());
        self.sandbox.set_cwd(&self.state.cwd);
        self.sandbox.state()
    }

    /// `set_sandbox`: the host (never the model) replaces its policy, in whole or in part.
    pub(super) fn set_sandbox(&mut self, p: SetSandboxParams) -> Result<SandboxState, TypedError> {
        let mut policy = self.sandbox.policy().clone();
        if let Some(mode) = p.policy {
            policy.mode = mode;
        }
        if let Some(network) = p.network {
            policy.network = network;
        }
        if let Some(roots) = &p.writable_roots {
            policy.roots = sandbox::parse_roots(roots).map_err(|e| TypedError {
                code: "invalid_sandbox",
                message: e.to_string(),
            })?;
        }
        self.sandbox.set_policy(policy);
        Ok(self.sandbox_state())
    }
}
