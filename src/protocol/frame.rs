//! Everything gjc writes, as a host reads it. The agent's own outbound types (`outbound.rs`,
//! `event.rs`) are written, never read back: they borrow static strings, and the stdout writer
//! adds parts itself (the event envelope, the `message_update` snapshot). These are their
//! deserializable forms, for `gjc::client` and for the tests that check every frame gjc emits.
//!
//! Unknown fields are ignored; an event type this build does not know reads as
//! [`Event::Unknown`], so a host built against this crate keeps working with a newer gjc.

use serde::Deserialize;
use serde_json::Value;

use super::event::Outcome;
use super::message::{AgentMessage, ToolCall, ToolOutput};
use super::reply::TodoTask;

/// One line of gjc's stdout.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    Ready(ReadyFrame),
    Response(ResponseFrame),
    /// Boxed: events are large, the other frames small.
    Event(Box<EventFrame>),
    ExtensionUiRequest(UiRequestFrame),
    ExtensionError(ExtensionErrorFrame),
    HostToolCall(HostToolCall),
    HostToolCancel(HostCancel),
    HostUriRequest(HostUriRequest),
    HostUriCancel(HostCancel),
    /// A workflow gate: the agent waits for a `workflow_gate_response` command.
    WorkflowGate(Box<super::gate::WorkflowGate>),
}

impl Frame {
    /// Reads one line. An unknown frame type is an error, like any other malformed line.
    pub fn parse(line: &str) -> serde_json::Result<Frame> {
        serde_json::from_str(line)
    }

    /// The inner event, for event frames.
    pub fn event(&self) -> Option<&Event> {
        match self {
            Frame::Event(e) => e.payload.event.as_ref(),
            _ => None,
        }
    }
}

/// `ready`: the first frame.
#[derive(Debug, Clone, Deserialize)]
pub struct ReadyFrame {
    pub version: String,
    pub protocol_version: u32,
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// `response`: the answer to one command.
#[derive(Debug, Clone, Deserialize)]
pub struct ResponseFrame {
    /// The command's `id`, as it was sent.
    #[serde(default)]
    pub id: Option<Value>,
    pub command: String,
    pub success: bool,
    /// The payload; [`ResponseFrame::data_as`] reads it into a type.
    #[serde(default)]
    pub data: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
}

impl ResponseFrame {
    /// The payload read as `T` (`null` when the response has none). A refused command is an
    /// error carrying its `error` text.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, DataError> {
        if !self.success {
            return Err(DataError::Refused {
                command: self.command.clone(),
                error: self.error.clone(),
            });
        }
        let data = self.data.as_ref().unwrap_or(&Value::Null);
        T::deserialize(data).map_err(|error| DataError::Payload {
            command: self.command.clone(),
            error,
        })
    }
}

/// Why a response's payload could not be had.
#[derive(Debug)]
pub enum DataError {
    /// The command failed; `error` is the response's text, if it gave one.
    Refused {
        command: String,
        error: Option<String>,
    },
    /// The payload is not of the type asked for.
    Payload {
        command: String,
        error: serde_json::Error,
    },
}

impl std::fmt::Display for DataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataError::Refused { command, error } => write!(
                f,
                "{command} failed: {}",
                error.as_deref().unwrap_or("no reason given")
            ),
            DataError::Payload { command, error } => write!(f, "{command} payload: {error}"),
        }
    }
}

impl std::error::Error for DataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DataError::Payload { error, .. } => Some(error),
            DataError::Refused { .. } => None,
        }
    }
}

/// `event`: one agent event in its envelope.
#[derive(Debug, Clone, Deserialize)]
pub struct EventFrame {
    pub protocol_version: u32,
    pub session_id: String,
    /// Counts event frames from 1, in the order written.
    pub seq: u64,
    pub frame_id: String,
    pub payload: EventPayload,
}

/// An event frame's payload: the event, or (with the `compact_message_update` capability) a
/// `message_update` that carries only its delta.
#[derive(Debug, Clone, Deserialize)]
pub struct EventPayload {
    pub event_type: String,
    /// Absent in a compact `message_update`.
    #[serde(default)]
    pub event: Option<Event>,
    #[serde(default)]
    pub compact: bool,
    /// A compact update's block index.
    #[serde(default)]
    pub content_index: Option<usize>,
    /// A compact update's delta.
    #[serde(default, rename = "assistantMessageEvent")]
    pub assistant_message_event: Option<Delta>,
}

/// An agent event (`payload.event`); the variants and fields of docs/schema/events.json.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    AgentStart {},
    AgentEnd {
        messages: Vec<AgentMessage>,
        stop_reason: String,
        outcome: Outcome,
        #[serde(default)]
        error_message: Option<String>,
    },
    TurnStart {},
    TurnEnd {
        message: AgentMessage,
        tool_results: Vec<AgentMessage>,
    },
    MessageStart {
        message: AgentMessage,
    },
    MessageUpdate {
        /// The partial message so far.
        message: AgentMessage,
        assistant_message_event: Delta,
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
        reason: String,
        action: String,
    },
    AutoCompactionEnd {
        action: String,
        /// `{summary, firstKeptEntryId, tokensBefore, details?}` when compaction ran.
        #[serde(default)]
        result: Option<Value>,
        aborted: bool,
        will_retry: bool,
        #[serde(default)]
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
        #[serde(default)]
        final_error: Option<String>,
    },
    ThinkingLevelChanged {
        thinking_level: String,
    },
    /// Conditional rules matched; each rule is `{name, path, content, ...}`.
    TtsrTriggered {
        rules: Vec<Value>,
    },
    Notice {
        level: String,
        message: String,
        #[serde(default)]
        source: Option<String>,
    },
    TodoReminder {
        todos: Vec<TodoTask>,
        attempt: u32,
        max_attempts: u32,
    },
    TodoAutoClear {},
    /// An MCP server of the session changed state (`state`: starting, ready, failed, stopped).
    McpServerState {
        name: String,
        state: String,
        #[serde(default)]
        tools: Option<usize>,
        #[serde(default)]
        reason: Option<String>,
    },
    /// An event type newer than this build.
    #[serde(other)]
    Unknown,
}

