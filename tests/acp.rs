//! `--mode acp`: the Agent Client Protocol spoken to the real binary over stdio, with the
//! scripted provider. Every message gjc writes is checked against the protocol crate's types:
//! each `session/update` and each request to the client must deserialize into its type.

/// File delegation keeps to the session's roots, with normalised paths.
mod apart;
mod confine;
/// Many live sessions in one process.
mod live;
/// An editor's streamable HTTP MCP server.
mod mcp_http;
/// An editor's MCP tool under the permission setting and plan mode.
mod mcp_policy;
/// `$/cancel_request`, a dead parent, a client that stops reading stdout.
mod robust;
/// The bash tool in the editor's terminal (`terminal/*`).
mod terminal;
/// Whether a project may run its hooks, asked of the editor.
mod trust;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use agent_client_protocol_schema::v1::{
    CancelRequestNotification, CreateTerminalRequest, InitializeResponse, KillTerminalRequest,
    NewSessionResponse, PromptResponse, ReadTextFileRequest, ReleaseTerminalRequest,
    RequestPermissionRequest, SessionNotification, TerminalOutputRequest,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use crossbeam_channel::{unbounded, Receiver};
use serde_json::{json, Value};

use crate::support::TIMEOUT;

/// The kernel sandbox in each mode, escalation through permission requests, the launcher.
mod sandbox;
/// Session management: folders, list, resume, close, delete.
mod sessions;
/// Usage, cost and title after each turn.
mod usage;

struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Messages read while waiting for another one.
    backlog: VecDeque<Value>,
    next_id: i64,
    home: tempfile::TempDir,
    project: PathBuf,
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn acp(script: Value) -> Acp {
    spawn_in(tempfile::tempdir().unwrap(), script)
}

/// `gjc --mode acp` with its agent folder and project under `home` and these flags: the command
/// (stdio left to the caller) and the project's folder.
fn gjc_with(home: &std::path::Path, args: &[&str]) -> (Command, PathBuf) {
    let agent = home.join("agent");
    let project = home.join("project");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let project = project.canonicalize().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_gjc"));
    command
        .args(["--mode", "acp"])
        .args(args)
        .env("HOME", home)
        .env("GJC_CODING_AGENT_DIR", &agent)
        .env("RUST_LOG", "warn")
        // Reminder turns about open tasks would need more script than these tests are about.
        .env("GJC_TODO_REMINDERS", "0")
        .current_dir(&project);
    (command, project)
}

/// The same with the scripted provider playing `script`.
fn gjc_in(home: &std::path::Path, script: &Value) -> (Command, PathBuf) {
    let script_path = home.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let script_arg = script_path.display().to_string();
    gjc_with(home, &["--provider", "scripted", "--script", &script_arg])
}

/// Starts gjc in `home` (reused to load a session an earlier process wrote).
fn spawn_in(home: tempfile::TempDir, script: Value) -> Acp {
    let (command, project) = gjc_in(home.path(), &script);
    spawn(command, home, project)
}

/// Starts gjc in `home` with these flags besides `--mode acp`.
fn spawn_with(home: tempfile::TempDir, args: &[&str]) -> Acp {
    let (command, project) = gjc_with(home.path(), args);
    spawn(command, home, project)
}

fn spawn(mut command: Command, home: tempfile::TempDir, project: PathBuf) -> Acp {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn gjc");
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = unbounded();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stdin = child.stdin.take();
    Acp {
        child,
        stdin,
        lines,
        backlog: VecDeque::new(),
        next_id: 0,
        home,
        project,
    }
}

/// Fails the test when a message is not what the protocol's types describe.
fn validate(message: &Value) {
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    let params = message["params"].clone();
    let checked = match message["method"].as_str() {
        Some("session/update") => serde_json::from_value::<SessionNotification>(params).map(drop),
        Some("session/request_permission") => {
            serde_json::from_value::<RequestPermissionRequest>(params).map(drop)
        }
        Some("fs/read_text_file") => {
            serde_json::from_value::<ReadTextFileRequest>(params).map(drop)
        }
        Some("fs/write_text_file") => {
            serde_json::from_value::<WriteTextFileRequest>(params).map(drop)
        }
        Some("terminal/create") => {
            serde_json::from_value::<CreateTerminalRequest>(params).map(drop)
        }
        Some("terminal/wait_for_exit") => {
            serde_json::from_value::<WaitForTerminalExitRequest>(params).map(drop)
        }
        Some("terminal/output") => {
            serde_json::from_value::<TerminalOutputRequest>(params).map(drop)
        }
        Some("terminal/kill") => serde_json::from_value::<KillTerminalRequest>(params).map(drop),
        Some("terminal/release") => {
            serde_json::from_value::<ReleaseTerminalRequest>(params).map(drop)
        }
        Some("$/cancel_request") => {
            serde_json::from_value::<CancelRequestNotification>(params).map(drop)
        }
        Some(other) => panic!("gjc sent an unexpected method {other}: {message}"),
        None => Ok(()),
    };
    if let Err(e) = checked {
        panic!("message does not match the ACP schema ({e}): {message}");
    }
}

impl Acp {
    fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn answer(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// The next message, from the backlog first.
    fn next(&mut self) -> Value {
        if let Some(m) = self.backlog.pop_front() {
            return m;
        }
        let line = self
            .lines
            .recv_timeout(TIMEOUT)
            .expect("gjc wrote nothing in time");
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        validate(&message);
        message
    }

    /// Messages up to and including the first that matches.
    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let m = self.next();
            let done = pred(&m);
            seen.push(m);
            if done {
                return seen;
            }
        }
    }

