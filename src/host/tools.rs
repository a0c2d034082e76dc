//! Host tools, as the broker sees them: definitions validated at `set_host_tools`, and what the
//! broker's events and the host's answers mean to a call (the tool itself is
//! `tools/host_tool.rs`).

use serde_json::Value;

use super::HostEvent;
use crate::protocol::command::HostToolDefinition;
use crate::protocol::host_reply::HostReply;
use crate::protocol::message::ToolOutput;

/// Validates a host tool set: names unique, not a built-in (nor `ask`), schemas that compile.
pub fn validate(
    defs: &[HostToolDefinition],
    builtin: &[&str],
) -> Result<Vec<(HostToolDefinition, jsonschema::Validator)>, String> {
    let mut out: Vec<(HostToolDefinition, jsonschema::Validator)> = Vec::new();
    for (i, d) in defs.iter().enumerate() {
        let name = d.name.trim().to_string();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "tools[{i}]: invalid tool name {:?} (1-64 letters, digits, _ or -)",
                d.name
            ));
        }
        if builtin.contains(&name.as_str()) || name == "ask" {
            return Err(format!(
                "tools[{i}]: host tool {name} clashes with a built-in tool"
            ));
        }
        if out.iter().any(|(o, _)| o.name == name) {
            return Err(format!("tools[{i}]: duplicate host tool name {name}"));
        }
        if !d.parameters.is_object()
            || d.parameters
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t != "object")
        {
            return Err(format!(
                "host tool {name}: parameters must be a JSON Schema object with type \"object\""
            ));
        }
        if let Err(e) = jsonschema::meta::validate(&d.parameters) {
            return Err(format!("host tool {name}: invalid parameters schema: {e}"));
        }
        let validator = jsonschema::validator_for(&d.parameters)
            .map_err(|e| format!("host tool {name}: invalid parameters schema: {e}"))?;
        out.push((HostToolDefinition { name, ..d.clone() }, validator));
    }
    Ok(out)
}

/// What a broker event means to a host tool call.
pub enum Step {
    Update(ToolOutput),
    /// The call's output: the host's result, or the reason none will come.
    Done(ToolOutput),
    Other,
}

pub fn step(event: HostEvent) -> Step {
    match event {
        HostEvent::ToolUpdate { partial, .. } => Step::Update(partial),
        HostEvent::ToolResult {
            mut result,
            is_error,
            ..
        } => {
            result.is_error |= is_error;
            Step::Done(result)
        }
        HostEvent::Rejected { reason, .. } => Step::Done(ToolOutput::error(reason)),
        _ => Step::Other,
    }
}

/// What a host tool answer means to the call it names.
pub fn answer(reply: HostReply) -> Step {
    match reply {
        HostReply::ToolUpdate(u) => Step::Update(u.partial_result),
        HostReply::ToolResult(r) => step(HostEvent::ToolResult {
            id: r.id,
            result: r.result,
            is_error: r.is_error,
        }),
        HostReply::UriResult(_) | HostReply::UiResponse(_) => Step::Other,
    }
}
