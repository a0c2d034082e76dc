//! Todo phases: validation and normalization for `set_todos` and the `todo_write` tool, and what
//! happens to the list when a run would end: a reminder while tasks are open, a clear once every
//! task is closed.

use serde_json::Value;

use super::SessionLoop;
use crate::protocol::message::{Content, UserMessage};
pub use crate::protocol::reply::{TodoPhase, TodoTask};
use crate::protocol::AgentEvent;

/// Reminders per run unless `GJC_TODO_REMINDERS` says otherwise.
pub const DEFAULT_REMINDERS: u32 = 3;
/// The most reminders a run can be configured to get: each one costs a model turn.
pub const MAX_REMINDERS: u32 = 10;

/// Reminders per run for a new session: none with `--no-todo-reminders` (`disabled`), else
/// `GJC_TODO_REMINDERS` (`0`/`off`/`false` turns them off, a number sets the count, capped at
/// [`MAX_REMINDERS`]), else [`DEFAULT_REMINDERS`]. Resolved once at start and handed to each
/// session in its `ProjectOptions`: no session reads a process-wide switch.
pub fn reminders_setting(disabled: bool) -> u32 {
    if disabled {
        return 0;
    }
    let setting = std::env::var("GJC_TODO_REMINDERS").ok();
    parse_reminders(setting.as_deref()).unwrap_or_else(|e| {
        log::warn!("{e}; using {DEFAULT_REMINDERS}");
        DEFAULT_REMINDERS
    })
}

fn parse_reminders(setting: Option<&str>) -> Result<u32, String> {
    let Some(v) = setting.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_REMINDERS);
    };
    match v.to_ascii_lowercase().as_str() {
        "off" | "false" | "no" => Ok(0),
        "on" | "true" | "yes" => Ok(DEFAULT_REMINDERS),
        n => n
            .parse::<u32>()
            .map(|n| n.min(MAX_REMINDERS))
            .map_err(|_| format!("GJC_TODO_REMINDERS={v:?} is not a number, on or off")),
    }
}

/// Tasks still to do: `pending` or `in_progress`.
pub fn open_tasks(phases: &[TodoPhase]) -> Vec<TodoTask> {
    phases
        .iter()
        .flat_map(|p| &p.tasks)
        .filter(|t| matches!(t.status.as_str(), "pending" | "in_progress"))
        .cloned()
        .collect()
}

/// A list with tasks, none of them open (each `completed` or `abandoned`).
pub fn all_closed(phases: &[TodoPhase]) -> bool {
    let mut tasks = phases.iter().flat_map(|p| &p.tasks).peekable();
    tasks.peek().is_some() && open_tasks(phases).is_empty()
}

/// The text the model sees when it stops with open tasks.
pub fn reminder_text(open: &[TodoTask]) -> String {
    let mut text = String::from("You stopped, but your todo list still has open tasks:\n");
    for t in open {
        text.push_str(&format!("- [{}] {}\n", t.status, t.content));
    }
    text.push_str(
        "Continue with them now. If a task is done, no longer needed or cannot be done, update \
the list with todo_write (status completed or abandoned) and say why.",
    );
    text
}

impl SessionLoop {
    /// When a run would end with open tasks and reminders are left for it: `todo_reminder`, and
    /// the reminder message to continue the run with.
    pub(super) fn todo_reminder(&mut self) -> Option<UserMessage> {
        let max = self.state.project.todo_reminders;
        let open = open_tasks(&self.state.todos);
        let run = self.run.as_mut()?;
        if open.is_empty() || run.todo_reminders >= max {
            return None;
        }
        run.todo_reminders += 1;
        let attempt = run.todo_reminders;
        let text = reminder_text(&open);
        self.emit(AgentEvent::TodoReminder {
            todos: open,
            attempt,
            max_attempts: max,
        });
        Some(UserMessage {
            content: vec![Content::text(&text)],
            attribution: Some("agent".into()),
            timestamp: crate::ids::now_ms(),
        })
    }

    /// At the end of a run, a list whose every task is closed is cleared (`todo_auto_clear`, and
    /// the widget emptied), so the next task starts with a clean list.
    pub(super) fn clear_finished_todos(&mut self) {
        if !all_closed(&self.state.todos) {
            return;
        }
        self.state.todos.clear();
        self.emit(AgentEvent::TodoAutoClear {});
        self.show_todos();
    }
}

pub const STATUSES: &[&str] = &["pending", "in_progress", "completed", "abandoned"];

