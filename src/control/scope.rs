//! Command scopes: which part of the protocol a command belongs to, and the `command.<scope>`
//! action class a declaration must allow for it.

use super::classify::ActionClass;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Prompt,
    Session,
    MessageRead,
    Control,
    Model,
    Bash,
    Export,
    HostTools,
    HostUri,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 10] = [
        Scope::Prompt,
        Scope::Session,
        Scope::MessageRead,
        Scope::Control,
        Scope::Model,
        Scope::Bash,
        Scope::Export,
        Scope::HostTools,
        Scope::HostUri,
        Scope::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Prompt => "prompt",
            Scope::Session => "session",
            Scope::MessageRead => "message:read",
            Scope::Control => "control",
            Scope::Model => "model",
            Scope::Bash => "bash",
            Scope::Export => "export",
            Scope::HostTools => "host_tools",
            Scope::HostUri => "host_uri",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The action class that allows the scope's commands.
    pub fn action(self) -> ActionClass {
        match self {
            Scope::Prompt => ActionClass::CommandPrompt,
            Scope::Session => ActionClass::CommandSession,
            Scope::MessageRead => ActionClass::CommandMessageRead,
            Scope::Control => ActionClass::CommandControl,
            Scope::Model => ActionClass::CommandModel,
            Scope::Bash => ActionClass::CommandBash,
            Scope::Export => ActionClass::CommandExport,
            Scope::HostTools => ActionClass::CommandHostTools,
            Scope::HostUri => ActionClass::CommandHostUri,
            Scope::Admin => ActionClass::CommandAdmin,
        }
    }
}

/// The scope of a command type; `None` for a type no scope covers (denied once unattended).
/// `list_sessions`, a gjc command the reference table lacks, is a `session` command.
pub fn scope_of(command: &str) -> Option<Scope> {
    Some(match command {
        "prompt" | "steer" | "follow_up" | "abort" | "abort_and_prompt" => Scope::Prompt,
        "new_session"
        | "switch_session"
        | "branch"
        | "get_branch_messages"
        | "set_session_name"
        | "list_sessions" => Scope::Session,
        "get_state"
        | "get_pending_workflow_gates"
        | "get_session_stats"
        | "get_last_assistant_text"
        | "get_messages"
        | "list_mcp_servers" => Scope::MessageRead,
        "set_todos"
        | "set_capabilities"
        | "set_steering_mode"
        | "set_follow_up_mode"
        | "set_interrupt_mode"
        | "compact"
        | "set_auto_compaction"
        | "set_auto_retry"
        | "abort_retry"
        | "negotiate_unattended"
        | "workflow_gate_response" => Scope::Control,
        "set_model"
        | "set_default_model_selection"
        | "cycle_model"
        | "get_available_models"
        | "set_thinking_level"
        | "cycle_thinking_level" => Scope::Model,
        "bash" | "abort_bash" => Scope::Bash,
        "export_html" => Scope::Export,
        "set_host_tools" => Scope::HostTools,
        "set_host_uri_schemes" => Scope::HostUri,
        "handoff"
        | "checkpoint_for_handoff"
        | "get_login_providers"
        | "login"
        | "trust_project"
        | "add_mcp_server"
        | "remove_mcp_server"
        | "restart_mcp_server"
        | "set_sandbox" => Scope::Admin,
        _ => return None,
    })
}

/// Commands that use budget: each reserves one tool-call unit before it runs.
pub fn is_charged(command: &str) -> bool {
    matches!(
        command,
        "bash" | "prompt" | "steer" | "follow_up" | "abort_and_prompt"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_command_has_a_scope() {
        for name in crate::protocol::Command::NAMES {
            assert!(scope_of(name).is_some(), "{name} has no scope");
        }
        assert_eq!(scope_of("no_such_command"), None);
    }

    #[test]
    fn scope_names_round_trip() {
        for s in Scope::ALL {
            assert_eq!(Scope::parse(s.as_str()), Some(s));
        }
        assert_eq!(Scope::MessageRead.action().as_str(), "command.message_read");
    }
}
