//! A host tool: a tool the host defined (`set_host_tools`) and runs. A call asks the host
//! (`host_tool_call`) through the broker, streams its updates and waits for its result; or it is
//! started on no thread and answered by the session itself (`start_direct`).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::unbounded;
use serde_json::Value;

use super::{Tool, ToolContext};
use crate::host::tools::{step, Step};
use crate::host::{CallKind, HostHandle};
use crate::protocol::command::HostToolDefinition;
use crate::protocol::message::ToolOutput;
use crate::protocol::{FlatFrame, Outbound};

pub struct HostTool {
    pub name: String,
    pub label: String,
    pub description: String,
    pub parameters: Value,
    pub host: HostHandle,
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
    /// messages ([`crate::host::tools::answer`]) and withdraws the call with
    /// [`HostHandle::tool_cancel`].
    ///
    /// A host tool's call is all waiting, so this saves the turn the hand-offs through a tool
    /// thread and through the broker: out, session → writer; back, reader → session.
    pub fn start_direct(&self, args: &Value, tool_call_id: &str) -> (String, Outbound) {
        let id = self.host.mint(CallKind::Tool);
        (id.clone(), self.frame(id, tool_call_id, args))
    }
}