/// Validates and normalizes phases. Ids are kept when given (the seed's examples carry them) and
/// assigned as `phase-N` / `task-N` when missing; names and contents are trimmed.
pub fn normalize(phases: &[Value]) -> Result<Vec<TodoPhase>, String> {
    let mut task_no = 0;
    phases
        .iter()
        .enumerate()
        .map(|(i, phase)| {
            let at = format!("phases[{i}]");
            let obj = phase.as_object().ok_or(format!("{at} must be an object"))?;
            let name = required_str(obj.get("name"), &format!("{at}.name"))?;
            let id = optional_id(obj.get("id"), &format!("{at}.id"))?
                .unwrap_or(format!("phase-{}", i + 1));
            let tasks = obj
                .get("tasks")
                .map(|t| t.as_array().ok_or(format!("{at}.tasks must be an array")))
                .transpose()?
                .map(|tasks| {
                    tasks
                        .iter()
                        .enumerate()
                        .map(|(j, task)| {
                            task_no += 1;
                            normalize_task(task, &format!("{at}.tasks[{j}]"), task_no)
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?
                .unwrap_or_default();
            Ok(TodoPhase { id, name, tasks })
        })
        .collect()
}

fn normalize_task(task: &Value, at: &str, n: usize) -> Result<TodoTask, String> {
    let obj = task.as_object().ok_or(format!("{at} must be an object"))?;
    let content = required_str(obj.get("content"), &format!("{at}.content"))?;
    let status = match obj.get("status") {
        None | Some(Value::Null) => "pending".to_string(),
        Some(Value::String(s)) if STATUSES.contains(&s.as_str()) => s.clone(),
        Some(other) => {
            return Err(format!(
                "{at}.status must be one of {}, got {other}",
                STATUSES.join(", ")
            ))
        }
    };
    let notes = optional_text(obj.get("notes"), &format!("{at}.notes"))?;
    let details = optional_text(obj.get("details"), &format!("{at}.details"))?;
    let id = optional_id(obj.get("id"), &format!("{at}.id"))?.unwrap_or(format!("task-{n}"));
    Ok(TodoTask {
        id,
        content,
        status,
        notes,
        details,
    })
}

/// Notes and details are text. A list of lines (an older form) is joined with newlines.
fn optional_text(v: Option<&Value>, at: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(items)) => items
            .iter()
            .map(|n| n.as_str().ok_or(format!("{at} must hold strings")))
            .collect::<Result<Vec<_>, _>>()
            .map(|lines| Some(lines.join("\n"))),
        Some(_) => Err(format!("{at} must be a string")),
    }
}

fn required_str(v: Option<&Value>, at: &str) -> Result<String, String> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) => Err(format!("{at} must not be empty")),
        Some(_) => Err(format!("{at} must be a string")),
        None => Err(format!("{at} is required")),
    }
}

fn optional_id(v: Option<&Value>, at: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Some(_) => Err(format!("{at} must be a non-empty string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalizes_and_assigns_ids() {
        let phases = normalize(&[json!({"name":" Plan ","tasks":[{"content":"a"},{"id":"t9","content":"b","status":"completed","notes":["n"]}]})]).unwrap();
        assert_eq!(phases[0].id, "phase-1");
        assert_eq!(phases[0].name, "Plan");
        assert_eq!(phases[0].tasks[0].id, "task-1");
        assert_eq!(phases[0].tasks[0].status, "pending");
        assert_eq!(phases[0].tasks[1].id, "t9");
        assert_eq!(phases[0].tasks[1].notes.as_deref(), Some("n"));
    }

    #[test]
    fn rejects_bad_status_and_missing_content() {
        let err = normalize(&[json!({"name":"p","tasks":[{"content":"a","status":"done"}]})])
            .unwrap_err();
        assert!(
            err.starts_with("phases[0].tasks[0].status must be one of"),
            "{err}"
        );
        let err = normalize(&[json!({"name":"p","tasks":[{}]})]).unwrap_err();
        assert_eq!(err, "phases[0].tasks[0].content is required");
        assert!(normalize(&[json!(3)]).is_err());
    }

    #[test]
    fn reminder_setting_parses() {
        assert_eq!(parse_reminders(None), Ok(DEFAULT_REMINDERS));
        assert_eq!(parse_reminders(Some("off")), Ok(0));
        assert_eq!(parse_reminders(Some("0")), Ok(0));
        assert_eq!(parse_reminders(Some(" 2 ")), Ok(2));
        assert_eq!(parse_reminders(Some("99")), Ok(MAX_REMINDERS));
        assert!(parse_reminders(Some("lots")).is_err());
    }

    #[test]
    fn open_and_closed_tasks() {
        let phases = normalize(&[json!({"name":"p","tasks":[
            {"content":"a","status":"completed"},{"content":"b","status":"in_progress"},
            {"content":"c","status":"abandoned"},{"content":"d"}]})])
        .unwrap();
        let open: Vec<_> = open_tasks(&phases).into_iter().map(|t| t.content).collect();
        assert_eq!(open, ["b", "d"]);
        assert!(!all_closed(&phases));
        let done = normalize(&[json!({"name":"p","tasks":[
            {"content":"a","status":"completed"},{"content":"c","status":"abandoned"}]})])
        .unwrap();
        assert!(all_closed(&done));
        assert!(!all_closed(&normalize(&[json!({"name":"empty"})]).unwrap()));
        assert!(!all_closed(&[]));
        let text = reminder_text(&open_tasks(&phases));
        assert!(
            text.contains("- [in_progress] b\n- [pending] d\n"),
            "{text}"
        );
    }
}
