//! The bash tool in the editor's terminal: `terminal/create` with the command through the shell,
//! the terminal shown on the tool call, `wait_for_exit`, `output`, `release`; a timeout kills
//! and keeps the output; a cancel kills and releases; without terminals bash runs locally.

use serde_json::{json, Value};

use super::{acp, updates, Acp};

fn bash_turns(args: Value) -> Value {
    json!({"turns": [
        {"content": [{"type": "toolCall", "name": "bash", "id": "call_b", "arguments": args}]},
        {"content": [{"type": "text", "text": "Ran it."}]}
    ]})
}

/// A client that offers terminals (or not), with every call allowed, and a prompt sent: gjc,
/// the session and the prompt's id.
fn prompted(script: Value, terminal: bool) -> (Acp, String, i64) {
    let mut g = acp(script);
    g.initialize(json!({"terminal": terminal}));
    let session = g.new_session();
    g.allow_all(&session);
    let id = g.prompt(&session, "run it");
    (g, session, id)
}

/// The next request of `method`, and what came before it.
fn expect(g: &mut Acp, method: &str) -> (Value, Vec<Value>) {
    let mut seen = g.until(|m| m["method"] == method);
    let found = seen.pop().unwrap();
    (found, seen)
}

/// The call's last update, and the text the model was given.
fn ended(messages: &[Value]) -> (Value, String) {
    let done = updates(messages)
        .into_iter()
        .rev()
        .find(|u| u["toolCallId"] == "call_b" && u["rawOutput"].is_object())
        .expect("the call's final update");
    let text = done["rawOutput"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (done, text)
}

#[test]
fn bash_runs_in_the_editor_terminal_and_the_model_gets_its_output() {
    let command = "echo local > ran_locally.txt";
    let (mut g, _, id) = prompted(bash_turns(json!({"command": command})), true);
    let (create, _) = expect(&mut g, "terminal/create");
    let params = &create["params"];
    // The default mode's sandbox: gjc's launcher confines itself, then runs the shell.
    let args = params["args"].as_array().unwrap();
    assert_eq!(args[0], "--sandbox-exec", "{create}");
    assert_eq!(
        args[args.len() - 3..][1..],
        [json!("-c"), json!(command)],
        "{create}"
    );
    assert!(
        args[args.len() - 3].as_str().unwrap().ends_with("sh"),
        "{create}"
    );
    assert!(
        params["command"].as_str().unwrap().ends_with("gjc"),
        "{create}"
    );
    assert_eq!(params["cwd"], g.project.display().to_string());
    assert_eq!(params["outputByteLimit"], 50 * 1024);
    g.answer(&create["id"], json!({"terminalId": "term-1"}));

    let (wait, before) = expect(&mut g, "terminal/wait_for_exit");
    assert_eq!(wait["params"]["terminalId"], "term-1");
    let shown = updates(&before)
        .into_iter()
        .find(|u| u["content"][0]["type"] == "terminal")
        .expect("the terminal is shown on the tool call");
    assert_eq!(shown["toolCallId"], "call_b");
    assert_eq!(shown["status"], "in_progress");
    assert_eq!(shown["content"][0]["terminalId"], "term-1");
    // The exit status is the whole result (the schema flattens it).
    g.answer(&wait["id"], json!({"exitCode": 3, "signal": null}));

    let (output, _) = expect(&mut g, "terminal/output");
    g.answer(
        &output["id"],
        json!({"output": "from the editor\n", "truncated": false}),
    );
    let (release, _) = expect(&mut g, "terminal/release");
    assert_eq!(release["params"]["terminalId"], "term-1");
    g.answer(&release["id"], json!({}));

    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    let (done, text) = ended(&after);
    assert_eq!(done["status"], "failed", "exit code 3: {done}");
    assert_eq!(
        done["content"],
        json!([{"type": "terminal", "terminalId": "term-1"}]),
        "the call ends still showing its terminal"
    );
    assert_eq!(text, "from the editor\n\nCommand exited with code 3");
    assert!(
        !g.project.join("ran_locally.txt").exists(),
        "the command ran in the editor, not in gjc"
    );
}

#[test]
fn a_timeout_kills_the_command_and_keeps_its_output_under_the_local_rules() {
    let args = json!({"command": "sleep 100", "timeout": 0.3});
    let (mut g, _, id) = prompted(bash_turns(args), true);
    let (create, _) = expect(&mut g, "terminal/create");
    g.answer(&create["id"], json!({"terminalId": "term-2"}));
    let (wait, _) = expect(&mut g, "terminal/wait_for_exit");
    // Not answered: the command runs until the timeout.
    let (kill, before) = expect(&mut g, "terminal/kill");
    assert_eq!(kill["params"]["terminalId"], "term-2");
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == wait["id"]),
        "the wait is withdrawn: {before:?}"
    );
    g.answer(&kill["id"], json!({}));
    let (output, _) = expect(&mut g, "terminal/output");
    // The editor kept the tail only, cut inside a line.
    g.answer(
        &output["id"],
        json!({"output": "ut partial\nlast line\n", "truncated": true,
               "exitStatus": {"signal": "SIGKILL"}}),
    );
    expect(&mut g, "terminal/release");
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    let (done, text) = ended(&after);
    assert_eq!(done["status"], "failed");
    assert!(text.starts_with("last line\n\n[Output truncated"), "{text}");
    assert!(
        text.ends_with("Command timed out after 0.3 seconds"),
        "{text}"
    );
    assert_eq!(done["rawOutput"]["details"]["truncated"], true);
}

