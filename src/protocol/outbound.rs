//! Everything the agent writes to stdout, as typed values. Only `transport/stdout.rs` turns these
//! into bytes.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::event::AgentEvent;

/// The version of this protocol, in `ready` and in every event envelope.
pub const PROTOCOL_VERSION: u32 = 2;

/// Optional features this build serves, listed in `ready` so hosts can feature-detect.
pub const CAPABILITIES: &[&str] = &[
    "compact_message_update",
    "host_tools",
    "host_uris",
    "extension_ui",
    "session_registry",
];

/// The first frame: `{"type":"ready","version":...,"protocol_version":2,"capabilities":[...]}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Ready {
    #[serde(rename = "type")]
    #[schemars(extend("const" = "ready"))]
    kind: &'static str,
    version: &'static str,
    protocol_version: u32,
    capabilities: &'static [&'static str],
}

impl Ready {
    pub fn new() -> Ready {
        Ready {
            kind: "ready",
            version: env!("CARGO_PKG_VERSION"),
            protocol_version: PROTOCOL_VERSION,
            capabilities: CAPABILITIES,
        }
    }
}

impl Default for Ready {
    fn default() -> Ready {
        Ready::new()
    }
}

#[derive(Debug, Clone)]
pub enum Outbound {
    Ready,
    Response(Response),
    /// Boxed: events are large and frequent; the other frames are small.
    Event(Box<AgentEvent>),
    Frame(FlatFrame),
    /// Something for the user to see, typed: each front end renders it in its own vocabulary
    /// (RPC as fire-and-forget `extension_ui_request` frames, ACP as `session/update`s).
    Show(Show),
    /// A command for the front end's own terminal; only front ends that offer one get these.
    Terminal(super::terminal::TerminalFrame),
}

/// What the session shows the user besides the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Show {
    /// A status line under `key` (a retry's countdown, a compaction); `None` clears it.
    Status {
        key: &'static str,
        text: Option<String>,
    },
    /// The todo list, whole.
    Todos(Vec<super::reply::TodoPhase>),
    /// The session's name.
    Title(String),
    /// Text to put back into the user's input box (a branched message).
    EditorText(String),
}

/// `{id?, type:"response", command, success, data? | error}`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Response {
    /// The command's `id`, echoed as it came (any JSON value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    #[serde(rename = "type")]
    #[schemars(extend("const" = "response"))]
    pub kind: &'static str,
    pub command: String,
    pub success: bool,
    /// Serialized once, by the thread that built it (large payloads such as `get_messages` never
    /// exist as a JSON tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "Option<serde_json::Map<String, Value>>",
        description = "The command's payload, by command: see responses.json."
    )]
    pub data: Option<Data>,
    /// Always a string: published clients show any other JSON as language-specific repr text.
    /// A machine-readable code travels as the text's prefix (`code: message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With some typed errors (the unattended control plane's `scope_denied`, `action_denied`,
    /// `budget_exceeded`): the error as an object, `code` first, beside the `code: message` text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_details: Option<Value>,
}

/// A response payload, already JSON text.
#[derive(Debug, Clone)]
pub enum Data {
    /// Text serde_json produced or checked.
    Checked(Box<RawValue>),
    /// Text gjc put together from pieces it checked earlier: messages copied from a session file
    /// that was validated when it was loaded and has not changed since. Checking megabytes again
    /// would cost more than the copy.
    Assembled(String),
}

impl Data {
    pub fn get(&self) -> &str {
        match self {
            Data::Checked(raw) => raw.get(),
            Data::Assembled(text) => text,
        }
    }
}

impl Serialize for Data {
    /// The stdout writer writes assembled payloads itself; anything else serializing one gets
    /// it checked on the way.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Data::Checked(raw) => raw.serialize(s),
            Data::Assembled(text) => serde_json::from_str::<&RawValue>(text)
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
        }
    }
}

impl Response {
    /// A success whose payload is serialized here, once. Payloads are objects (or absent):
    /// hosts reject any other JSON type as `data`.
    pub fn ok<T: Serialize + ?Sized>(
        id: Option<Value>,
        command: &str,
        data: Option<&T>,
    ) -> Response {
        let data = data.and_then(|d| serde_json::value::to_raw_value(d).ok());
        Response::ok_raw(id, command, data.map(Data::Checked))
    }

