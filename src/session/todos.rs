//! Todo phases: what happens to the list when a run would end: a reminder while tasks are open,
//! a clear once every task is closed. (Validation is the `todo_write` tool's, `tools/todo.rs`.)


use super::SessionLoop;
use crate::protocol::message::{Content, UserMessage};
pub use crate::protocol::reply::{TodoPhase, TodoTask};
use crate::protocol::AgentEvent;
pub use crate::tools::todo::normalize;

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
        let max = crate::settings::get().todo_reminders;
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
