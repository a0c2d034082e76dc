//! `todo_write`: the model replaces the todo phases (`get_state.todoPhases`). The tool validates
//! and normalizes (`set_todos` uses the same), and its outcome carries the new list as
//! `ToolEffect::SetTodos`, which the session applies; the result's details show it too.

use serde_json::{json, Value};

use super::{Outcome, Tool, ToolContext, ToolEffect};
use crate::protocol::message::ToolOutput;
use crate::protocol::reply::{TodoPhase, TodoTask};

pub struct TodoWrite;

impl Tool for TodoWrite {
    fn name(&self) -> &'static str {
        "todo_write"
    }

    fn description(&self) -> String {
        "Replace the todo list: phases, each with tasks whose status is pending, in_progress, completed or abandoned. Send the whole list every time.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "phases": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "tasks": {"type": "array", "items": {
                                "type": "object",
                                "properties": {
                                    "content": {"type": "string"},
                                    "status": {"type": "string", "enum": STATUSES},
                                    "notes": {"type": "string"},
                                    "details": {"type": "string"}
                                },
                                "required": ["content", "status"]
                            }}
                        },
                        "required": ["name", "tasks"]
                    }
                }
            },
            "required": ["phases"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        self.run(args, ctx).output
    }

    fn run(&self, args: &Value, _ctx: &ToolContext) -> Outcome {
        let phases = args["phases"].as_array().cloned().unwrap_or_default();
        let phases = match normalize(&phases) {
            Ok(phases) => phases,
            Err(e) => return ToolOutput::error(e).into(),
        };
        let output =
            ToolOutput::text(listing(&phases)).with_details(json!({ "todoPhases": phases }));
        Outcome {
            output,
            effects: vec![ToolEffect::SetTodos(phases)],
        }
    }
}

/// The list as the model reads it back: each phase, then its tasks with a status mark.
fn listing(phases: &[TodoPhase]) -> String {
    let mut text = String::new();
    for p in phases {
        text.push_str(&format!("{}:\n", p.name));
        for t in &p.tasks {
            let mark = match t.status.as_str() {
                "completed" => "[x]",
                "in_progress" => "[>]",
                "abandoned" => "[-]",
                _ => "[ ]",
            };
            text.push_str(&format!("  {mark} {}\n", t.content));
        }
    }
    if text.is_empty() {
        "Todo list cleared".into()
    } else {
        text
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

    /// The new list is the call's effect, for the session to apply; a list that does not
    /// validate changes nothing.
    #[test]
    fn the_new_list_is_the_outcome_s_effect() {
        let (_dir, ctx) = crate::tools::tests::ctx();
        let args = json!({"phases": [{"name": "Work", "tasks": [
            {"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]}]});
        let outcome = TodoWrite.run(&args, &ctx);
        assert!(!outcome.output.is_error);
        let phases = normalize(args["phases"].as_array().unwrap()).unwrap();
        assert_eq!(outcome.effects, [ToolEffect::SetTodos(phases.clone())]);
        assert_eq!(
            crate::tools::tests::text(&outcome.output),
            "Work:\n  [>] a\n  [ ] b\n"
        );
        assert_eq!(
            outcome.output.details,
            Some(json!({ "todoPhases": phases }))
        );
        let cleared = TodoWrite.run(&json!({"phases": []}), &ctx);
        assert_eq!(cleared.effects, [ToolEffect::SetTodos(Vec::new())]);
        assert_eq!(
            crate::tools::tests::text(&cleared.output),
            "Todo list cleared"
        );
        let bad = json!({"phases": [{"name": "p", "tasks": [{"content": "a", "status": "done"}]}]});
        let refused = TodoWrite.run(&bad, &ctx);
        assert!(refused.output.is_error);
        assert!(refused.effects.is_empty());
        assert_eq!(
            TodoWrite.execute(&args, &ctx),
            TodoWrite.run(&args, &ctx).output
        );
    }

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
}
