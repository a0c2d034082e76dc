//! Agent session events: the inner `payload.event` of an event frame. The envelope around them is
//! added by the stdout writer, which alone owns `seq` and `frame_id`.

use serde::Serialize;
use serde_json::Value;

use super::message::{AgentMessage, StreamEvent, ToolOutput, ToolResultMessage};

#[derive(Debug, Clone, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    AgentStart {},
    AgentEnd {
        messages: Vec<AgentMessage>,
        #[serde(skip_serializing_if = "Option::is_none")]
        stop_reason: Option<&'static str>,
    },
    TurnStart {},
    TurnEnd {
        message: AgentMessage,
        tool_results: Vec<ToolResultMessage>,
    },
    MessageStart {
        message: AgentMessage,
    },
    /// `message` is the snapshot of the partial assistant message. With `compact` the writer
    /// frames the delta alone (docs/protocol.md, "Compact message updates").
    MessageUpdate {
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<AgentMessage>,
        assistant_message_event: StreamEvent,
        #[serde(skip)]
        compact: bool,
    },
    MessageEnd {
        message: AgentMessage,
    },
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        args: Value,
    },
    ToolExecutionUpdate {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        partial_result: ToolOutput,
    },
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        result: ToolOutput,
        is_error: bool,
    },
    AutoCompactionStart {
        reason: &'static str,
        action: &'static str,
    },
    AutoCompactionEnd {
        action: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        aborted: bool,
        will_retry: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    ThinkingLevelChanged {
        thinking_level: String,
    },
    Notice {
        level: &'static str,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        source: Option<&'static str>,
    },
}

impl AgentEvent {
    /// The inner `type`, copied into `payload.event_type` for routing.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentEvent::AgentStart {} => "agent_start",
            AgentEvent::AgentEnd { .. } => "agent_end",
            AgentEvent::TurnStart {} => "turn_start",
            AgentEvent::TurnEnd { .. } => "turn_end",
            AgentEvent::MessageStart { .. } => "message_start",
            AgentEvent::MessageUpdate { .. } => "message_update",
            AgentEvent::MessageEnd { .. } => "message_end",
            AgentEvent::ToolExecutionStart { .. } => "tool_execution_start",
            AgentEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
            AgentEvent::ToolExecutionEnd { .. } => "tool_execution_end",
            AgentEvent::AutoCompactionStart { .. } => "auto_compaction_start",
            AgentEvent::AutoCompactionEnd { .. } => "auto_compaction_end",
            AgentEvent::AutoRetryStart { .. } => "auto_retry_start",
            AgentEvent::AutoRetryEnd { .. } => "auto_retry_end",
            AgentEvent::ThinkingLevelChanged { .. } => "thinking_level_changed",
            AgentEvent::Notice { .. } => "notice",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_matches_serialized_type() {
        let events = [
            AgentEvent::AgentStart {},
            AgentEvent::TurnStart {},
            AgentEvent::AutoRetryEnd {
                success: true,
                attempt: 1,
                final_error: None,
            },
            AgentEvent::Notice {
                level: "info",
                message: "m".into(),
                source: None,
            },
        ];
        for ev in events {
            let v = serde_json::to_value(&ev).unwrap();
            assert_eq!(v["type"], ev.kind());
        }
    }
}
