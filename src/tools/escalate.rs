//! Which sandbox a shell command starts in, and what happens when the sandbox denied it: the
//! host may let it run once more with more access (docs/sandbox.md, "Escalation").
//!
//! - In a mode that asks before anything may change (ACP `ask`, an approval guard), a command
//!   the classifier takes for a read runs without asking, but read-only in the kernel. If it
//!   needed to write, the kernel refuses, and the host is asked before it runs again at the
//!   session's policy.
//! - Under a policy the host chose itself, a command the sandbox denied may run once more
//!   outside it, after the host approves. A workflow stage, plan mode or an unattended
//!   declaration is a choice the user made: there is no way out of those.

use serde_json::{json, Map, Value};

use super::{guard, ToolContext};
use super::{Outcome, ToolEffect};
use crate::host::ui::{dialog, Answer};
use crate::protocol::message::{Content, ToolOutput};
use crate::sandbox::{Commands, Launch};

/// A second run the host may allow.
#[derive(Debug, Clone)]
pub struct Escalation {
    pub launch: Launch,
    /// The policy it runs at, as the audit trail and the dialog name it.
    pub to: &'static str,
}

/// Where a command starts, and where it may go after a denial.
#[derive(Debug, Clone)]
pub struct Plan {
    pub first: Launch,
    pub then: Option<Escalation>,
}

/// The plan for a bash call under the guard's `policy` and the session's `sandbox`.
pub fn plan(args: &Value, policy: guard::ToolPolicy, sandbox: &Commands) -> Plan {
    if guard::runs_unasked_read_only("bash", args, policy) {
        let then = match &sandbox.launch {
            Launch::Refused(_) => None,
            launch => Some(Escalation {
                launch: launch.clone(),
                to: "the session's sandbox",
            }),
        };
        return Plan {
            first: sandbox.read_only.clone(),
            then,
        };
    }
    let then = sandbox.may_escalate.then_some(Escalation {
        launch: Launch::Unconfined,
        to: "danger-full-access",
    });
    Plan {
        first: sandbox.launch.clone(),
        then,
    }
}

/// Whether a failed command looks refused by the sandbox: the kernel's words for it in the
/// output. A missing program (126, 127) or a usage error (2) is the command's own fault.
pub fn likely_denied(exit_code: Option<i32>, output: &str) -> bool {
    const MARKERS: &[&str] = &[
        "operation not permitted",
        "permission denied",
        "read-only file system",
        "landlock",
        "seccomp",
    ];
    if matches!(exit_code, Some(0 | 2 | 126 | 127)) {
        return false;
    }
    let lower = output.to_ascii_lowercase();
    MARKERS.iter().any(|m| lower.contains(m))
}

/// The text of an output's text blocks, joined by newlines.
pub fn text_of(output: &ToolOutput) -> String {
    crate::provider::wire::text_blocks(&output.content)
}

/// Asks the host whether `command`, denied by the sandbox, may run again at `to`. No host, a
/// refusal, a cancel: no.
pub fn ask(ctx: &ToolContext, command: &str, to: &Escalation, denied: &ToolOutput) -> bool {
    let Some(host) = &ctx.host else {
        return false;
    };
    let text = text_of(denied);
    let tail = tail_chars(&text, 600);
    let mut fields = Map::new();
    fields.insert(
        "title".into(),
        json!(format!("Run again with {}?", describe(to))),
    );
    fields.insert(
        "message".into(),
        json!(format!(
            "The sandbox refused this command:\n{command}\n\nWhat it printed:\n{tail}"
        )),
    );
    fields.insert("toolCallId".into(), json!(ctx.call_id));
    fields.insert("toolName".into(), json!("bash"));
    fields.insert("sandboxEscalation".into(), json!(to.to));
    matches!(
        dialog(host, "confirm", fields, None, &|| ctx.is_cancelled()),
        Answer::Confirmed(true)
    )
}

fn describe(to: &Escalation) -> &'static str {
    match to.launch {
        Launch::Unconfined => "no sandbox",
        _ => "write access",
    }
}

/// What the model sees of a denied command the host would not let run again.
pub fn refused(mut denied: ToolOutput, to: &Escalation) -> ToolOutput {
    denied.content.push(Content::text(format!(
        "The sandbox refused this command and running it with {} was not approved.",
        describe(to)
    )));
    denied
}

/// What was decided, for the host (`{"sandboxEscalation": {...}}` in the details) and for the
/// session, which records it in the audit trail (the outcome's effect).
pub fn record(mut output: ToolOutput, to: &Escalation, approved: bool) -> Outcome {
    let entry = json!({"to": to.to, "approved": approved});
    match &mut output.details {
        Some(Value::Object(d)) => {
            d.insert("sandboxEscalation".into(), entry);
        }
        _ => output.details = Some(json!({"sandboxEscalation": entry})),
    }
    Outcome {
        output,
        effects: vec![ToolEffect::Escalated {
            to: to.to,
            approved,
        }],
    }
}

fn tail_chars(s: &str, max: usize) -> &str {
    let count = s.chars().count();
    if count <= max {
        return s;
    }
    let skip = s.char_indices().nth(count - max).map_or(0, |(i, _)| i);
    &s[skip..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_told_by_the_kernels_words() {
        assert!(likely_denied(
            Some(1),
            "touch: cannot touch '/x': Permission denied"
        ));
        assert!(likely_denied(
            Some(1),
            "bash: line 1: /etc/y: Read-only file system"
        ));
        assert!(likely_denied(None, "socket: Operation not permitted"));
        assert!(!likely_denied(Some(0), "Permission denied"));
        assert!(!likely_denied(Some(127), "permission denied"));
        assert!(!likely_denied(Some(1), "no such file"));
    }
}
