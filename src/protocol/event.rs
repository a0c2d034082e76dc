//! Agent session events: the inner `payload.event` of an event frame. The envelope around them is
//! added by the stdout writer, which alone owns `seq` and `frame_id`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::message::{AgentMessage, StreamEvent, ToolOutput};
use super::reply::{CompactionResult, TodoTask};

/// How a run ended, precisely (`agent_end.outcome`). `agent_end.stopReason` stays `completed` for
/// every one of them, as published clients accept only `completed` and `paused` there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    Aborted,
    Error,
    BudgetExceeded,
    Denied,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    AgentStart {},
    AgentEnd {
        messages: Vec<AgentMessage>,
        /// Always `completed`: see [`Outcome`].
        stop_reason: &'static str,
        outcome: Outcome,
        /// The error that ended the run, with outcome `error` (and `budget_exceeded`:
        /// `budget_exceeded: …`).
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
        /// With outcome `budget_exceeded`: the `budget_exceeded` error object.
        #[serde(skip_serializing_if = "Option::is_none")]
        error_details: Option<serde_json::Value>,
        /// Unattended mode: the model's tool calls the declaration refused (`action_denied`
        /// objects with `tool` and `toolCallId`); each also got an error tool result.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        denied_actions: Vec<serde_json::Value>,
    },
    TurnStart {},
    TurnEnd {
        message: AgentMessage,
        /// `toolResult` messages only, each with its `role`.
        tool_results: Vec<AgentMessage>,
    },
    MessageStart {
        message: AgentMessage,
    },
    /// One streamed delta. The writer, which follows the message since its `message_start`,
    /// adds the snapshot of the partial message (as `message` and as the event's `partial`,
    /// [`write_message_update`]); with `compact` it frames the delta alone (docs/protocol.md,
    /// "Compact message updates").
    MessageUpdate {
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
        result: Option<CompactionResult>,
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
    /// Conditional rules matched the streamed output: the stream was stopped, its partial reply
    /// discarded, and the request is sent again with the rules as a reminder.
    TtsrTriggered {
        rules: Vec<TtsrRule>,
    },
    Notice {
        level: &'static str,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        source: Option<&'static str>,
    },
    /// The run would have ended with these tasks still open; a reminder listing them was added
    /// and the run goes on (attempt `attempt` of `max_attempts` in this run).
    TodoReminder {
        todos: Vec<TodoTask>,
        attempt: u32,
        max_attempts: u32,
    },
    /// Every task was closed when the run ended; the list was cleared.
    TodoAutoClear {},
    /// An MCP server of the session changed state (docs/mcp.md).
    McpServerState {
        #[serde(flatten)]
        server: super::mcp::McpServerStatus,
    },
}

/// A rule as `ttsr_triggered` carries it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TtsrRule {
    pub name: String,
    /// The rule's file.
    pub path: String,
    /// The rule's markdown body.
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub globs: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_apply: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The regular expression that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// `text`, `thinking`, `tool`; absent: all three.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Vec<&'static str>>,
    /// Always `always`: the stream is stopped as soon as the condition matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupt_mode: Option<&'static str>,
    /// `once` or `gap`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_gap: Option<u64>,
    /// Where the rule came from: `{provider: "gjc", level: "user" | "project"}`.
    #[serde(rename = "_source")]
    pub source: Value,
}

/// Writes a `message_update` event in the reference shape: the partial message as `message` and
/// again as `assistantMessageEvent.partial`. `snapshot` is that message's JSON (with its `role`),
/// serialized once by the caller and copied twice here.
pub fn write_message_update(
    out: &mut Vec<u8>,
    snapshot: &[u8],
    event: &StreamEvent,
) -> serde_json::Result<()> {
    out.extend_from_slice(br#"{"type":"message_update","message":"#);
    out.extend_from_slice(snapshot);
    out.extend_from_slice(br#","assistantMessageEvent":"#);
    serde_json::to_writer(&mut *out, event)?;
    // Reopen the event object (serde_json ends it with `}`) to add its `partial`.
    out.pop();
    out.extend_from_slice(br#","partial":"#);
    out.extend_from_slice(snapshot);
    out.extend_from_slice(b"}}");
    Ok(())
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
            AgentEvent::TtsrTriggered { .. } => "ttsr_triggered",
            AgentEvent::Notice { .. } => "notice",
            AgentEvent::TodoReminder { .. } => "todo_reminder",
            AgentEvent::TodoAutoClear {} => "todo_auto_clear",
            AgentEvent::McpServerState { .. } => "mcp_server_state",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_update_carries_the_snapshot_twice() {
        let mut out = Vec::new();
        let ev = StreamEvent::TextDelta {
            content_index: 0,
            delta: "hi".into(),
        };
        write_message_update(&mut out, br#"{"role":"assistant"}"#, &ev).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"message_update","message":{"role":"assistant"},
                "assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"hi",
                    "partial":{"role":"assistant"}}})
        );
    }

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
            AgentEvent::TodoReminder {
                todos: Vec::new(),
                attempt: 1,
                max_attempts: 3,
            },
            AgentEvent::TodoAutoClear {},
        ];
        for ev in events {
            let v = serde_json::to_value(&ev).unwrap();
            assert_eq!(v["type"], ev.kind());
        }
    }
}