    /// The response to `id`, and what came before it.
    fn response(&mut self, id: i64) -> (Value, Vec<Value>) {
        let mut seen = self.until(|m| m["id"] == id && m.get("method").is_none());
        let response = seen.pop().unwrap();
        (response, seen)
    }

    fn result(&mut self, id: i64) -> Value {
        let (response, _) = self.response(id);
        assert!(response.get("error").is_none(), "error: {response}");
        response["result"].clone()
    }

    fn initialize(&mut self, capabilities: Value) -> InitializeResponse {
        let id = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        );
        serde_json::from_value(self.result(id)).unwrap()
    }

    fn new_session(&mut self) -> String {
        let id = self.request(
            "session/new",
            json!({"cwd": self.project, "mcpServers": []}),
        );
        let session: NewSessionResponse = serde_json::from_value(self.result(id)).unwrap();
        session.session_id.0.to_string()
    }

    /// Permissions `allow_all`: no call asks.
    fn allow_all(&mut self, session: &str) {
        let set = self.request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "permissions", "value": "allow_all"}),
        );
        self.result(set);
    }

    fn prompt(&mut self, session: &str, text: &str) -> i64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    fn stop_reason(&mut self, id: i64) -> (String, Vec<Value>) {
        let (response, before) = self.response(id);
        let result: PromptResponse = serde_json::from_value(response["result"].clone())
            .unwrap_or_else(|e| panic!("not a prompt response ({e}): {response}"));
        let reason = serde_json::to_value(result.stop_reason).unwrap();
        (reason.as_str().unwrap().to_string(), before)
    }

    fn close_and_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

/// The `update` objects among `messages`.
fn updates(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect()
}

