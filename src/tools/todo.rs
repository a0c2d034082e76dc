//! `todo_write`: the model replaces the todo phases (`get_state.todoPhases`). The tool validates
//! and normalizes; the session applies the phases carried in the result's details.

use serde_json::{json, Value};

use super::{Tool, ToolContext};
use crate::protocol::message::ToolOutput;
use crate::session::todos;

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
                                    "status": {"type": "string", "enum": todos::STATUSES},
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

    fn execute(&self, args: &Value, _ctx: &ToolContext) -> ToolOutput {
        let phases = args["phases"].as_array().cloned().unwrap_or_default();
        match todos::normalize(&phases) {
            Ok(phases) => {
                let mut text = String::new();
                for p in &phases {
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
                ToolOutput::text(if text.is_empty() {
                    "Todo list cleared".into()
                } else {
                    text
                })
                .with_details(json!({"todoPhases": phases}))
            }
            Err(e) => ToolOutput::error(e),
        }
    }
}
