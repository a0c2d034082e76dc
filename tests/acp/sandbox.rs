//! The kernel sandbox as an editor meets it: the default mode writes only in the project, plan
//! mode and reads the `ask` setting spares from asking run read-only in the kernel, a denied
//! command leaves the sandbox only with the user's permission (asked each time, with the
//! reason), the full-access mode runs without it, and the editor's terminal runs gjc's launcher.

use std::path::Path;

use serde_json::{json, Value};

use super::{acp, updates, Acp};
use crate::sandbox::{assert_empty, outside};

fn bash(commands: &[String]) -> Value {
    let mut turns: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"content": [{"type": "toolCall", "name": "bash", "id": format!("call_{i}"), "arguments": {"command": c}}]}))
        .collect();
    turns.push(json!({"content": [{"type": "text", "text": "Done."}]}));
    json!({ "turns": turns })
}

/// Looks like a read to the classifier; writes `target` through bash's prompt expansion.
fn disguised(target: &Path) -> String {
    format!("x='$(touch {})'; echo ${{x@P}}", target.display())
}

fn set_mode(g: &mut Acp, session: &str, mode: &str) {
    let id = g.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": mode}),
    );
    g.result(id);
}

#[test]
fn the_default_mode_writes_only_in_the_project_and_asks_with_the_reason_to_leave() {
    let out = outside();
    let target = out.path().join("x");
    let script = bash(&[format!("touch inside.txt; touch {}", target.display())]);
    let mut g = acp(script);
    g.initialize(json!({}));
    let session = g.new_session();
    g.allow_all(&session);
    let id = g.prompt(&session, "go");
    let seen = g.until(|m| m["method"] == "session/request_permission");
    let ask = seen.last().unwrap().clone();
    let params = &ask["params"];
    assert!(
        params["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("no sandbox"),
        "{ask}"
    );
    let reason = params["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(reason.contains("Permission denied"), "{ask}");
    let options: Vec<&str> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        options,
        ["allow_once", "reject_once"],
        "never 'always' for leaving"
    );
    assert!(g.project.join("inside.txt").exists());
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let (reason, _) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert_empty(out.path());
}

#[test]
fn plan_mode_is_read_only_in_the_kernel() {
    let mut g = acp(bash(&[disguised(Path::new("pwned"))]));
    g.initialize(json!({}));
    let session = g.new_session();
    set_mode(&mut g, &session, "plan");
    let id = g.prompt(&session, "look");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(before
        .iter()
        .all(|m| m["method"] != "session/request_permission"));
    assert!(!g.project.join("pwned").exists());
}

/// `ask` spares a read from asking, but runs it read-only in the kernel; when the kernel refused
/// it, the user is asked before it runs again with write access.
#[test]
fn a_read_run_without_asking_is_read_only_and_asks_before_writing() {
    let quiet = disguised(Path::new("quiet"));
    let loud = format!("{}; test -e loud", disguised(Path::new("loud")));
    let mut g = acp(bash(&[quiet, loud]));
    g.initialize(json!({}));
    let session = g.new_session();
    let id = g.prompt(&session, "go");
    let seen = g.until(|m| m["method"] == "session/request_permission");
    let ask = seen.last().unwrap().clone();
    assert_eq!(
        ask["params"]["toolCall"]["toolCallId"], "call_1",
        "the first ran unasked: {ask}"
    );
    assert!(
        !g.project.join("quiet").exists(),
        "a read run unasked wrote"
    );
    assert!(!g.project.join("loud").exists());
    assert!(ask["params"]["toolCall"]["title"]
        .as_str()
        .unwrap()
        .contains("write access"));
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    );
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(
        g.project.join("loud").exists(),
        "it ran again with write access"
    );
    let done = updates(&after)
        .into_iter()
        .find(|u| u["toolCallId"] == "call_1" && u["status"] == "completed");
    assert!(done.is_some(), "{after:?}");
}

#[test]
fn the_full_access_mode_runs_without_the_sandbox() {
    let out = outside();
    let target = out.path().join("x");
    let mut g = acp(bash(&[format!("touch {}", target.display())]));
    g.initialize(json!({}));
    let session = g.new_session();
    g.allow_all(&session);
    set_mode(&mut g, &session, "full-access");
    let id = g.prompt(&session, "go");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    assert!(before
        .iter()
        .all(|m| m["method"] != "session/request_permission"));
    assert!(target.exists());
}

/// The editor's terminal runs gjc as the launcher; run here as an editor would, the command is
/// confined there too.
#[test]
fn the_editors_terminal_runs_the_command_through_the_launcher() {
    let out = outside();
    let target = out.path().join("x");
    let command = format!("touch inside.txt; touch {}", target.display());
    let mut g = acp(bash(std::slice::from_ref(&command)));
    g.initialize(json!({"terminal": true}));
    let session = g.new_session();
    g.allow_all(&session);
    let id = g.prompt(&session, "go");
    let seen = g.until(|m| m["method"] == "terminal/create");
    let create = seen.last().unwrap().clone();
    let params = &create["params"];
    let program = params["command"].as_str().unwrap();
    let args: Vec<String> = params["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert!(program.ends_with("gjc"), "{create}");
    assert_eq!(args[0], "--sandbox-exec");
    assert_eq!(&args[args.len() - 2..], ["-c", command.as_str()]);
    // Run it as the editor would, in the session's folder.
    let ran = std::process::Command::new(program)
        .args(&args)
        .current_dir(&g.project)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ran.stderr).to_string();
    assert!(text.contains("Permission denied"), "{text}");
    assert!(g.project.join("inside.txt").exists());
    assert_empty(out.path());
    g.answer(&create["id"], json!({"terminalId": "t1"}));
    let seen = g.until(|m| m["method"] == "terminal/wait_for_exit");
    g.answer(
        &seen.last().unwrap()["id"],
        json!({"exitCode": ran.status.code(), "signal": null}),
    );
    let seen = g.until(|m| m["method"] == "terminal/output");
    g.answer(
        &seen.last().unwrap()["id"],
        json!({"output": text, "truncated": false}),
    );
    // The denial is offered for escalation like a local one; refuse it.
    let seen = g.until(|m| {
        m["method"] == "terminal/release" || m["method"] == "session/request_permission"
    });
    let mut last = seen.last().unwrap().clone();
    if last["method"] == "terminal/release" {
        g.answer(&last["id"], json!({}));
        last = g
            .until(|m| m["method"] == "session/request_permission")
            .pop()
            .unwrap();
    }
    g.answer(
        &last["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    );
    let (reason, _) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
}

/// Every way a read writes anyway, from ACP's plan mode and from reads `ask` lets through:
/// nothing is written inside the project or outside it (asked-for commands are rejected).
#[test]
fn no_family_writes_from_plan_mode_or_unasked_reads() {
    use crate::sandbox::families;
    for mode in ["plan", "default"] {
        let out = outside();
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        families::repository(&project, out.path());
        let commands = families::commands(&project.canonicalize().unwrap(), out.path());
        let mut g = super::spawn_in(home, families::turns(&commands));
        g.initialize(json!({}));
        let session = g.new_session();
        set_mode(&mut g, &session, mode);
        let id = g.prompt(&session, "look around");
        loop {
            let m = g.next();
            if m["method"] == "session/request_permission" {
                g.answer(
                    &m["id"],
                    json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
                );
            } else if m["id"] == id && m.get("method").is_none() {
                assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
                break;
            }
        }
        families::assert_untouched(mode, &g.project, out.path());
    }
}
