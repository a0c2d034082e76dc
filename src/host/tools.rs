//! Host tools: definitions validated at `set_host_tools`, and the `Tool` that runs a call by
//! asking the host (`host_tool_call`), streaming its updates and waiting for its result.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::unbounded;
use serde_json::Value;

use super::{CallKind, HostCall, HostEvent, HostHandle};
use crate::protocol::command::HostToolDefinition;
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
        let (id_tx, id_rx) = unbounded();
        let (tool_call_id, tool_name, arguments) =
            (ctx.call_id.clone(), self.name.clone(), args.clone());
        self.host.call(HostCall {
            kind: CallKind::Tool,
            build: Box::new(move |id| {
                Outbound::Frame(FlatFrame::HostToolCall {
                    id,
                    tool_call_id,
                    tool_name,
                    arguments,
                })
            }),
            timeout: None,
            reply,
            id_tx: Some(id_tx),
        });
        let Ok(id) = id_rx.recv_timeout(Duration::from_secs(5)) else {
            return ToolOutput::error("the host broker is not running");
        };
        loop {
            if ctx.is_cancelled() {
                self.host.cancel(id);
                return ToolOutput::error("Host tool execution was aborted");
            }
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(HostEvent::ToolUpdate { partial, .. }) => ctx.update(partial),
                Ok(HostEvent::ToolResult {
                    mut result,
                    is_error,
                    ..
                }) => {
                    result.is_error |= is_error;
                    return result;
                }
                Ok(HostEvent::Rejected { reason, .. }) => return ToolOutput::error(reason),
                Ok(_) => {}
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return ToolOutput::error("the host broker stopped")
                }
            }
        }
    }
}