    /// A success without a payload.
    pub fn done(id: Option<Value>, command: &str) -> Response {
        Response::ok_raw(id, command, None)
    }

    /// A success whose payload is already serialized.
    pub fn ok_raw(id: Option<Value>, command: &str, data: Option<Data>) -> Response {
        Response {
            id,
            kind: "response",
            command: command.to_string(),
            success: true,
            data,
            error: None,
            error_details: None,
        }
    }

    /// The response without its `data`, for writers that append a large payload themselves.
    pub fn head(&self) -> impl Serialize + '_ {
        #[derive(Serialize)]
        struct Head<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            id: &'a Option<Value>,
            #[serde(rename = "type")]
            kind: &'static str,
            command: &'a str,
            success: bool,
        }
        Head {
            id: &self.id,
            kind: self.kind,
            command: &self.command,
            success: self.success,
        }
    }

    pub fn err(id: Option<Value>, command: &str, error: impl Into<ErrorValue>) -> Response {
        Response {
            id,
            kind: "response",
            command: command.to_string(),
            success: false,
            data: None,
            error: Some(error.into().0),
            error_details: None,
        }
    }

    /// A failure whose typed error also travels as an object (`error_details`).
    pub fn err_detailed(
        id: Option<Value>,
        command: &str,
        error: TypedError,
        details: Value,
    ) -> Response {
        Response {
            error_details: Some(details),
            ..Response::err(id, command, error)
        }
    }
}

/// A response error's text: a plain message, or a typed error written `code: message`.
pub struct ErrorValue(pub String);

impl From<String> for ErrorValue {
    fn from(s: String) -> ErrorValue {
        ErrorValue(s)
    }
}

impl From<&str> for ErrorValue {
    fn from(s: &str) -> ErrorValue {
        ErrorValue(s.to_string())
    }
}

impl From<TypedError> for ErrorValue {
    fn from(e: TypedError) -> ErrorValue {
        ErrorValue(format!("{}: {}", e.code, e.message))
    }
}

/// An error with a machine-readable code, such as `not_supported: handoff is not available`.
#[derive(Debug)]
pub struct TypedError {
    pub code: &'static str,
    pub message: String,
}

impl TypedError {
    pub fn not_supported(command: &str, why: &str) -> TypedError {
        TypedError {
            code: "not_supported",
            message: format!("{command} is not supported: {why}"),
        }
    }
}

/// The flat (non-event) frames of the host sub-protocols.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FlatFrame {
    WorkflowGate(super::gate::WorkflowGate),
    ExtensionUiRequest(UiRequest),
    ExtensionError {
        #[serde(rename = "extensionPath")]
        extension_path: String,
        event: String,
        error: String,
    },
    HostToolCall {
        id: String,
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        arguments: Value,
    },
    HostToolCancel {
        id: String,
        #[serde(rename = "targetId")]
        target_id: String,
    },
    HostUriRequest {
        id: String,
        operation: &'static str,
        url: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<String>,
    },
    HostUriCancel {
        id: String,
        #[serde(rename = "targetId")]
        target_id: String,
    },
}

/// `{type:"extension_ui_request", id, method, ...method fields}`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct UiRequest {
    pub id: String,
    pub method: &'static str,
    #[serde(flatten)]
    pub fields: serde_json::Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_shapes() {
        let ok = Response::done(Some(Value::from("r1")), "get_state");
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"id":"r1","type":"response","command":"get_state","success":true}"#
        );
        let err = Response::err(None, "parse", "bad");
        assert_eq!(
            serde_json::to_string(&err).unwrap(),
            r#"{"type":"response","command":"parse","success":false,"error":"bad"}"#
        );
    }

    #[test]
    fn flat_frames_are_tagged() {
        let f = FlatFrame::HostToolCancel {
            id: "c".into(),
            target_id: "t".into(),
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"type":"host_tool_cancel","id":"c","targetId":"t"}"#
        );
    }
}
