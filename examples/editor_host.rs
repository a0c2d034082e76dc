//! An editor-style host: spawns `gjc --mode rpc`, waits for `ready`, prints `get_state`, seeds a
//! todo plan, asks the agent to fix a failing test in a scratch project, renders the run as it
//! streams, prints the session stats and exits cleanly by closing gjc's stdin.
//!
//! With ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY set it uses the real model; without
//! one (or with `--scripted`) it uses the scripted provider, replaying a recorded session with no
//! network. The tools run for real either way.
//!
//! Run: `cargo build --release --bins --examples && target/x86_64-unknown-linux-gnu/release/examples/editor_host`

use std::time::Duration;

use gjc::client::RpcClient;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(300);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scripted = std::env::args().any(|a| a == "--scripted")
        || ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"]
            .iter()
            .all(|k| std::env::var(k).map_or(true, |v| v.trim().is_empty()));
    let project = scratch_project()?;
    let mut builder = RpcClient::builder(RpcClient::default_program())
        .arg("--cwd")
        .arg(&project)
        .forward_stderr("gjc: ");
    let script_path = project.join(".session-script.json");
    if scripted {
        std::fs::write(&script_path, recorded_session().to_string())?;
        builder = builder
            .args(["--provider", "scripted", "--script"])
            .arg(&script_path);
    }
    let mut gjc = builder.spawn()?;
    let ready = gjc.recv(Duration::from_secs(10))?;
    println!("<- {}", ready.line);

    let state = gjc.request(json!({"type": "get_state"}), WAIT)?;
    let model = &state["data"]["model"];
    println!(
        "model: {}/{} ({})",
        model["provider"].as_str().unwrap_or("?"),
        model["id"].as_str().unwrap_or("?"),
        if scripted { "scripted replay" } else { "live" }
    );
    println!("state: {}", serde_json::to_string_pretty(&state["data"])?);

    let todos = gjc.request(
        json!({"type": "set_todos", "phases": [{"name": "Fix the test", "tasks": [
            {"content": "Find why test.sh fails", "status": "in_progress"},
            {"content": "Fix math.sh and rerun the test", "status": "pending"}]}]}),
        WAIT,
    )?;
    println!("todos: {}", todos["data"]["todoPhases"]);

    let ack = gjc.request(
        json!({"type": "prompt", "message": "test.sh fails. Read math.sh, run ./test.sh, fix the bug with the edit tool and run the test again. Keep the fix minimal."}),
        WAIT,
    )?;
    if ack["success"] != true {
        return Err(format!("prompt refused: {}", ack["error"]).into());
    }
    render_run(&mut gjc)?;

    let stats = gjc.request(json!({"type": "get_session_stats"}), WAIT)?;
    println!("\nstats: {}", stats["data"]);
    println!(
        "math.sh now:\n{}",
        std::fs::read_to_string(project.join("math.sh"))?
    );
    let test = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&project)
        .output()?;
    println!(
        "test.sh after the run: {}",
        String::from_utf8_lossy(&test.stdout).trim()
    );

    gjc.close_stdin();
    let status = gjc
        .wait_exit(Duration::from_secs(5))
        .ok_or("gjc did not exit after stdin closed")?;
    println!("gjc exited with {status}");
    let _ = std::fs::remove_dir_all(&project);
    if !test.status.success() {
        return Err("the test still fails".into());
    }
    Ok(())
}

/// Prints text as it streams and one line per tool call, until `agent_end`.
fn render_run(gjc: &mut RpcClient) -> Result<(), Box<dyn std::error::Error>> {
    use std::io::Write;
    loop {
        let frame = gjc.recv(WAIT)?.value;
        if frame["type"] != "event" {
            println!("\n<- {frame}");
            continue;
        }
        let event = &frame["payload"]["event"];
        match frame["payload"]["event_type"].as_str().unwrap_or("") {
            "message_update" => {
                let delta = &event["assistantMessageEvent"];
                match delta["type"].as_str() {
                    Some("thinking_start") => print!("\n(thinking) "),
                    Some("text_start") => println!(),
                    _ => {}
                }
                if delta["type"] == "text_delta" || delta["type"] == "thinking_delta" {
                    print!("{}", delta["delta"].as_str().unwrap_or(""));
                    std::io::stdout().flush()?;
                }
            }
            "tool_execution_start" => println!(
                "\n[tool] {} {}",
                event["toolName"].as_str().unwrap_or("?"),
                event["args"]
            ),
            "tool_execution_end" => {
                let text = first_text(&event["result"]);
                let status = if event["isError"] == true {
                    "error"
                } else {
                    "ok"
                };
                println!(
                    "[tool {status}] {}",
                    text.lines()
                        .take(6)
                        .collect::<Vec<_>>()
                        .join("\n             ")
                );
            }
            "auto_retry_start" => println!("\n[retry] {}", event["errorMessage"]),
            "message_end" if event["message"]["stopReason"] == "error" => {
                println!("\n[error] {}", event["message"]["errorMessage"])
            }
            "agent_end" => {
                println!("\n[done] {}", event["stopReason"]);
                return Ok(());
            }
            _ => {}
        }
    }
}

fn first_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .and_then(|c| c.iter().find_map(|b| b["text"].as_str()))
        .unwrap_or("")
        .to_string()
}

fn scratch_project() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("gjc-editor-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("math.sh"),
        "# Arithmetic helpers.\nadd() {\n  echo $(( $1 - $2 ))\n}\n",
    )?;
    std::fs::write(
        dir.join("test.sh"),
        "#!/bin/sh\n. ./math.sh\nif [ \"$(add 2 3)\" = 5 ]; then echo PASS; else echo \"FAIL: add 2 3 gave $(add 2 3)\"; exit 1; fi\n",
    )?;
    Ok(dir)
}

/// The recorded session the scripted provider replays: the same steps a model takes.
fn recorded_session() -> Value {
    json!({"turns": [
        {"content": [
            {"type": "thinking", "thinking": "I should look at the helper and run the test first."},
            {"type": "text", "text": "Let me read the helper and run the test."},
            {"type": "toolCall", "name": "read", "arguments": {"path": "math.sh"}},
            {"type": "toolCall", "name": "bash", "arguments": {"command": "sh test.sh"}}
        ], "delayMs": 5},
        {"content": [
            {"type": "text", "text": "`add` subtracts instead of adding. Fixing it."},
            {"type": "toolCall", "name": "edit", "arguments": {"path": "math.sh", "edits": [{"oldText": "$(( $1 - $2 ))", "newText": "$(( $1 + $2 ))"}]}}
        ], "delayMs": 5},
        {"content": [
            {"type": "toolCall", "name": "bash", "arguments": {"command": "sh test.sh"}},
            {"type": "toolCall", "name": "todo_write", "arguments": {"phases": [{"name": "Fix the test", "tasks": [
                {"content": "Find why test.sh fails", "status": "completed"},
                {"content": "Fix math.sh and rerun the test", "status": "completed"}]}]}}
        ]},
        {"content": [{"type": "text", "text": "Fixed: `add` in math.sh used `-` instead of `+`. test.sh now passes."}], "delayMs": 5}
    ]})
}
