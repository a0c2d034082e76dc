//! Answers to the agent's callbacks, given as closures: host tool calls (by tool name), host URI
//! requests, UI requests and workflow gates. Any other callback frame plugs in as a
//! [`Callback`]. [`super::RpcClient::serve`] calls them as the frames arrive.

use std::collections::HashMap;
use std::process::ChildStdin;

use serde_json::Value;

use super::ClientError;
use crate::protocol::command::{Command, WorkflowGateResponseParams};
use crate::protocol::frame::{Frame, HostToolCall, HostUriRequest, UiRequestFrame};
use crate::protocol::gate::WorkflowGate;
use crate::protocol::host_reply::{
    HostReply, HostToolResult, HostToolUpdate, HostUriResult, UiResponse,
};
use crate::protocol::message::ToolOutput;

/// What a callback sends back: a host reply, a command (a gate's `workflow_gate_response`), or
/// nothing.
#[derive(Debug, Clone)]
pub enum Answer {
    Reply(HostReply),
    Command(Command),
    Nothing,
}

/// An answer for callback frames the built-in handlers do not cover. `answer` returns `None`
/// for a frame it does not handle, so several can be registered side by side.
///
/// [`Handlers::gate`] covers workflow gates; a `Callback` that recognises `Frame::WorkflowGate`
/// and answers with `Answer::Command(Command::WorkflowGateResponse(..))` replaces it.
pub trait Callback {
    fn answer(&mut self, frame: &Frame) -> Option<Answer>;
}

impl<F: FnMut(&Frame) -> Option<Answer>> Callback for F {
    fn answer(&mut self, frame: &Frame) -> Option<Answer> {
        self(frame)
    }
}

/// What a UI handler decides for a `select`, `confirm`, `input` or `editor` request.
#[derive(Debug, Clone, PartialEq)]
pub enum UiAnswer {
    /// The chosen option or the text entered (`select`, `input`, `editor`).
    Value(Value),
    /// Yes or no (`confirm`).
    Confirmed(bool),
    /// The user dismissed the dialog.
    Cancelled,
}

/// What a URI read or write produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UriContent {
    /// The resource's text (for a read).
    pub content: Option<String>,
    pub content_type: Option<String>,
    /// Lines the agent sees after the content.
    pub notes: Vec<String>,
    /// The resource cannot be written.
    pub immutable: bool,
}

impl UriContent {
    /// Text content of a read.
    pub fn text(content: impl Into<String>) -> UriContent {
        UriContent {
            content: Some(content.into()),
            content_type: Some("text/plain".into()),
            ..UriContent::default()
        }
    }
}

/// Sends `host_tool_update` frames for the call being answered, while its handler runs.
pub struct Progress<'a> {
    stdin: Option<&'a mut ChildStdin>,
    id: &'a str,
}

impl Progress<'_> {
    /// Shows a partial result to the agent (and to the host as `tool_execution_update`).
    pub fn update(&mut self, partial: ToolOutput) -> Result<(), ClientError> {
        let reply = HostReply::ToolUpdate(HostToolUpdate {
            id: self.id.to_string(),
            partial_result: partial,
        });
        let stdin = self.stdin.as_deref_mut().ok_or(ClientError::Closed)?;
        super::write_frame(stdin, &reply)
    }
}

type ToolFn<'a> = Box<dyn FnMut(&HostToolCall, &mut Progress) -> ToolOutput + 'a>;
type UriFn<'a> = Box<dyn FnMut(&HostUriRequest) -> Result<UriContent, String> + 'a>;
type UiFn<'a> = Box<dyn FnMut(&UiRequestFrame) -> UiAnswer + 'a>;
type GateFn<'a> = Box<dyn FnMut(&WorkflowGate) -> Value + 'a>;

/// The closures that answer callbacks. Whatever has no handler gets an answer anyway, so the
/// agent never waits for a host that will not reply: an unknown tool or scheme an error result,
/// a UI question `cancelled`.
///
/// ```
/// use gjc::client::{Handlers, UiAnswer, UriContent};
/// use gjc::protocol::message::ToolOutput;
///
/// let handlers = Handlers::new()
///     .tool("lookup_ticket", |call, progress| {
///         progress.update(ToolOutput::text("querying the tracker")).ok();
///         let id = call.arguments["id"].as_str().unwrap_or("?");
///         ToolOutput::text(format!("{id}: open, assignee Ada"))
///     })
///     .uri(|request| match request.url.as_str() {
///         "db://users/42" => Ok(UriContent::text("id=42\nname=Alice\n")),
///         other => Err(format!("{other} not found")),
///     })
///     .ui(|request| match request.method.as_str() {
///         "confirm" => UiAnswer::Confirmed(true),
///         _ => UiAnswer::Cancelled,
///     });
/// # drop(handlers);
/// ```
#[derive(Default)]
pub struct Handlers<'a> {
    tools: HashMap<String, ToolFn<'a>>,
    uri: Option<UriFn<'a>>,
    ui: Option<UiFn<'a>>,
    gate: Option<GateFn<'a>>,
    others: Vec<Box<dyn Callback + 'a>>,
}

