//! Todo phases: what happens to the list when a run would end: a reminder while tasks are open,
//! a clear once every task is closed. (Validation is the `todo_write` tool's, `tools/todo.rs`.)

use std::sync::OnceLock;

use super::SessionLoop;
use crate::protocol::message::{Content, UserMessage};
pub use crate::protocol::reply::{TodoPhase, TodoTask};
use crate::protocol::AgentEvent;
pub use crate::tools::todo::normalize;

/// Reminders per run unless `GJC_TODO_REMINDERS` says otherwise.
pub const DEFAULT_REMINDERS: u32 = 3;
/// The most reminders a run can be configured to get: each one costs a model turn.
pub const MAX_REMINDERS: u32 = 10;

static REMINDERS: OnceLock<u32> = OnceLock::new();

/// `--no-todo-reminders`: no reminders in this process (called before the session starts).
pub fn disable_reminders() {
    let _ = REMINDERS.set(0);
}

/// Reminders per run: `--no-todo-reminders`, else `GJC_TODO_REMINDERS` (`0`/`off`/`false` turns
/// them off, a number sets the count, capped at [`MAX_REMINDERS`]), else [`DEFAULT_REMINDERS`].
pub fn max_reminders() -> u32 {
    *REMINDERS.get_or_init(|| {
        let setting = std::env::var("GJC_TODO_REMINDERS").ok();
        parse_reminders(setting.as_deref()).unwrap_or_else(|e| {
            log::warn!("{e}; using {DEFAULT_REMINDERS}");
            DEFAULT_REMINDERS
        })
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
        let max = max_reminders();
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
