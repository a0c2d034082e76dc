//! A host that answers extension UI requests: the agent's `ask` tool puts a multiple-choice and a
//! free-text question through `select` and `input` dialogs; this host answers them (as an editor
//! would after showing the dialogs) and prints the notices it receives.
//!
//! `cargo build --release --bins --examples && target/release/examples/ui_host`

use std::time::Duration;

use gjc::client::RpcClient;
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
    gjc.recv(WAIT)?;
    gjc.request(
        json!({"type": "prompt", "message": "Set up a new service."}),
        WAIT,
    )?;
    loop {
        let f = gjc.recv(WAIT)?.value;
        if f["type"] == "extension_ui_request" {
            let reply = match f["method"].as_str() {
                Some("select") => {
                    println!("select: {} {}", f["title"], f["options"]);
                    json!({"type": "extension_ui_response", "id": f["id"], "value": f["options"][1]})
                }
                Some("input") => {
                    println!("input: {}", f["title"]);
                    json!({"type": "extension_ui_response", "id": f["id"], "value": "ledger"})
                }
                Some("confirm") => {
                    json!({"type": "extension_ui_response", "id": f["id"], "confirmed": true})
                }
                _ => {
                    println!("notice: {f}");
                    continue;
                }
            };
            gjc.send(&reply)?;
        } else if f["payload"]["event_type"] == "tool_execution_end" {
            println!(
                "ask result:\n{}",
                f["payload"]["event"]["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
            );
        } else if f["payload"]["event_type"] == "agent_end" {
            break;
        }
    }
    gjc.close_stdin();
    gjc.wait_exit(Duration::from_secs(5))
        .ok_or("gjc did not exit")?;
    Ok(())
}