/// One streamed delta (`assistantMessageEvent`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Delta {
    TextStart {
        content_index: usize,
    },
    TextDelta {
        content_index: usize,
        delta: String,
    },
    /// `content` is the block's whole text.
    TextEnd {
        content_index: usize,
        content: String,
    },
    ThinkingStart {
        content_index: usize,
    },
    ThinkingDelta {
        content_index: usize,
        delta: String,
    },
    ThinkingEnd {
        content_index: usize,
        content: String,
    },
    ToolcallStart {
        content_index: usize,
    },
    ToolcallDelta {
        content_index: usize,
        delta: String,
    },
    ToolcallEnd {
        content_index: usize,
        tool_call: ToolCall,
    },
    /// A delta type newer than this build.
    #[serde(other)]
    Unknown,
}

/// `extension_ui_request`: `method` says what is asked (`select`, `confirm`, `input`, `editor`)
/// or announced (`notify`, `setStatus`, `setTitle`, ...); the other fields depend on it.
#[derive(Debug, Clone, Deserialize)]
pub struct UiRequestFrame {
    pub id: String,
    pub method: String,
    #[serde(flatten)]
    pub fields: serde_json::Map<String, Value>,
}

impl UiRequestFrame {
    /// Whether the agent waits for an `extension_ui_response` (the other methods announce).
    pub fn expects_answer(&self) -> bool {
        matches!(
            self.method.as_str(),
            "select" | "confirm" | "input" | "editor"
        )
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionErrorFrame {
    pub extension_path: String,
    pub event: String,
    pub error: String,
}

/// `host_tool_call`: run a tool the host registered with `set_host_tools`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostToolCall {
    pub id: String,
    pub tool_call_id: String,
    pub tool_name: String,
    pub arguments: Value,
}

/// `host_tool_cancel` / `host_uri_cancel`: the call `target_id` is no longer wanted.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCancel {
    pub id: String,
    pub target_id: String,
}

/// `host_uri_request`: read (or, for a writable scheme, write) a URL of a scheme the host
/// registered with `set_host_uri_schemes`.
#[derive(Debug, Clone, Deserialize)]
pub struct HostUriRequest {
    pub id: String,
    /// `read` or `write`.
    pub operation: String,
    pub url: String,
    /// What to write, for `write`.
    #[serde(default)]
    pub content: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_event_frame() {
        let line = r#"{"type":"event","protocol_version":2,"session_id":"s","seq":3,"frame_id":"f","payload":{"event_type":"tool_execution_end","event":{"type":"tool_execution_end","toolCallId":"c","toolName":"read","result":{"content":[{"type":"text","text":"hi"}]},"isError":false}}}"#;
        let frame = Frame::parse(line).unwrap();
        match frame.event() {
            Some(Event::ToolExecutionEnd {
                tool_name, result, ..
            }) => {
                assert_eq!(tool_name, "read");
                assert_eq!(result.content.len(), 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_a_compact_update_and_unknown_events() {
        let line = r#"{"type":"event","protocol_version":2,"session_id":"s","seq":1,"frame_id":"f","payload":{"event_type":"message_update","compact":true,"message_id":null,"content_index":0,"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"x"}}}"#;
        let Frame::Event(e) = Frame::parse(line).unwrap() else {
            panic!("an event frame")
        };
        assert!(e.payload.compact && e.payload.event.is_none());
        assert_eq!(
            e.payload.assistant_message_event,
            Some(Delta::TextDelta {
                content_index: 0,
                delta: "x".into()
            })
        );
        let newer = r#"{"type":"event","protocol_version":2,"session_id":"s","seq":2,"frame_id":"g","payload":{"event_type":"later","event":{"type":"later","x":1}}}"#;
        assert!(matches!(
            Frame::parse(newer).unwrap().event(),
            Some(Event::Unknown)
        ));
    }

    #[test]
    fn response_payloads_read_into_types() {
        let ok: ResponseFrame = serde_json::from_str(
            r#"{"id":"r1","type":"response","command":"get_last_assistant_text","success":true,"data":{"text":"hi"}}"#,
        )
        .unwrap();
        let data: serde_json::Map<String, Value> = ok.data_as().unwrap();
        assert_eq!(data["text"], "hi");
        let refused: ResponseFrame = serde_json::from_str(
            r#"{"type":"response","command":"set_model","success":false,"error":"no such model"}"#,
        )
        .unwrap();
        let e = refused.data_as::<Value>().unwrap_err();
        assert_eq!(e.to_string(), "set_model failed: no such model");
        assert!(
            matches!(&e, DataError::Refused { command, error: Some(t) } if command == "set_model" && t == "no such model")
        );
        let e = ok.data_as::<Vec<u8>>().unwrap_err();
        assert!(
            matches!(&e, DataError::Payload { command, .. } if command == "get_last_assistant_text")
        );
        assert!(
            e.to_string()
                .starts_with("get_last_assistant_text payload: "),
            "{e}"
        );
    }
}