#[test]
fn cancel_mid_terminal_kills_and_releases_it() {
    let (mut g, session, id) = prompted(bash_turns(json!({"command": "sleep 100"})), true);
    let (create, _) = expect(&mut g, "terminal/create");
    g.answer(&create["id"], json!({"terminalId": "term-3"}));
    expect(&mut g, "terminal/wait_for_exit");
    g.notify("session/cancel", json!({"sessionId": session}));
    let mut seen = Vec::new();
    let (mut answered, mut released) = (false, false);
    while !(answered && released) {
        let m = g.next();
        answered |= m["id"] == id && m.get("method").is_none();
        released |= m["method"] == "terminal/release";
        seen.push(m);
    }
    let position = |method: &str| {
        seen.iter()
            .position(|m| m["method"] == method && m["params"]["terminalId"] == "term-3")
            .unwrap_or_else(|| panic!("no {method}: {seen:?}"))
    };
    assert!(position("terminal/kill") < position("terminal/release"));
    let response = seen.iter().find(|m| m["id"] == id).unwrap();
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
}

#[test]
fn a_client_that_never_makes_the_terminal_does_not_hold_the_session() {
    let (mut g, session, id) = prompted(bash_turns(json!({"command": "true"})), true);
    let (create, _) = expect(&mut g, "terminal/create");
    // No answer; the user cancels.
    g.notify("session/cancel", json!({"sessionId": session}));
    let (reason, _) = g.stop_reason(id);
    assert_eq!(reason, "cancelled");
    // The terminal comes late: it is killed and released at once.
    g.answer(&create["id"], json!({"terminalId": "late"}));
    let (kill, _) = expect(&mut g, "terminal/kill");
    assert_eq!(kill["params"]["terminalId"], "late");
    let (release, _) = expect(&mut g, "terminal/release");
    assert_eq!(release["params"]["terminalId"], "late");
}

#[test]
fn without_terminals_bash_runs_locally() {
    let command = "echo here > local.txt; echo printed";
    let (mut g, _, id) = prompted(bash_turns(json!({"command": command})), false);
    let (reason, messages) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(messages
        .iter()
        .all(|m| !m["method"].as_str().unwrap_or("").starts_with("terminal/")));
    assert_eq!(
        std::fs::read_to_string(g.project.join("local.txt")).unwrap(),
        "here\n"
    );
    let (done, text) = ended(&messages);
    assert_eq!(done["status"], "completed");
    assert_eq!(text, "printed");
}

/// A terminal client's session, about to be prompted to run `touch made.txt`.
fn touching() -> (Acp, String) {
    let mut g = acp(bash_turns(json!({"command": "touch made.txt"})));
    g.initialize(json!({"terminal": true}));
    let session = g.new_session();
    (g, session)
}

/// The prompt ended normally with the call refused (`why`) and no terminal made.
fn refused_without_a_terminal(g: &mut Acp, id: i64, before: Vec<Value>, why: &str) {
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    let messages = [before, after].concat();
    assert!(messages.iter().all(|m| m["method"] != "terminal/create"));
    let (done, text) = ended(&messages);
    assert_eq!(done["status"], "failed");
    assert!(text.contains(why), "{text}");
    assert!(!g.project.join("made.txt").exists());
}

#[test]
fn plan_mode_refuses_a_command_before_any_terminal_is_made() {
    let (mut g, session) = touching();
    let set = g.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    g.result(set);
    let id = g.prompt(&session, "touch it");
    refused_without_a_terminal(&mut g, id, Vec::new(), "plan mode");
}

#[test]
fn a_command_waits_for_permission_before_any_terminal_is_made() {
    let (mut g, session) = touching();
    let id = g.prompt(&session, "touch it");
    let (ask, before) = expect(&mut g, "session/request_permission");
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    refused_without_a_terminal(&mut g, id, before, "denied");
}