impl<'a> Handlers<'a> {
    pub fn new() -> Handlers<'a> {
        Handlers::default()
    }

    /// Answers `host_tool_call`s of the tool `name` (registered with `set_host_tools`). The
    /// returned output's `is_error` marks a failed call.
    pub fn tool(
        mut self,
        name: &str,
        run: impl FnMut(&HostToolCall, &mut Progress) -> ToolOutput + 'a,
    ) -> Self {
        self.tools.insert(name.to_string(), Box::new(run));
        self
    }

    /// Answers `host_uri_request`s (every scheme registered with `set_host_uri_schemes`); an
    /// `Err` is shown to the agent as the failure.
    pub fn uri(
        mut self,
        run: impl FnMut(&HostUriRequest) -> Result<UriContent, String> + 'a,
    ) -> Self {
        self.uri = Some(Box::new(run));
        self
    }

    /// Answers the UI requests that wait for the user (`select`, `confirm`, `input`,
    /// `editor`). Announcements (`notify`, `setStatus`, ...) are not answered; `serve` hands
    /// them on like events.
    pub fn ui(mut self, run: impl FnMut(&UiRequestFrame) -> UiAnswer + 'a) -> Self {
        self.ui = Some(Box::new(run));
        self
    }

    /// Answers `workflow_gate` frames: the closure returns the answer, sent as a
    /// `workflow_gate_response` with the idempotency key `gate-<gate_id>` (so a resent answer
    /// replays instead of resolving twice). Its response arrives like any other frame; an answer
    /// the gate's schema rejects leaves the gate pending (`data.status:"rejected"`).
    pub fn gate(mut self, run: impl FnMut(&WorkflowGate) -> Value + 'a) -> Self {
        self.gate = Some(Box::new(run));
        self
    }

    /// Adds a handler for other callback frames. It is asked after the built-in ones, in the
    /// order added.
    pub fn on(mut self, callback: impl Callback + 'a) -> Self {
        self.others.push(Box::new(callback));
        self
    }

    /// The answer to `frame`, or `None` when it is not a callback that waits for one.
    pub(super) fn answer(
        &mut self,
        frame: &Frame,
        stdin: Option<&mut ChildStdin>,
    ) -> Option<Answer> {
        match frame {
            Frame::HostToolCall(call) => Some(self.run_tool(call, stdin)),
            Frame::HostUriRequest(request) => Some(self.run_uri(request)),
            Frame::ExtensionUiRequest(request) if request.expects_answer() => {
                Some(self.run_ui(request))
            }
            Frame::WorkflowGate(gate) if self.gate.is_some() => Some(self.run_gate(gate)),
            _ => self.others.iter_mut().find_map(|c| c.answer(frame)),
        }
    }

    fn run_gate(&mut self, gate: &WorkflowGate) -> Answer {
        let run = self.gate.as_mut().expect("checked by the caller");
        Answer::Command(Command::WorkflowGateResponse(WorkflowGateResponseParams {
            gate_id: gate.gate_id.clone(),
            answer: run(gate),
            idempotency_key: Some(format!("gate-{}", gate.gate_id)),
        }))
    }

    fn run_tool(&mut self, call: &HostToolCall, stdin: Option<&mut ChildStdin>) -> Answer {
        let mut progress = Progress {
            stdin,
            id: &call.id,
        };
        let output = match self.tools.get_mut(&call.tool_name) {
            Some(run) => run(call, &mut progress),
            None => ToolOutput::error(format!("this host has no tool {}", call.tool_name)),
        };
        Answer::Reply(HostReply::ToolResult(HostToolResult {
            id: call.id.clone(),
            is_error: output.is_error,
            result: output,
        }))
    }

    fn run_uri(&mut self, request: &HostUriRequest) -> Answer {
        let outcome = match &mut self.uri {
            Some(run) => run(request),
            None => Err(format!("this host serves no URL like {}", request.url)),
        };
        let result = match outcome {
            Ok(c) => HostUriResult {
                id: request.id.clone(),
                content: c.content,
                content_type: c.content_type,
                notes: c.notes,
                immutable: c.immutable,
                ..HostUriResult::default()
            },
            Err(error) => HostUriResult {
                id: request.id.clone(),
                is_error: true,
                error: Some(error),
                ..HostUriResult::default()
            },
        };
        Answer::Reply(HostReply::UriResult(result))
    }

    fn run_ui(&mut self, request: &UiRequestFrame) -> Answer {
        let answer = match &mut self.ui {
            Some(run) => run(request),
            None => UiAnswer::Cancelled,
        };
        let mut response = UiResponse {
            id: request.id.clone(),
            ..UiResponse::default()
        };
        match answer {
            UiAnswer::Value(v) => response.value = Some(v),
            UiAnswer::Confirmed(yes) => response.confirmed = Some(yes),
            UiAnswer::Cancelled => response.cancelled = true,
        }
        Answer::Reply(HostReply::UiResponse(response))
    }
}

