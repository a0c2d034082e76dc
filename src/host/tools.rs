//! Host tools: definitions validated at `set_host_tools`, and the `Tool` that runs a call by
//! asking the host (`host_tool_call`), streaming its updates and waiting for its result.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::unbounded;
use serde_json::Value;

use super::{CallKind, HostEvent, HostHandle};
use crate::protocol::command::HostToolDefinition;
use crate::protocol::host_reply::HostReply;
use crate::protocol::message::ToolOutput;
use crate::protocol::{FlatFrame, Outbound};
use crate::tools::{Tool, ToolContext};

pub struct HostTool {
    pub name: String,
    pub label: String,
    pub description: String,
    pub parameters: Value,
    pub host: HostHandle,
}

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

impl HostTool {
    pub fn new(def: HostToolDefinition, host: HostHandle) -> Arc<HostTool> {
        Arc::new(HostTool {
            label: def.label.clone().unwrap_or_else(|| def.name.clone()),
            name: def.name,
            description: def.description,
            parameters: def.parameters,
            host,
        })
    }
}

impl Tool for HostTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let (reply, rx) = unbounded();
        let Some(id) = self.host.call(CallKind::Tool, None, reply, |id| {
            self.frame(id, &ctx.call_id, args)
        }) else {
            return ToolOutput::error(NOT_RUNNING);
        };
        loop {
            if ctx.is_cancelled() {
                self.host.cancel(id);
                return ToolOutput::error("Host tool execution was aborted");
            }
            match crate::park::recv_timeout(&rx, Duration::from_millis(10)) {
                Ok(event) => match step(event) {
                    Step::Update(partial) => ctx.update(partial),
                    Step::Done(output) => return output,
                    Step::Other => {}
                },
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return ToolOutput::error("the host broker stopped")
                }
            }
        }
    }

    fn as_host(&self) -> Option<&HostTool> {
        Some(self)
    }
}

const NOT_RUNNING: &str = "the host broker is not running";

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

impl HostTool {
    fn frame(&self, id: String, tool_call_id: &str, args: &Value) -> Outbound {
        Outbound::Frame(FlatFrame::HostToolCall {
            id,
            tool_call_id: tool_call_id.to_string(),
            tool_name: self.name.clone(),
            arguments: args.clone(),
        })
    }

    /// Starts a call that the session answers itself (`tools::start_direct`): its id and its
    /// request frame, which the caller queues behind the frames before it. The broker never
    /// hears of it; the host's answers reach the session, which turns them into the call's
    /// messages ([`answer`]) and withdraws the call with [`HostHandle::tool_cancel`].
    ///
    /// A host tool's call is all waiting, so this saves the turn the hand-offs through a tool
    /// thread and through the broker: out, session → writer; back, reader → session.
    pub fn start_direct(&self, args: &Value, tool_call_id: &str) -> (String, Outbound) {
        let id = self.host.mint(CallKind::Tool);
        (id.clone(), self.frame(id, tool_call_id, args))
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
