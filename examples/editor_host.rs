//! An editor-style host: spawns the agent in RPC mode, waits for `ready`, seeds a todo plan, asks
//! the agent to fix a failing test in a scratch project and tells the run as it streams: the
//! assistant's text and one line per tool call with its result. It then checks the test itself
//! and exits cleanly by closing the agent's stdin.
//!
//! With ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY set it uses the real model; without
//! one (or with `--scripted`) it uses the scripted provider, replaying a recorded session with no
//! network. The tools run for real either way.
//!
//! The agent is this very program: started again with `AGENT_MARKER` set, it runs
//! `gjc::entry::main`, exactly what the `gjc` binary runs, so one `cargo run` builds all it needs.
//! Set `GJC_BIN` to drive a separately built `gjc` instead. The project and the agent dir
//! (`GJC_CODING_AGENT_DIR`: sessions, the session registry) are temporary and removed at exit.
//!
//! Run: `cargo run --profile example --example editor_host [-- --scripted]`

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gjc::client::{Handlers, RpcClient};
use gjc::protocol::command::{Command, GetStateParams, NoParams, SetTodosParams};
use gjc::protocol::frame::{Delta, Event};
use gjc::protocol::message::{AgentMessage, Content, StopReason, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(300);

/// Set in the environment of the child this example starts: the child is the agent.
const AGENT_MARKER: &str = "GJC_EDITOR_HOST_AS_AGENT";

/// How much of a tool result or argument one story line shows.
const SUMMARY_CHARS: usize = 90;

const TASK: &str = "test.sh fails. Read math.sh, run ./test.sh, fix the bug with the edit tool \
and run the test again. Keep the fix minimal.";

fn main() {
    if std::env::var_os(AGENT_MARKER).is_some() {
        std::process::exit(gjc::entry::main());
    }
    if let Err(e) = host() {
        eprintln!("editor_host: {e}");
        std::process::exit(1);
    }
}

fn host() -> Result<(), Box<dyn std::error::Error>> {
    let scripted = std::env::args().any(|a| a == "--scripted")
        || ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"]
            .iter()
            .all(|k| std::env::var(k).map_or(true, |v| v.trim().is_empty()));
    // Both folders are removed when they drop, also when a step below fails.
    let project = tempfile::Builder::new()
        .prefix("gjc-editor-host-")
        .tempdir()?;
    let agent_dir = tempfile::Builder::new()
        .prefix("gjc-editor-host-agent-")
        .tempdir()?;
    write_project(project.path())?;

    let (program, which) = agent_program()?;
    println!("Fixing a failing test with gjc, as an editor would drive it.");
    println!(
        "  project    {} (math.sh, test.sh)",
        project.path().display()
    );
    println!(
        "  agent dir  {} (temporary, via GJC_CODING_AGENT_DIR: ~/.gjc is not touched)",
        agent_dir.path().display()
    );
    println!("  agent      {which}");

    let mut builder = RpcClient::builder(&program)
        .env(AGENT_MARKER, "1")
        .env("GJC_CODING_AGENT_DIR", agent_dir.path())
        .arg("--cwd")
        .arg(project.path())
        .forward_stderr("gjc: ");
    if scripted {
        let script = agent_dir.path().join("recorded-session.json");
        std::fs::write(&script, recorded_session().to_string())?;
        builder = builder
            .args(["--provider", "scripted", "--script"])
            .arg(&script);
    }
    let mut gjc = builder.spawn()?;
    gjc.next_frame(Duration::from_secs(10))?;

    let state: State = gjc
        .call(Command::GetState(GetStateParams::default()), WAIT)?
        .data_as()?;
    let model = state.model.ok_or("gjc has no model")?;
    println!(
        "  model      {}/{} ({})",
        model.provider,
        model.id,
        if scripted {
            "replay of a recorded session, no network"
        } else {
            "live"
        }
    );
    let plan = json!({"name": "Fix the test", "tasks": [
        {"content": "Find why test.sh fails", "status": "in_progress"},
        {"content": "Fix math.sh and rerun the test", "status": "pending"}]});
    gjc.call(
        Command::SetTodos(SetTodosParams { phases: vec![plan] }),
        WAIT,
    )?
    .data_as::<Value>()?;
    println!("  plan       2 todos set with set_todos\n");

    println!("you: {TASK}");
    gjc.prompt(TASK, WAIT)?.data_as::<Value>()?;
    tell_run(&mut gjc)?;

    let stats: Stats = gjc
        .call(Command::GetSessionStats(NoParams {}), WAIT)?
        .data_as()?;
    println!(
        "\nsession: {} assistant messages, {} tool calls, {} input / {} output tokens",
        stats.assistant_messages, stats.tool_calls, stats.tokens.input, stats.tokens.output
    );
    let test = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(project.path())
        .output()?;
    println!(
        "checked by the host: sh test.sh says {}",
        String::from_utf8_lossy(&test.stdout).trim()
    );

    gjc.close_stdin();
    let status = gjc
        .wait_exit(Duration::from_secs(5))
        .ok_or("gjc did not exit after stdin closed")?;
    println!("stdin closed; gjc exited with {status}; temporary folders removed");
    if !status.success() {
        return Err(format!("gjc exited with {status}").into());
    }
    if !test.status.success() {
        return Err("the test still fails".into());
    }
    Ok(())
}

/// `GJC_BIN` when set, else this program acting as the agent.
fn agent_program() -> std::io::Result<(PathBuf, String)> {
    if let Some(bin) = std::env::var_os("GJC_BIN") {
        let bin = PathBuf::from(bin);
        let which = format!("{} --mode rpc (from GJC_BIN)", bin.display());
        return Ok((bin, which));
    }
    let me = std::env::current_exe()?;
    Ok((me, "this program re-run as gjc --mode rpc".into()))
}

/// The parts of `get_state` and `get_session_stats` this host shows.
#[derive(Deserialize)]
struct State {
    model: Option<Model>,
}

#[derive(Deserialize)]
struct Model {
    provider: String,
    id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stats {
    assistant_messages: u64,
    tool_calls: u64,
    tokens: Tokens,
}

#[derive(Deserialize)]
struct Tokens {
    input: u64,
    output: u64,
}

/// One line per assistant text and per finished tool call, until `agent_end`. UI questions
/// (none in this run) would be answered `cancelled`; status lines and titles need no answer.
fn tell_run(gjc: &mut RpcClient) -> Result<(), Box<dyn std::error::Error>> {
    // `tool_execution_end` names the call, not its arguments: they come with its start.
    let mut started: HashMap<String, Value> = HashMap::new();
    let mut handlers = Handlers::new();
    gjc.serve(&mut handlers, WAIT, |frame| {
        match frame.event() {
            Some(Event::MessageUpdate {
                assistant_message_event: delta,
                ..
            }) => match delta {
                Delta::TextEnd { content, .. } => println!("gjc: {}", content.trim()),
                Delta::ThinkingEnd { content, .. } => {
                    println!("gjc (thinking): {}", clip(content.trim()))
                }
                _ => {}
            },
            Some(Event::ToolExecutionStart {
                tool_call_id, args, ..
            }) => {
                started.insert(tool_call_id.clone(), args.clone());
            }
            Some(Event::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            }) => {
                let args = started.remove(tool_call_id).unwrap_or_default();
                println!(
                    "  {tool_name} {} -> {}: {}",
                    clip(&describe_args(tool_name, &args)),
                    if *is_error { "failed" } else { "ok" },
                    summarize(&first_text(result))
                );
            }
            Some(Event::AutoRetryStart { error_message, .. }) => {
                println!("  (retrying: {error_message})")
            }
            Some(Event::MessageEnd {
                message: AgentMessage::Assistant(m),
            }) if m.stop_reason == StopReason::Error => println!(
                "  (model error: {})",
                m.error_message.as_deref().unwrap_or("?")
            ),
            Some(Event::AgentEnd { outcome, .. }) => {
                let outcome = serde_json::to_string(outcome).unwrap_or_default();
                println!("run ended: {}", outcome.trim_matches('"'));
                return true;
            }
            _ => {}
        }
        false
    })?;
    Ok(())
}

/// The argument a reader cares about for the common tools; compact JSON for the rest.
fn describe_args(tool: &str, args: &Value) -> String {
    let field = |name: &str| args[name].as_str().map(str::to_string);
    let described = match tool {
        "read" | "write" | "ls" => field("path"),
        "edit" => field("path").map(|p| {
            let n = args["edits"].as_array().map_or(0, Vec::len);
            format!("{p} ({n} edit{})", if n == 1 { "" } else { "s" })
        }),
        "bash" => field("command").map(|c| format!("`{c}`")),
        "grep" | "find" => field("pattern"),
        "todo_write" => Some("(plan update)".into()),
        _ => None,
    };
    described.unwrap_or_else(|| args.to_string())
}

/// The first line of a result and how many more there are.
fn summarize(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = clip(lines.next().unwrap_or("(no output)"));
    match lines.count() {
        0 => first,
        n => format!("{first} (+{n} more line{})", if n == 1 { "" } else { "s" }),
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(SUMMARY_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn first_text(result: &ToolOutput) -> String {
    result
        .content
        .iter()
        .find_map(|block| match block {
            Content::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn write_project(dir: &Path) -> std::io::Result<()> {
    std::fs::write(
        dir.join("math.sh"),
        "# Arithmetic helpers.\nadd() {\n  echo $(( $1 - $2 ))\n}\n",
    )?;
    std::fs::write(
        dir.join("test.sh"),
        "#!/bin/sh\n. ./math.sh\nif [ \"$(add 2 3)\" = 5 ]; then echo PASS; else echo \"FAIL: add 2 3 gave $(add 2 3)\"; exit 1; fi\n",
    )
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
