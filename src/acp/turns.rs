//! The events of a prompt turn as ACP updates: streamed chunks, tool calls and their results,
//! and at the run's end the usage and title updates (`usage.rs`), then the prompt's answer.

use std::io::Write;

use agent_client_protocol_schema::v1::{Error, PromptResponse, ToolCallStatus};
use serde_json::Value;

use super::front::{Front, Shown};
use super::updates::{self, SessionUpdate};
use crate::protocol::message::AgentMessage;
use crate::protocol::AgentEvent;

impl<W: Write> Front<W> {
    /// Where the focused session's tool paths are resolved.
    pub(super) fn place(&self) -> updates::Place<'_> {
        updates::Place {
            cwd: &self.c.cwd,
            home: self.projects.home.as_deref(),
        }
    }

    pub(super) fn on_event(&mut self, event: AgentEvent) -> std::io::Result<()> {
        match event {
            // A server the session could not start or lost: the editor's user should know.
            AgentEvent::McpServerState { server } if server.state == "failed" => {
                let reason = server.reason.unwrap_or_default();
                self.notice(&format!("MCP server {} failed: {reason}", server.name))
            }
            AgentEvent::MessageUpdate {
                assistant_message_event,
                ..
            } => match updates::delta(&assistant_message_event) {
                Some(update) if self.c.turn.is_some() => self.update(update),
                _ => Ok(()),
            },
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                let call = updates::tool_call(
                    &tool_call_id,
                    &tool_name,
                    &args,
                    self.place(),
                    ToolCallStatus::Pending,
                );
                self.c.shown.insert(tool_call_id, Shown { args });
                self.update(SessionUpdate::ToolCall(call))
            }
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => self.update(SessionUpdate::ToolCallUpdate(updates::progress(
                &tool_call_id,
                &partial_result,
            ))),
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => {
                let args = self
                    .c
                    .shown
                    .remove(&tool_call_id)
                    .map(|s| s.args)
                    .unwrap_or(Value::Null);
                let mut update = updates::result(
                    &tool_call_id,
                    &tool_name,
                    &args,
                    self.place(),
                    &result,
                    is_error,
                );
                self.keep_terminal(&mut update);
                self.update(SessionUpdate::ToolCallUpdate(update))
            }
            AgentEvent::AgentEnd {
                messages,
                outcome,
                error_message,
                ..
            } => {
                self.c.stats.add(&messages);
                self.end_turn(&messages, outcome, error_message.as_deref())
            }
            _ => Ok(()),
        }
    }

    fn end_turn(
        &mut self,
        messages: &[AgentMessage],
        outcome: crate::protocol::event::Outcome,
        error: Option<&str>,
    ) -> std::io::Result<()> {
        let Some(turn) = self.c.turn.take() else {
            return Ok(());
        };
        // Before the answer: updates after it would belong to no turn.
        for update in self.c.stats.updates(self.c.model.as_deref()) {
            self.update(update)?;
        }
        if turn.by_request && !self.running.cancelled(&self.c.session) {
            return self
                .wire
                .respond::<()>(turn.id, Err(Error::request_cancelled()));
        }
        match updates::stop_reason(outcome, messages, turn.cancelled, error) {
            Ok(reason) => self.wire.respond(turn.id, Ok(PromptResponse::new(reason))),
            Err(message) => self
                .wire
                .respond::<()>(turn.id, Err(Error::internal_error().data(message))),
        }
    }
}
