//! A host that answers extension UI requests: the agent's `ask` tool puts a multiple-choice and a
//! free-text question through `select` and `input` dialogs; this host answers them (as an editor
//! would after showing the dialogs) and prints the notices it receives.
//!
//! `cargo build --release --bins --examples && target/release/examples/ui_host`

use std::time::Duration;

use gjc::client::{Handlers, RpcClient, UiAnswer};
use gjc::protocol::frame::{Event, Frame};
use gjc::protocol::message::joined_text;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = json!({"turns": [
        {"content": [{"type": "toolCall", "name": "ask", "arguments": {"questions": [
            {"id": "db", "question": "Which database should the service use?", "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}], "recommended": 1},
            {"id": "name", "question": "What should the service be called?"}
        ]}}]},
        {"content": [{"type": "text", "text": "I'll scaffold it with the answers."}]}
    ]});
    // The script, sessions and registry go to a folder removed at exit, never to ~/.gjc.
    let agent_dir = tempfile::tempdir()?;
    let path = agent_dir.path().join("script.json");
    std::fs::write(&path, script.to_string())?;
    let mut gjc = RpcClient::builder(RpcClient::default_program())
        .env("GJC_CODING_AGENT_DIR", agent_dir.path())
        .args([
            "--provider",
            "scripted",
            "--tools",
            "read,bash,ask",
            "--script",
        ])
        .arg(&path)
        .spawn()?;
    gjc.next_frame(WAIT)?;
    gjc.prompt("Set up a new service.", WAIT)?
        .data_as::<serde_json::Value>()?;

    let mut handlers = Handlers::new().ui(|request| {
        let field = |name: &str| request.fields.get(name).cloned().unwrap_or_default();
        match request.method.as_str() {
            "select" => {
                println!("select: {} {}", field("title"), field("options"));
                UiAnswer::Value(field("options")[1].clone())
            }
            "input" => {
                println!("input: {}", field("title"));
                UiAnswer::Value("ledger".into())
            }
            "confirm" => UiAnswer::Confirmed(true),
            _ => UiAnswer::Cancelled,
        }
    });
    gjc.serve(&mut handlers, WAIT, |frame| match frame {
        Frame::ExtensionUiRequest(notice) if !notice.expects_answer() => {
            println!("notice: {} {:?}", notice.method, notice.fields);
            false
        }
        _ => match frame.event() {
            Some(Event::ToolExecutionEnd { result, .. }) => {
                println!("ask result:\n{}", joined_text(&result.content));
                false
            }
            Some(Event::AgentEnd { .. }) => true,
            _ => false,
        },
    })?;
    gjc.close_stdin();
    gjc.wait_exit(Duration::from_secs(5))
        .ok_or("gjc did not exit")?;
    Ok(())
}
