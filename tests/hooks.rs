//! Hooks from `<agent dir>/hooks.json` and `<project>/.gjc/hooks.json`: each event fires with its
//! payload on stdin, `before_tool_call` denies or rewrites a call, every failure mode gives an
//! `extension_error` frame, and abort kills a running hook.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

/// A hook script in `dir`: records its stdin as one line of `log`, then runs `body`.
pub(crate) fn script(dir: &Path, name: &str, log: &Path, body: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "#!/bin/sh\n{{ cat; echo; }} >> '{}'\n{body}\n",
        log.display()
    );
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    path
}

pub(crate) fn hooks_file(path: &Path, hooks: Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, json!({ "hooks": hooks }).to_string()).unwrap();
}

/// The complete lines of the log (a hook may be writing the last one).
pub(crate) fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn tool_call(name: &str, args: Value) -> Value {
    json!({"content": [{"type": "toolCall", "name": name, "arguments": args}]})
}

pub(crate) fn say(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// A gjc whose agent-dir hooks file is written by `setup` before it starts.
/// Returns gjc and the hooks' log; the folder lives as long as the returned guard.
fn with_hooks(
    turns: Value,
    setup: impl FnOnce(&Path, &Path) -> Value,
) -> (Gjc, PathBuf, tempfile::TempDir) {
    let guard = tempfile::tempdir().unwrap();
    let dir = guard.path().to_path_buf();
    let log = dir.join("log.jsonl");
    let hooks = setup(&dir, &log);
    let agent = dir.join("agent");
    hooks_file(&agent.join("hooks.json"), hooks);
    let g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.to_str().unwrap())
        .env("GJC_COMPACT_KEEP_TOKENS", "1")
        .script(json!({ "turns": turns }))
        .spawn();
    (g, log, guard)
}

fn extension_error(g: &mut Gjc) -> Value {
    g.client
        .wait_for(|f| f["type"] == "extension_error", TIMEOUT)
        .expect("extension_error frame")
}

fn tool_end(g: &mut Gjc) -> Value {
    g.event("tool_execution_end")
}

