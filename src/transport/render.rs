//! How RPC shows what the session shows the user (`Outbound::Show`): as fire-and-forget
//! extension UI requests. ACP has its own mapping (`acp/updates.rs`).

use serde_json::{json, Map, Value};

use crate::host::ui::notice;
use crate::protocol::reply::TodoPhase;
use crate::protocol::{FlatFrame, Show};

/// How RPC shows what the session shows the user: fire-and-forget UI requests (`setStatus`,
/// the todo list as the `gjc.todos` widget, `setTitle` when `titles` (`GJC_RPC_EMIT_TITLE`),
/// `set_editor_text`).
pub fn render(show: &Show, titles: bool) -> Option<FlatFrame> {
    Some(match show {
        Show::Status { key, text } => {
            let mut fields = Map::new();
            fields.insert("statusKey".into(), Value::from(*key));
            if let Some(text) = text {
                fields.insert("statusText".into(), Value::from(text.as_str()));
            }
            notice("setStatus", Value::Object(fields))
        }
        Show::Todos(phases) => notice(
            "setWidget",
            json!({"widgetKey": "gjc.todos", "widgetLines": todo_lines(phases)}),
        ),
        Show::Title(title) if titles => notice("setTitle", json!({ "title": title })),
        Show::Title(_) => return None,
        Show::EditorText(text) => notice("set_editor_text", json!({ "text": text })),
    })
}

/// Each phase's name, then its tasks with a status mark.
fn todo_lines(phases: &[TodoPhase]) -> Vec<String> {
    phases
        .iter()
        .flat_map(|p| {
            std::iter::once(p.name.clone()).chain(p.tasks.iter().map(|t| {
                let mark = match t.status.as_str() {
                    "completed" => "[x]",
                    "in_progress" => "[>]",
                    "abandoned" => "[-]",
                    _ => "[ ]",
                };
                format!("  {mark} {}", t.content)
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(show: Show) -> Value {
        let mut value = serde_json::to_value(render(&show, false).expect("a frame")).unwrap();
        let id = value.as_object_mut().unwrap().remove("id");
        assert!(id.is_some_and(|id| id.is_string()));
        value
    }

    #[test]
    fn rpc_renders_what_the_session_shows_as_ui_requests() {
        let status = Show::Status {
            key: "gjc.retry",
            text: Some("Retrying in 2s".into()),
        };
        assert_eq!(
            frame(status),
            json!({"type": "extension_ui_request", "method": "setStatus",
                   "statusKey": "gjc.retry", "statusText": "Retrying in 2s"})
        );
        let cleared = Show::Status {
            key: "gjc.retry",
            text: None,
        };
        assert_eq!(frame(cleared)["statusText"], Value::Null);
        let phases: Vec<TodoPhase> = serde_json::from_value(json!([{"id": "p", "name": "Work",
            "tasks": [{"id": "t", "content": "a", "status": "in_progress"}]}]))
        .unwrap();
        assert_eq!(
            frame(Show::Todos(phases)),
            json!({"type": "extension_ui_request", "method": "setWidget",
                   "widgetKey": "gjc.todos", "widgetLines": ["Work", "  [>] a"]})
        );
        assert_eq!(
            frame(Show::EditorText("go".into())),
            json!({"type": "extension_ui_request", "method": "set_editor_text", "text": "go"})
        );
    }
}
