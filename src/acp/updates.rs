//! Pure mapping from the session's typed events and stored messages to ACP `session/update`
//! payloads: message and thought chunks, tool calls with their kind, title, locations and
//! content, and the stop reason of a finished turn. No I/O and no state beyond the arguments.

use std::path::Path;

use agent_client_protocol_schema::v1::{
    ContentBlock, ContentChunk, Diff, ImageContent, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionInfoUpdate, StopReason, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;

use crate::protocol::event::Outcome;
use crate::protocol::message::{
    AgentMessage, Content, StopReason as ModelStop, StreamEvent, ToolOutput,
};
use crate::protocol::reply::TodoPhase;
use crate::protocol::Show;
use crate::tools::paths;

pub use agent_client_protocol_schema::v1::SessionUpdate;

/// Tool output beyond this is cut in what the editor is shown (the model saw all of it).
const MAX_SHOWN: usize = 64 * 1024;

/// A streamed delta as a chunk; `None` for the block boundaries and tool-call deltas (tool
/// calls are announced when they run).
pub fn delta(event: &StreamEvent) -> Option<SessionUpdate> {
    match event {
        StreamEvent::TextDelta { delta, .. } => Some(SessionUpdate::AgentMessageChunk(
            ContentChunk::new(delta.as_str().into()),
        )),
        StreamEvent::ThinkingDelta { delta, .. } => Some(SessionUpdate::AgentThoughtChunk(
            ContentChunk::new(delta.as_str().into()),
        )),
        _ => None,
    }
}

/// How ACP shows what the session shows the user: the todo list as the plan, the session's
/// name as its title. A status line and text for the input box have no ACP form.
pub fn show(show: &Show) -> Option<SessionUpdate> {
    match show {
        Show::Todos(phases) => Some(SessionUpdate::Plan(plan(phases))),
        Show::Title(title) => Some(SessionUpdate::SessionInfoUpdate(
            SessionInfoUpdate::new().title(title.clone()),
        )),
        Show::Status { .. } | Show::EditorText(_) => None,
    }
}

/// Every task of every phase, in order; with several phases each task names its phase. An
/// abandoned task is shown as done (the plan has no such status), and says so.
fn plan(phases: &[TodoPhase]) -> Plan {
    let named = phases.len() > 1;
    let entries = phases
        .iter()
        .flat_map(|phase| {
            phase.tasks.iter().map(move |task| {
                let mut content = if named {
                    format!("{}: {}", phase.name, task.content)
                } else {
                    task.content.clone()
                };
                let status = match task.status.as_str() {
                    "completed" => PlanEntryStatus::Completed,
                    "in_progress" => PlanEntryStatus::InProgress,
                    "abandoned" => {
                        content.push_str(" (abandoned)");
                        PlanEntryStatus::Completed
                    }
                    _ => PlanEntryStatus::Pending,
                };
                PlanEntry::new(content, PlanEntryPriority::Medium, status)
            })
        })
        .collect();
    Plan::new(entries)
}

/// How a tool call is shown: its kind, a short title and the files it touches.
pub struct ToolView {
    pub kind: ToolKind,
    pub title: String,
    pub locations: Vec<ToolCallLocation>,
}

/// Where a call's paths are resolved: the session's cwd and what `~` means there
/// (`Settings::home`).
#[derive(Clone, Copy)]
pub struct Place<'a> {
    pub cwd: &'a Path,
    pub home: Option<&'a Path>,
}

impl Place<'_> {
    fn resolve(self, path: &str) -> std::path::PathBuf {
        paths::resolve(self.cwd, self.home, path)
    }
}

pub fn tool_view(name: &str, args: &Value, place: Place) -> ToolView {
    let arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or("");
    let path = arg("path");
    let location = || -> Vec<ToolCallLocation> {
        if path.is_empty() || paths::url_scheme(path).is_some() {
            return Vec::new();
        }
        let line = args.get("offset").and_then(Value::as_u64).map(|l| l as u32);
        vec![ToolCallLocation::new(place.resolve(path)).line(line)]
    };
    let (kind, title) = match name {
        "read" => (ToolKind::Read, format!("Read {path}")),
        "write" => (ToolKind::Edit, format!("Write {path}")),
        "edit" => (ToolKind::Edit, format!("Edit {path}")),
        "bash" => (ToolKind::Execute, shorten(arg("command"), 120)),
        "grep" => (ToolKind::Search, format!("grep {}", arg("pattern"))),
        "find" => (ToolKind::Search, format!("find {}", arg("pattern"))),
        "ls" => (
            ToolKind::Read,
            format!("List {}", if path.is_empty() { "." } else { path }),
        ),
        "todo_write" => (ToolKind::Think, "Update the todo list".to_string()),
        other => (ToolKind::Other, other.to_string()),
    };
    let locations = match kind {
        ToolKind::Read | ToolKind::Edit => location(),
        _ => Vec::new(),
    };
    ToolView {
        kind,
        title,
        locations,
    }
}

