//! What the host allows tool calls to do, checked before the tool runs (inside its `gjc-tool`
//! worker when the host must be asked, `tools::spawn`): a read-only rule (edits and commands
//! that may change something are refused), approval through the host (a `confirm` dialog naming
//! the call, answered by the user), and whether local file reads and writes and shell commands
//! are served by the host (an editor's unsaved buffers, its terminal) instead of the disk and
//! gjc's own processes. The default allows everything and serves files from disk, as RPC mode
//! always has; a front end that knows better sets the policy (`CommandFrame::Policy`).

use serde_json::{json, Map, Value};

use super::{str_arg, ToolContext};
use crate::host::ui::{dialog, Answer};
use crate::protocol::message::ToolOutput;

/// Which calls wait for the host's approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Approval {
    #[default]
    Never,
    /// Commands that may change something.
    Commands,
    /// Those and every edit or write.
    EditsAndCommands,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    pub approval: Approval,
    /// Plan mode: nothing may change the project.
    pub read_only: bool,
    /// Local files are read through the host (`file://` host URIs).
    pub host_reads: bool,
    /// Local files are written through the host.
    pub host_writes: bool,
    /// The bash tool runs commands in the host's terminal (an editor's) instead of locally.
    pub host_terminal: bool,
}

/// What a call may do to the project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    ReadOnly,
    Edit,
    Command,
}

/// The effect of a call. A shell command counts as read-only only when the classifier knows
/// every part of it to be (`control::classify`, fail-closed).
pub fn effect(tool: &str, args: &Value) -> Effect {
    match tool {
        "write" | "edit" => Effect::Edit,
        // An MCP tool may do anything, whatever its annotations claim: asked for like a command.
        name if name.starts_with(crate::protocol::mcp::MCP_TOOL_PREFIX) => Effect::Command,
        "bash" => match str_arg(args, "command") {
            Some(command) if crate::control::classify::is_read_only(command) => Effect::ReadOnly,
            _ => Effect::Command,
        },
        _ => Effect::ReadOnly,
    }
}

/// Whether a call runs without asking only because the classifier takes it for a read, in a
/// mode that asks before commands: it then runs read-only in the kernel (`escalate.rs`).
pub fn runs_unasked_read_only(tool: &str, args: &Value, policy: ToolPolicy) -> bool {
    tool == "bash" && policy.approval != Approval::Never && effect(tool, args) == Effect::ReadOnly
}

/// What the policy says of a call before anyone is asked.
#[derive(Debug)]
pub enum Ruling {
    Run,
    /// The output the model sees instead of the call's.
    Refuse(ToolOutput),
    /// Only the host's user can say: a `confirm` dialog, which waits.
    Ask,
}

/// The policy's word on a call, given whether a host can be asked and whether the kernel can
/// run a command read-only (without it, a read the classifier spares from asking is asked for
/// like any command: the classifier is never the only barrier).
pub fn ruling(
    tool: &str,
    args: &Value,
    policy: ToolPolicy,
    has_host: bool,
    read_only_kernel: bool,
) -> Ruling {
    let mut effect = effect(tool, args);
    if !read_only_kernel && runs_unasked_read_only(tool, args, policy) {
        effect = Effect::Command;
    }
    if effect == Effect::ReadOnly {
        return Ruling::Run;
    }
    if policy.read_only {
        return Ruling::Refuse(denied(format!(
            "{tool} was not run: plan mode is read-only (no edits, writes or shell commands). Describe the change in the plan instead."
        )));
    }
    let asks = match policy.approval {
        Approval::Never => false,
        Approval::Commands => effect == Effect::Command,
        Approval::EditsAndCommands => true,
    };
    match (asks, has_host) {
        (false, _) => Ruling::Run,
        (true, true) => Ruling::Ask,
        (true, false) => Ruling::Refuse(denied(format!(
            "{tool} needs approval and no host can give it"
        ))),
    }
}

/// Checked in the call's worker before the tool runs: `None` to run it, else the refusal the
/// model sees as the call's result. Asking the host waits for the user, cancellable by abort.
pub fn refusal(tool: &str, args: &Value, ctx: &ToolContext) -> Option<ToolOutput> {
    let read_only_kernel = !matches!(ctx.sandbox.read_only, crate::sandbox::Launch::Refused(_));
    let host = match ruling(tool, args, ctx.policy, ctx.host.is_some(), read_only_kernel) {
        Ruling::Run => return None,
        Ruling::Refuse(output) => return Some(output),
        Ruling::Ask => ctx.host.as_ref()?,
    };
    let mut fields = Map::new();
    fields.insert("title".into(), json!(format!("Allow {tool}?")));
    fields.insert("message".into(), json!(summary(tool, args)));
    fields.insert("toolCallId".into(), json!(ctx.call_id));
    fields.insert("toolName".into(), json!(tool));
    match dialog(host, "confirm", fields, None, &|| ctx.is_cancelled()) {
        Answer::Confirmed(true) => None,
        _ if ctx.is_cancelled() => Some(ToolOutput::error("Tool execution was aborted")),
        _ => Some(denied(format!(
            "The user denied this {tool} call; it was not run. Do not retry it unchanged: ask the user or take another way."
        ))),
    }
}

fn summary(name: &str, args: &Value) -> String {
    match name {
        "bash" => str_arg(args, "command").unwrap_or("").to_string(),
        _ => str_arg(args, "path").unwrap_or("").to_string(),
    }
}

fn denied(text: String) -> ToolOutput {
    ToolOutput::error(text).with_details(json!({"denied": true}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_mode_refuses_edits_and_commands_but_not_reads() {
        let (_dir, mut ctx) = crate::tools::tests::ctx();
        ctx.policy = ToolPolicy {
            read_only: true,
            ..Default::default()
        };
        let out = refusal("write", &json!({"path": "a.txt", "content": "y"}), &ctx).unwrap();
        assert!(out.is_error);
        assert_eq!(out.details, Some(json!({"denied": true})));
        assert!(refusal("bash", &json!({"command": "rm -rf x"}), &ctx).is_some());
        assert!(refusal("bash", &json!({"command": "ls -la"}), &ctx).is_none());
        assert!(refusal("read", &json!({"path": "a.txt"}), &ctx).is_none());
        // An MCP tool counts as a command, even one whose name says it only reads.
        assert!(refusal("mcp__fs__read_file", &json!({"path": "a.txt"}), &ctx).is_some());
    }

    #[test]
    fn approval_without_a_host_is_a_refusal() {
        let (_dir, mut ctx) = crate::tools::tests::ctx();
        ctx.policy.approval = Approval::Commands;
        assert!(refusal("edit", &json!({"path": "a"}), &ctx).is_none());
        assert!(refusal("bash", &json!({"command": "git status"}), &ctx).is_none());
        let out = refusal("bash", &json!({"command": "touch x"}), &ctx).unwrap();
        assert!(crate::tools::tests::text(&out).contains("no host"));
        let out = refusal("mcp__fs__read_file", &json!({}), &ctx).unwrap();
        assert!(crate::tools::tests::text(&out).contains("no host"));
    }
}