fn text(result: &Value) -> String {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_event_fires_with_its_payload() {
    let (mut g, log, _dir) = with_hooks(
        json!([
            tool_call("ls", json!({"path": "."})),
            say("listed"),
            say("second"),
            say("SUMMARY")
        ]),
        |dir, log| {
            let h = script(dir, "record.sh", log, "exit 0");
            let h = h.to_str().unwrap();
            json!([
                "session_start",
                "before_tool_call",
                "after_tool_call",
                "before_compact",
                "session_end"
            ]
            .iter()
            .map(|e| json!({"event": e, "command": h}))
            .collect::<Vec<_>>())
        },
    );
    std::fs::write(g.project.join("marker.txt"), "x").unwrap();
    // session_start runs beside the session; the next hooks must not write the log at once.
    let deadline = Instant::now() + TIMEOUT;
    while logged(&log).is_empty() {
        assert!(Instant::now() < deadline, "no session_start hook ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    g.ok(json!({"type": "prompt", "message": "list"}));
    g.run_events();
    g.ok(json!({"type": "prompt", "message": "again"}));
    g.run_events();
    g.ok(json!({"type": "compact"}));
    let session = g.ok(json!({"type": "get_state"}))["sessionId"].clone();
    assert!(g.close_and_wait().is_some(), "gjc exits at EOF");
    let events = logged(&log);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "session_start",
            "before_tool_call",
            "after_tool_call",
            "before_compact",
            "session_end"
        ]
    );
    assert_eq!(events[0]["sessionId"], session);
    assert_eq!(events[4]["sessionId"], session);
    let before = &events[1];
    assert_eq!(before["toolName"], "ls");
    assert_eq!(before["arguments"], json!({"path": "."}));
    assert!(!before["toolCallId"].as_str().unwrap().is_empty());
    let after = &events[2];
    assert_eq!(after["toolCallId"], before["toolCallId"]);
    assert_eq!(after["isError"], false);
    assert!(after["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("marker.txt"));
    assert_eq!(events[3]["reason"], "manual");
}

#[test]
fn before_tool_call_denies_and_rewrites() {
    let (mut g, log, _dir) = with_hooks(
        json!([
            tool_call("bash", json!({"command": "echo should-not-run"})),
            tool_call("ls", json!({"path": "."})),
            tool_call("ls", json!({"path": "."})),
            say("done")
        ]),
        |dir, log| {
            let deny = script(
                dir,
                "deny.sh",
                log,
                r#"echo '{"decision":"deny","reason":"no shell here"}'"#,
            );
            let rewrite = script(
                dir,
                "rewrite.sh",
                log,
                r#"if [ -e "$1" ]; then echo '{"decision":"allow","arguments":{"path":7}}'; else touch "$1"; echo '{"decision":"allow","arguments":{"path":"sub"}}'; fi"#,
            );
            let flag = dir.join("rewritten-once");
            json!([
                {"event": "before_tool_call", "command": deny, "tools": ["bash"]},
                {"event": "before_tool_call", "command": rewrite, "tools": ["ls"], "args": [flag]}
            ])
        },
    );
    std::fs::create_dir(g.project.join("sub")).unwrap();
    std::fs::write(g.project.join("sub").join("inside.txt"), "x").unwrap();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let denied = tool_end(&mut g);
    assert_eq!(denied["isError"], true);
    assert_eq!(text(&denied), "Denied by hook: no shell here");
    assert_eq!(denied["result"]["details"]["reason"], "no shell here");
    let rewritten = tool_end(&mut g);
    assert_eq!(rewritten["isError"], false, "{rewritten}");
    assert!(text(&rewritten).contains("inside.txt"), "{rewritten}");
    // Rewritten arguments that break the schema deny the call, and say why.
    let invalid = tool_end(&mut g);
    assert_eq!(invalid["isError"], true);
    assert!(
        text(&invalid).contains("do not fit the ls tool"),
        "{invalid}"
    );
    let err = extension_error(&mut g);
    assert_eq!(err["event"], "before_tool_call");
    assert!(err["extensionPath"]
        .as_str()
        .unwrap()
        .ends_with("rewrite.sh"));
    g.event("agent_end");
    assert_eq!(logged(&log).len(), 3, "each hook saw its call");
}

/// Two failing `after_tool_call` hooks (non-zero exit, invalid JSON), and with `guard` the
/// invalid-JSON one as a `before_tool_call` hook too.
fn failing_hooks(guard: bool) -> (Gjc, tempfile::TempDir) {
    let (g, _log, dir) = with_hooks(
        json!([tool_call("ls", json!({"path": "."})), say("done")]),
        |dir, log| {
            let exits = script(dir, "exits.sh", log, "echo broken >&2; exit 3");
            let junk = script(dir, "junk.sh", log, "echo not json");
            let mut hooks = vec![
                json!({"event": "after_tool_call", "command": exits}),
                json!({"event": "after_tool_call", "command": junk}),
            ];
            if guard {
                hooks.push(json!({"event": "before_tool_call", "command": junk}));
            }
            Value::Array(hooks)
        },
    );
    (g, dir)
}

#[test]
fn a_failing_before_tool_call_hook_denies_the_call() {
    let (mut g, _dir) = failing_hooks(true);
    g.ok(json!({"type": "prompt", "message": "go"}));
    let end = tool_end(&mut g);
    assert_eq!(end["isError"], true, "before_tool_call fails closed");
    assert!(
        text(&end).contains("printed invalid JSON") && text(&end).contains("junk.sh"),
        "{end}"
    );
    let first = extension_error(&mut g);
    assert_eq!(first["event"], "before_tool_call");
    assert!(first["error"]
        .as_str()
        .unwrap()
        .starts_with("printed invalid JSON"));
    g.event("agent_end");
}

#[test]
fn failing_observer_hooks_give_extension_error_and_the_work_goes_on() {
    let (mut g, _dir) = failing_hooks(false);
    g.ok(json!({"type": "prompt", "message": "go"}));
    assert_eq!(tool_end(&mut g)["isError"], false);
    let a = extension_error(&mut g);
    let b = extension_error(&mut g);
    assert_eq!(a["event"], "after_tool_call");
    assert_eq!(a["error"], "exited with status 3: broken");
    assert!(b["error"]
        .as_str()
        .unwrap()
        .starts_with("printed invalid JSON"));
    assert_eq!(g.event("agent_end")["outcome"], "completed");
}

#[test]
fn a_bad_hooks_file_is_reported_and_skipped() {
    let (mut g, _log, _dir) = with_hooks(
        json!([say("hi")]),
        |_, _| json!([{"event": "on_boot", "command": "/bin/true"}]),
    );
    let err = extension_error(&mut g);
    assert_eq!(err["event"], "load");
    assert!(err["extensionPath"]
        .as_str()
        .unwrap()
        .ends_with("hooks.json"));
    assert!(
        err["error"].as_str().unwrap().contains("is not one of"),
        "{err}"
    );
    g.ok(json!({"type": "prompt", "message": "go"}));
    assert_eq!(g.event("agent_end")["outcome"], "completed");
}

#[test]
fn a_hook_that_never_exits_times_out() {
    let started = Instant::now();
    let (mut g, log, _dir) = with_hooks(
        json!([tool_call("ls", json!({"path": "."})), say("done")]),
        |dir, log| {
            let stuck = script(dir, "stuck.sh", log, "sleep 1000");
            json!([
                {"event": "session_start", "command": stuck, "timeoutMs": 300},
                {"event": "before_tool_call", "command": stuck, "timeoutMs": 300}
            ])
        },
    );
    let err = extension_error(&mut g);
    assert_eq!(err["event"], "session_start");
    assert_eq!(err["error"], "timed out after 300 ms and was killed");
    g.ok(json!({"type": "prompt", "message": "go"}));
    let end = tool_end(&mut g);
    assert_eq!(end["isError"], true);
    assert!(text(&end).contains("timed out after 300 ms"), "{end}");
    assert_eq!(extension_error(&mut g)["event"], "before_tool_call");
    g.event("agent_end");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(logged(&log).len(), 2);
}

/// A hook that prints without end fails when its output passes the cap, not at its timeout.
#[test]
fn a_hook_printing_without_end_fails_at_the_output_cap() {
    let started = Instant::now();
    let (mut g, _log, _dir) = with_hooks(
        json!([tool_call("ls", json!({"path": "."})), say("done")]),
        |dir, log| {
            let chatty = script(dir, "chatty.sh", log, "yes");
            json!([{"event": "before_tool_call", "command": chatty, "timeoutMs": 600000}])
        },
    );
    g.ok(json!({"type": "prompt", "message": "go"}));
    let end = tool_end(&mut g);
    assert_eq!(end["isError"], true, "before_tool_call fails closed");
    assert!(text(&end).contains("printed more than gjc reads"), "{end}");
    g.event("agent_end");
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn abort_kills_a_running_hook_and_get_state_never_waits() {
    let (mut g, log, _dir) = with_hooks(
        json!([tool_call("ls", json!({"path": "."})), say("never")]),
        |dir, log| {
            let slow = slow_script(dir, log);
            json!([{"event": "before_tool_call", "command": slow, "timeoutMs": 600000}])
        },
    );
    let pidfile = log.parent().unwrap().join("hook.pid");
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("tool_execution_start");
    let pid = hook_pid(&pidfile);
    let asked = Instant::now();
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["isStreaming"], true);
    assert!(asked.elapsed() < Duration::from_secs(2), "get_state waited");
    g.ok(json!({"type": "abort"}));
    let end = g.event("agent_end");
    assert_eq!(end["outcome"], "aborted");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "abort waited for the hook"
    );
    wait_gone(pid);
}

/// A hook that writes its pid to `<dir>/hook.pid`, then sleeps until it is killed.
pub(crate) fn slow_script(dir: &Path, log: &Path) -> PathBuf {
    let pidfile = dir.join("hook.pid");
    let body = format!("echo $$ > '{}'; sleep 1000", pidfile.display());
    script(dir, "slow.sh", log, &body)
}

/// The pid a hook wrote to `pidfile` once it runs (bounded wait).
pub(crate) fn hook_pid(pidfile: &Path) -> i32 {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(pid) = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the hook never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until the hook `pid` is gone or a zombie.
pub(crate) fn wait_gone(pid: i32) {
    let deadline = Instant::now() + TIMEOUT;
    // SAFETY: kill with signal 0 only checks that the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 && !is_zombie(pid) {
        assert!(Instant::now() < deadline, "the hook survived the abort");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

/// A host tool that a hook wraps runs on a tool thread (the hooks run there), not on the
/// session's direct path: the hooks see the call, the host still gets it and answers it, and
/// an abort while the host works still sends the cancel.
#[test]
fn a_hooked_host_tool_reaches_the_host_and_its_hooks() {
    let echo = json!({"name": "echo_host", "description": "Echo from the host",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}}});
    let (mut g, log, _dir) = with_hooks(
        json!([
            tool_call("echo_host", json!({"message": "hi"})),
            say("done"),
            tool_call("echo_host", json!({"message": "slow"}))
        ]),
        |dir, log| {
            let h = script(dir, "record.sh", log, "exit 0");
            let h = h.to_str().unwrap();
            json!([
                {"event": "before_tool_call", "command": h},
                {"event": "after_tool_call", "command": h}
            ])
        },
    );
    g.ok(json!({"type": "set_host_tools", "tools": [echo]}));
    g.ok(json!({"type": "prompt", "message": "echo"}));
    let call = g
        .client
        .wait_for(|f| f["type"] == "host_tool_call", TIMEOUT)
        .expect("host_tool_call");
    assert_eq!(call["arguments"], json!({"message": "hi"}));
    g.client.send(&json!({"type": "host_tool_result", "id": call["id"], "result": {"content": [{"type": "text", "text": "echo: hi"}]}})).unwrap();
    assert_eq!(text(&tool_end(&mut g)), "echo: hi");
    g.event("agent_end");
    let events: Vec<String> = logged(&log)
        .iter()
        .filter(|e| e["toolName"] == "echo_host")
        .map(|e| e["event"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(events, ["before_tool_call", "after_tool_call"]);

    g.ok(json!({"type": "prompt", "message": "again"}));
    let call = g
        .client
        .wait_for(|f| f["type"] == "host_tool_call", TIMEOUT)
        .expect("host_tool_call");
    g.ok(json!({"type": "abort"}));
    let cancel = g
        .client
        .wait_for(|f| f["type"] == "host_tool_cancel", TIMEOUT)
        .expect("host_tool_cancel");
    assert_eq!(cancel["targetId"], call["id"]);
    g.event("agent_end");
}