/// The text of every update of one kind, joined.
fn text_of(updates: &[Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// The text of an update's first content block.
fn first_text(update: &Value) -> String {
    update["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn write_turns(path: &str, content: &str) -> Value {
    json!({"turns": [
        {"content": [{"type": "toolCall", "name": "write", "id": "call_w",
                      "arguments": {"path": path, "content": content}}]},
        {"content": [{"type": "text", "text": "Finished."}]}
    ]})
}

#[test]
fn initialize_reports_capabilities_and_refuses_other_versions() {
    let mut g = acp(json!({"turns": []}));
    let id = g.request(
        "initialize",
        json!({"protocolVersion": 2, "clientCapabilities": {}}),
    );
    let (response, _) = g.response(id);
    assert_eq!(response["error"]["code"], -32022, "{response}");
    let init = g.initialize(json!({}));
    let value = serde_json::to_value(&init).unwrap();
    assert_eq!(value["protocolVersion"], 1);
    let caps = &value["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["image"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["mcpCapabilities"], json!({"http": true, "sse": false}));
    assert_eq!(value["authMethods"], json!([]));
    let id = g.request("authenticate", json!({"methodId": "none"}));
    assert_eq!(g.result(id), json!({}));
    let id = g.request(
        "session/new",
        json!({"cwd": g.project, "mcpServers": [{"name": "x", "command": "/bin/x", "args": [], "env": []}]}),
    );
    let (response, _) = g.response(id);
    let session: NewSessionResponse = serde_json::from_value(response["result"].clone()).unwrap();
    assert!(!session.session_id.0.is_empty());
    let modes = serde_json::to_value(session.modes.unwrap()).unwrap();
    assert_eq!(modes["currentModeId"], "default");
    assert_eq!(modes["availableModes"][1]["id"], "plan");
    let options = serde_json::to_value(session.config_options.unwrap()).unwrap();
    assert_eq!(options[0]["id"], "model");
    assert_eq!(options[0]["category"], "model");
    assert_eq!(options[0]["currentValue"], "scripted/scripted");
    assert_eq!(options[1]["id"], "permissions");
    let session_id = session.session_id.0.to_string();
    let set = g.request(
        "session/set_config_option",
        json!({"sessionId": session_id, "configId": "model", "value": "nope/none"}),
    );
    assert_eq!(g.response(set).0["error"]["code"], -32602);
    let set = g.request(
        "session/set_config_option",
        json!({"sessionId": session_id, "configId": "model", "value": "scripted/scripted"}),
    );
    let options = g.result(set);
    assert_eq!(
        options["configOptions"][0]["currentValue"],
        "scripted/scripted"
    );
    assert_eq!(g.close_and_wait().map(|s| s.code()), Some(Some(0)));
}

#[test]
fn a_prompt_streams_thought_and_message_chunks_then_ends_the_turn() {
    let text = "Hello from the scripted model, in several chunks.";
    let mut g = acp(json!({"turns": [{"content": [
        {"type": "thinking", "thinking": "Thinking it over."},
        {"type": "text", "text": text}
    ], "chunkChars": 8}]}));
    g.initialize(json!({}));
    let session = g.new_session();
    let id = g.prompt(&session, "hi");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    let updates = updates(&before);
    let chunks = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert!(chunks > 1, "the reply streams in chunks: {updates:?}");
    assert_eq!(text_of(&updates, "agent_message_chunk"), text);
    assert_eq!(
        text_of(&updates, "agent_thought_chunk"),
        "Thinking it over."
    );
}

#[test]
fn an_edit_asks_permission_and_runs_when_allowed() {
    let mut g = acp(write_turns("a.txt", "allowed\n"));
    g.initialize(json!({}));
    let session = g.new_session();
    let id = g.prompt(&session, "write it");
    let before = g.until(|m| m["method"] == "session/request_permission");
    let ask = before.last().unwrap().clone();
    assert_eq!(ask["params"]["toolCall"]["toolCallId"], "call_w");
    assert_eq!(ask["params"]["toolCall"]["kind"], "edit");
    let call = updates(&before)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("tool_call before the permission request");
    // `pending` is the default status, which the schema lets a sender leave out.
    assert!(
        call["status"] == "pending" || call["status"].is_null(),
        "{call}"
    );
    assert_eq!(call["title"], "Write a.txt");
    assert!(
        !g.project.join("a.txt").exists(),
        "nothing runs before the answer"
    );
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert_eq!(
        std::fs::read_to_string(g.project.join("a.txt")).unwrap(),
        "allowed\n"
    );
    let ups = updates(&after);
    let done = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .expect("completed update");
    assert_eq!(done["content"][0]["type"], "diff");
    assert_eq!(done["content"][0]["newText"], "allowed\n");
    assert!(ups.iter().any(|u| u["status"] == "in_progress"));
}

#[test]
fn a_refused_edit_is_a_denied_tool_call_and_the_turn_goes_on() {
    let mut g = acp(write_turns("b.txt", "refused\n"));
    g.initialize(json!({}));
    let session = g.new_session();
    let id = g.prompt(&session, "write it");
    let before = g.until(|m| m["method"] == "session/request_permission");
    let ask = before.last().unwrap().clone();
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(!g.project.join("b.txt").exists());
    let ups = updates(&after);
    let failed = ups
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed")
        .expect("failed update");
    assert!(first_text(failed).contains("denied"));
    assert_eq!(failed["rawOutput"]["details"]["denied"], true);
    assert_eq!(text_of(&ups, "agent_message_chunk"), "Finished.");
}

#[test]
fn file_tools_use_the_editor_buffers_when_offered() {
    let mut g = acp(json!({"turns": [
        {"content": [{"type": "toolCall", "name": "read", "id": "call_r", "arguments": {"path": "notes.txt"}}]},
        {"content": [{"type": "toolCall", "name": "write", "id": "call_w", "arguments": {"path": "out.txt", "content": "saved by the editor"}}]},
        {"content": [{"type": "text", "text": "ok"}]}
    ]}));
    std::fs::write(g.project.join("notes.txt"), "on disk\n").unwrap();
    g.initialize(json!({"fs": {"readTextFile": true, "writeTextFile": true}}));
    let session = g.new_session();
    g.allow_all(&session);
    let id = g.prompt(&session, "go");
    let read = g.until(|m| m["method"] == "fs/read_text_file");
    let read = read.last().unwrap().clone();
    assert_eq!(
        read["params"]["path"],
        g.project.join("notes.txt").display().to_string()
    );
    g.answer(&read["id"], json!({"content": "unsaved buffer text\n"}));
    let mut seen = g.until(|m| m["method"] == "fs/write_text_file");
    let write = seen.last().unwrap().clone();
    assert_eq!(write["params"]["content"], "saved by the editor");
    g.answer(&write["id"], json!({}));
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(
        !g.project.join("out.txt").exists(),
        "the editor wrote it, not gjc"
    );
    seen.extend(before);
    let ups = updates(&seen);
    let read_done = ups
        .iter()
        .find(|u| u["toolCallId"] == "call_r" && u["status"] == "completed")
        .expect("read completed");
    assert!(first_text(read_done).contains("unsaved buffer text"));
}

#[test]
fn the_todo_list_is_the_plan() {
    let mut g = acp(json!({"turns": [
        {"content": [{"type": "toolCall", "name": "todo_write", "id": "call_t", "arguments": {"phases": [
            {"name": "Work", "tasks": [
                {"content": "Write code", "status": "completed"},
                {"content": "Test it", "status": "in_progress"}]}]}}]},
        {"content": [{"type": "text", "text": "Planned."}]}
    ]}));
    g.initialize(json!({}));
    let session = g.new_session();
    let id = g.prompt(&session, "plan it");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    let plan = updates(&before)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "plan")
        .expect("plan update");
    assert_eq!(
        plan["entries"],
        json!([
            {"content": "Write code", "priority": "medium", "status": "completed"},
            {"content": "Test it", "priority": "medium", "status": "in_progress"}
        ])
    );
}

/// gjc with a prompt streaming a reply that then stalls until stopped: the session and the
/// prompt's id.
fn streaming() -> (Acp, String, i64) {
    let mut g = acp(json!({"turns": [
        {"content": [{"type": "text", "text": "streaming slowly and then stalling"}],
         "chunkChars": 4, "delayMs": 20, "stall": true}
    ]}));
    g.initialize(json!({}));
    let session = g.new_session();
    let id = g.prompt(&session, "talk");
    g.until(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    (g, session, id)
}

/// The run stopped: the session takes the next prompt, which runs and fails only because the
/// script has no second turn.
fn takes_the_next_prompt(g: &mut Acp, session: &str) {
    let id = g.prompt(session, "again");
    let (response, _) = g.response(id);
    let error = response["error"]["data"].as_str().unwrap_or_default();
    assert!(error.contains("script exhausted"), "{response}");
}

#[test]
fn cancel_mid_stream_ends_the_turn_as_cancelled() {
    let (mut g, session, id) = streaming();
    g.notify("session/cancel", json!({"sessionId": session}));
    let (reason, _) = g.stop_reason(id);
    assert_eq!(reason, "cancelled");
    takes_the_next_prompt(&mut g, &session);
}

#[test]
fn load_replays_the_stored_conversation_before_answering() {
    let mut first = acp(json!({"turns": [{"content": [
        {"type": "thinking", "thinking": "Considering."},
        {"type": "text", "text": "The answer is 42."}
    ]}]}));
    first.initialize(json!({}));
    let session = first.new_session();
    let id = first.prompt(&session, "what is the answer?");
    assert_eq!(first.stop_reason(id).0, "end_turn");
    assert!(first.close_and_wait().is_some());
    let Acp { ref mut home, .. } = first;
    let home = std::mem::replace(home, tempfile::tempdir().unwrap());
    drop(first);

    let mut second = spawn_in(home, json!({"turns": []}));
    second.initialize(json!({}));
    let id = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": second.project, "mcpServers": []}),
    );
    let (response, before) = second.response(id);
    assert!(response.get("error").is_none(), "{response}");
    assert!(before
        .iter()
        .filter(|m| m["method"] == "session/update")
        .all(|m| m["params"]["sessionId"] == session.as_str()));
    let ups = updates(&before);
    assert_eq!(text_of(&ups, "user_message_chunk"), "what is the answer?");
    assert_eq!(text_of(&ups, "agent_thought_chunk"), "Considering.");
    assert_eq!(text_of(&ups, "agent_message_chunk"), "The answer is 42.");
    let missing = second.request(
        "session/load",
        json!({"sessionId": "no-such-session", "cwd": second.project, "mcpServers": []}),
    );
    let (response, _) = second.response(missing);
    assert_eq!(response["error"]["code"], -32002, "{response}");
}

#[test]
fn plan_mode_refuses_edits_without_asking() {
    let mut g = acp(write_turns("plan.txt", "no\n"));
    g.initialize(json!({}));
    let session = g.new_session();
    let set = g.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    let (response, _) = g.response(set);
    assert!(response.get("error").is_none(), "{response}");
    let mode = g.next();
    assert_eq!(
        mode["params"]["update"]["sessionUpdate"],
        "current_mode_update"
    );
    assert_eq!(mode["params"]["update"]["currentModeId"], "plan");
    let id = g.prompt(&session, "write");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(before
        .iter()
        .all(|m| m["method"] != "session/request_permission"));
    assert!(!g.project.join("plan.txt").exists());
    let failed = updates(&before)
        .into_iter()
        .find(|u| u["status"] == "failed")
        .expect("refused call");
    assert!(first_text(&failed).contains("plan mode"));
}

#[test]
fn bad_input_gets_json_rpc_errors_and_the_process_stays_up() {
    let mut g = acp(json!({"turns": []}));
    let cases: [(&str, i64); 4] = [
        ("{not json", -32700),
        (
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]",
            -32600,
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"no/such\"}",
            -32601,
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"session/new\",\"params\":{}}",
            -32602,
        ),
    ];
    for (line, code) in cases {
        g.send_line(line);
        let m = g.next();
        assert_eq!(m["error"]["code"], code, "{line} -> {m}");
        if code == -32700 || code == -32600 {
            assert_eq!(m["id"], Value::Null);
        }
    }
    let id = g.request(
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
    );
    let (response, _) = g.response(id);
    assert_eq!(response["error"]["code"], -32002);
    // Still serving, and an id of 0 is a real id.
    g.next_id = 0;
    let init = g.initialize(json!({}));
    assert_eq!(serde_json::to_value(init.protocol_version).unwrap(), 1);
    assert_eq!(g.close_and_wait().map(|s| s.code()), Some(Some(0)));
}

/// The absolute path of `node` (ACP wants an absolute command).
fn node() -> String {
    let out = Command::new("sh")
        .args(["-c", "command -v node"])
        .output()
        .expect("sh");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(path.starts_with('/'), "node is needed for the MCP tests");
    path
}

#[test]
fn mcp_servers_of_session_new_are_used_and_kept_to_their_session() {
    let call = json!({"content": [{"type": "toolCall", "name": "mcp__bad__pid", "arguments": {}}]});
    let say = json!({"content": [{"type": "text", "text": "ok"}]});
    let mut g = acp(json!({"turns": [call, say, call, say]}));
    g.initialize(json!({"session": {"notices": {}}}));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/misbehaving.js");
    let id = g.request(
        "session/new",
        json!({"cwd": g.project, "mcpServers": [
            {"name": "bad", "command": node(), "args": [script], "env": [{"name": "X", "value": "1"}]},
            {"name": "dead one", "command": node(), "args": [script, "die-at-start"], "env": []},
        ]}),
    );
    let (created, mut seen) = g.response(id);
    let session: NewSessionResponse = serde_json::from_value(created["result"].clone()).unwrap();
    let session = session.session_id.0.to_string();
    let set = g.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "permissions", "value": "allow_all"}),
    );
    seen.extend(g.response(set).1);
    let id = g.prompt(&session, "pid");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    seen.extend(before.iter().cloned());
    // The server that could not start is reported to the editor, with its stderr.
    let is_notice = |m: &Value| {
        m["params"]["update"]["sessionUpdate"] == "notice"
            && m.to_string().contains("dead_one failed")
    };
    if !seen.iter().any(is_notice) {
        seen.extend(g.until(is_notice));
    }
    let notice = seen.iter().find(|m| is_notice(m)).unwrap();
    assert!(notice.to_string().contains("missing API key"), "{notice}");
    let shown = serde_json::to_string(&updates(&before)).unwrap();
    let pid: String = shown
        .split("\"text\":\"")
        .filter_map(|s| s.split('"').next())
        .find(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
        .unwrap_or_else(|| panic!("the MCP tool answered its pid: {shown}"))
        .to_string();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());

    // A second session does not see the first one's servers; they run as long as the first
    // session lives, and stop when it is closed.
    let second = g.new_session();
    g.allow_all(&second);
    let id = g.prompt(&second, "pid again");
    let (_, before) = g.stop_reason(id);
    let shown = serde_json::to_string(&updates(&before)).unwrap();
    assert!(shown.contains("not found"), "{shown}");
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
    };
    assert!(
        !gone(),
        "the first session's server {pid} runs while that session lives"
    );
    let close = g.request("session/close", json!({"sessionId": session}));
    let (closed, _) = g.response(close);
    assert!(closed.get("error").is_none(), "{closed}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !gone() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        gone(),
        "the first session's server {pid} was stopped with its session"
    );
}