/// The `tool_call` that announces a call.
pub fn tool_call(
    id: &str,
    name: &str,
    args: &Value,
    place: Place,
    status: ToolCallStatus,
) -> ToolCall {
    let view = tool_view(name, args, place);
    ToolCall::new(id.to_string(), view.title)
        .kind(view.kind)
        .status(status)
        .locations(view.locations)
        .raw_input(args.clone())
}

/// The call's fields for a permission request (the client shows them beside the options).
pub fn permission_fields(name: &str, args: &Value, place: Place) -> ToolCallUpdateFields {
    let view = tool_view(name, args, place);
    let mut fields = ToolCallUpdateFields::new()
        .kind(view.kind)
        .title(view.title)
        .status(ToolCallStatus::Pending)
        .locations(view.locations)
        .raw_input(args.clone());
    let diffs = planned_diffs(name, args, place);
    if !diffs.is_empty() {
        fields = fields.content(diffs);
    }
    fields
}

/// A status change without new content.
pub fn status(id: &str, status: ToolCallStatus) -> ToolCallUpdate {
    ToolCallUpdate::new(id.to_string(), ToolCallUpdateFields::new().status(status))
}

/// Partial output of a running call (a command's output so far).
pub fn progress(id: &str, partial: &ToolOutput) -> ToolCallUpdate {
    ToolCallUpdate::new(
        id.to_string(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::InProgress)
            .content(output_content(partial)),
    )
}

/// The end of a call: completed or failed, with diffs for a successful edit or write and the
/// output text otherwise.
pub fn result(
    id: &str,
    name: &str,
    args: &Value,
    place: Place,
    output: &ToolOutput,
    is_error: bool,
) -> ToolCallUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let diffs = if is_error {
        Vec::new()
    } else {
        planned_diffs(name, args, place)
    };
    let content = if diffs.is_empty() {
        output_content(output)
    } else {
        diffs
    };
    ToolCallUpdate::new(
        id.to_string(),
        ToolCallUpdateFields::new()
            .status(status)
            .content(content)
            .raw_output(serde_json::to_value(output).ok()),
    )
}

/// The diffs an edit or write makes, from its arguments: each replaced span for `edit`, the
/// whole new content for `write`.
fn planned_diffs(name: &str, args: &Value, place: Place) -> Vec<ToolCallContent> {
    let Some(path) = args.get("path").and_then(Value::as_str) else {
        return Vec::new();
    };
    if paths::url_scheme(path).is_some() {
        return Vec::new();
    }
    let abs = place.resolve(path);
    match name {
        "write" => args
            .get("content")
            .and_then(Value::as_str)
            .map(|text| vec![Diff::new(abs, text).into()])
            .unwrap_or_default(),
        "edit" => args
            .get("edits")
            .and_then(Value::as_array)
            .map(|edits| {
                edits
                    .iter()
                    .filter_map(|e| {
                        let old = e.get("oldText")?.as_str()?;
                        let new = e.get("newText")?.as_str()?;
                        Some(Diff::new(abs.clone(), new).old_text(old.to_string()).into())
                    })
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// A text as a tool call's content (a permission request's reason).
pub fn text_content(text: &str) -> ToolCallContent {
    ContentBlock::from(shorten(text, MAX_SHOWN)).into()
}

fn output_content(output: &ToolOutput) -> Vec<ToolCallContent> {
    blocks(&output.content)
        .into_iter()
        .map(Into::into)
        .collect()
}

/// Text and images as content blocks; long text is cut at `MAX_SHOWN`.
pub fn blocks(content: &[Content]) -> Vec<ContentBlock> {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text, .. } => Some(shorten(text, MAX_SHOWN).into()),
            Content::Image { data, mime_type } => Some(ContentBlock::Image(ImageContent::new(
                data.clone(),
                mime_type.clone(),
            ))),
            _ => None,
        })
        .collect()
}

fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The stop reason of a finished run, or the error that ended it.
pub fn stop_reason(
    outcome: Outcome,
    messages: &[AgentMessage],
    cancelled: bool,
    error: Option<&str>,
) -> Result<StopReason, String> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    match outcome {
        Outcome::Aborted => Ok(StopReason::Cancelled),
        Outcome::BudgetExceeded => Ok(StopReason::MaxTurnRequests),
        Outcome::Denied => Ok(StopReason::Refusal),
        Outcome::Error => Err(error.unwrap_or("the model request failed").to_string()),
        Outcome::Completed => {
            let last = messages.iter().rev().find_map(|m| match m {
                AgentMessage::Assistant(a) => Some(a.stop_reason),
                _ => None,
            });
            Ok(match last {
                Some(ModelStop::Length) => StopReason::MaxTokens,
                _ => StopReason::EndTurn,
            })
        }
    }
}