/// Writes what a handler decided.
pub(super) fn send_answer(
    stdin: &mut ChildStdin,
    answer: &Answer,
    id: impl FnOnce() -> String,
) -> Result<(), ClientError> {
    match answer {
        Answer::Reply(reply) => super::write_frame(stdin, reply),
        Answer::Command(command) => super::write_frame(stdin, &super::WithId { id: id(), command }),
        Answer::Nothing => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(line: &str) -> Frame {
        Frame::parse(line).unwrap()
    }

    fn reply_json(answer: Option<Answer>) -> Value {
        match answer {
            Some(Answer::Reply(r)) => serde_json::to_value(r).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tools_by_name_and_unknown_tools_fail() {
        let mut h = Handlers::new().tool("t", |call, _| {
            ToolOutput::text(call.arguments["x"].to_string())
        });
        let call = frame(
            r#"{"type":"host_tool_call","id":"h1","toolCallId":"c","toolName":"t","arguments":{"x":1}}"#,
        );
        assert_eq!(
            reply_json(h.answer(&call, None)),
            serde_json::json!({"type":"host_tool_result","id":"h1","result":{"content":[{"type":"text","text":"1"}]}})
        );
        let other = frame(
            r#"{"type":"host_tool_call","id":"h2","toolCallId":"c","toolName":"u","arguments":{}}"#,
        );
        let v = reply_json(h.answer(&other, None));
        assert_eq!(v["isError"], true);
        assert_eq!(v["result"]["content"][0]["text"], "this host has no tool u");
    }

    #[test]
    fn ui_questions_are_answered_and_announcements_are_not() {
        let mut h = Handlers::new().ui(|_| UiAnswer::Confirmed(true));
        let ask =
            frame(r#"{"type":"extension_ui_request","id":"u1","method":"confirm","title":"ok?"}"#);
        assert_eq!(
            reply_json(h.answer(&ask, None)),
            serde_json::json!({"type":"extension_ui_response","id":"u1","confirmed":true})
        );
        let note =
            frame(r#"{"type":"extension_ui_request","id":"u2","method":"notify","message":"hi"}"#);
        assert!(h.answer(&note, None).is_none());
        let mut none = Handlers::new();
        assert_eq!(reply_json(none.answer(&ask, None))["cancelled"], true);
    }

    #[test]
    fn uri_errors_and_other_callbacks() {
        let mut h = Handlers::new()
            .uri(|r| Err(format!("{} missing", r.url)))
            .on(|f: &Frame| matches!(f, Frame::WorkflowGate(_)).then_some(Answer::Nothing));
        let req =
            frame(r#"{"type":"host_uri_request","id":"r1","operation":"read","url":"db://x"}"#);
        let v = reply_json(h.answer(&req, None));
        assert_eq!(
            (v["isError"].clone(), v["error"].clone()),
            (true.into(), "db://x missing".into())
        );
        let gate = frame(GATE);
        assert!(matches!(h.answer(&gate, None), Some(Answer::Nothing)));
    }

    const GATE: &str = r#"{"type":"workflow_gate","gate_id":"wg_1a2b3c4d_ralplan_000001","stage":"ralplan","kind":"approval","schema":{"type":"object"},"schema_hash":"00","context":{"summary":"plan"},"created_at":"2026-01-01T00:00:00.000Z","required":true}"#;

    #[test]
    fn gates_are_answered_with_an_idempotent_response() {
        let mut h = Handlers::new().gate(|g| serde_json::json!({"decision": g.kind}));
        let Some(Answer::Command(command)) = h.answer(&frame(GATE), None) else {
            panic!("a gate gets a command");
        };
        assert_eq!(
            serde_json::to_value(&command).unwrap(),
            serde_json::json!({"type": "workflow_gate_response",
                "gate_id": "wg_1a2b3c4d_ralplan_000001", "answer": {"decision": "approval"},
                "idempotency_key": "gate-wg_1a2b3c4d_ralplan_000001"})
        );
        // Without a gate handler, a gate is left to the caller.
        assert!(Handlers::new().answer(&frame(GATE), None).is_none());
    }
}