/// One stored message as the updates that replay it (`session/load`). Tool calls are replayed
/// as finished calls; their results complete them.
pub fn replay(
    message: &AgentMessage,
    place: Place,
    calls: &mut Vec<(String, String, Value)>,
) -> Vec<SessionUpdate> {
    match message {
        AgentMessage::User(user) => blocks(&user.content)
            .into_iter()
            .map(|b| SessionUpdate::UserMessageChunk(ContentChunk::new(b)))
            .collect(),
        AgentMessage::Assistant(assistant) => assistant
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text, .. } => Some(SessionUpdate::AgentMessageChunk(
                    ContentChunk::new(text.as_str().into()),
                )),
                Content::Thinking { thinking, .. } => Some(SessionUpdate::AgentThoughtChunk(
                    ContentChunk::new(thinking.as_str().into()),
                )),
                Content::ToolCall(call) => {
                    calls.push((call.id.clone(), call.name.clone(), call.arguments.clone()));
                    Some(SessionUpdate::ToolCall(tool_call(
                        &call.id,
                        &call.name,
                        &call.arguments,
                        place,
                        ToolCallStatus::Pending,
                    )))
                }
                _ => None,
            })
            .collect(),
        AgentMessage::ToolResult(r) => {
            let (name, args) = calls
                .iter()
                .find(|(id, _, _)| *id == r.tool_call_id)
                .map(|(_, n, a)| (n.clone(), a.clone()))
                .unwrap_or_else(|| (r.tool_name.clone(), Value::Null));
            let output = ToolOutput {
                content: r.content.clone(),
                details: r.details.clone(),
                is_error: r.is_error,
            };
            vec![SessionUpdate::ToolCallUpdate(result(
                &r.tool_call_id,
                &name,
                &args,
                place,
                &output,
                r.is_error,
            ))]
        }
        AgentMessage::BashExecution(bash) => {
            vec![SessionUpdate::UserMessageChunk(ContentChunk::new(
                format!("$ {}\n{}", bash.command, shorten(&bash.output, MAX_SHOWN)).into(),
            ))]
        }
        AgentMessage::CompactionSummary(summary) => vec![SessionUpdate::AgentMessageChunk(
            ContentChunk::new(summary_text(summary).into()),
        )],
    }
}

fn summary_text(summary: &crate::protocol::message::CompactionSummaryMessage) -> String {
    format!("(Earlier conversation, summarised)\n{}", summary.summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_get_their_kind_title_and_location() {
        let cwd = Place {
            cwd: Path::new("/p"),
            home: None,
        };
        let v = tool_view("read", &json!({"path": "src/a.rs", "offset": 3}), cwd);
        assert_eq!(v.kind, ToolKind::Read);
        assert_eq!(v.title, "Read src/a.rs");
        let loc = serde_json::to_value(&v.locations).unwrap();
        assert_eq!(loc, json!([{"path": "/p/src/a.rs", "line": 3}]));
        let v = tool_view("bash", &json!({"command": "ls -la"}), cwd);
        assert_eq!((v.kind, v.title.as_str()), (ToolKind::Execute, "ls -la"));
        assert!(v.locations.is_empty());
    }

    #[test]
    fn an_edit_result_carries_its_diffs() {
        let args = json!({"path": "a.txt", "edits": [{"oldText": "x", "newText": "y"}]});
        let update = result(
            "c1",
            "edit",
            &args,
            Place {
                cwd: Path::new("/p"),
                home: None,
            },
            &ToolOutput::text("ok"),
            false,
        );
        let value = serde_json::to_value(&update).unwrap();
        assert_eq!(value["status"], "completed");
        assert_eq!(
            value["content"][0],
            json!({"type": "diff", "path": "/p/a.txt", "oldText": "x", "newText": "y"})
        );
    }

    #[test]
    fn todos_become_the_plan() {
        let phases: Vec<TodoPhase> = serde_json::from_value(json!([
            {"id": "p1", "name": "Build", "tasks": [
                {"id": "t1", "content": "write code", "status": "completed"},
                {"id": "t2", "content": "test it", "status": "in_progress"}]},
            {"id": "p2", "name": "Ship", "tasks": [
                {"id": "t3", "content": "old idea", "status": "abandoned"}]}
        ]))
        .unwrap();
        let update = show(&Show::Todos(phases)).unwrap();
        let value = serde_json::to_value(&update).unwrap();
        assert_eq!(value["sessionUpdate"], "plan");
        assert_eq!(value["entries"][0]["content"], "Build: write code");
        assert_eq!(value["entries"][1]["status"], "in_progress");
        assert_eq!(value["entries"][2]["content"], "Ship: old idea (abandoned)");
        assert!(show(&Show::EditorText("x".into())).is_none());
    }

    #[test]
    fn stop_reasons_follow_the_outcome() {
        let cases = [
            (Outcome::Completed, false, Ok(StopReason::EndTurn)),
            (Outcome::Completed, true, Ok(StopReason::Cancelled)),
            (Outcome::Aborted, false, Ok(StopReason::Cancelled)),
            (Outcome::Denied, false, Ok(StopReason::Refusal)),
            (
                Outcome::BudgetExceeded,
                false,
                Ok(StopReason::MaxTurnRequests),
            ),
            (Outcome::Error, false, Err("boom".to_string())),
        ];
        for (outcome, cancelled, want) in cases {
            assert_eq!(stop_reason(outcome, &[], cancelled, Some("boom")), want);
        }
    }
}
