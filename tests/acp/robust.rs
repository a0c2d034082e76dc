//! `$/cancel_request`, and gjc under a client that misbehaves: its parent dies, or it stops
//! reading stdout in the middle of a long reply.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{acp, gjc_in, streaming, takes_the_next_prompt, validate};
use crate::framing::{has_exited, wait_gone};
use crate::hardening_process::{kill_leftover, Host};
use crate::support::procfs::{status_kib, threads};
use crate::support::TIMEOUT;

#[test]
fn cancel_request_for_a_running_prompt_is_answered_request_cancelled() {
    let (mut g, session, id) = streaming();
    g.notify("$/cancel_request", json!({"requestId": id}));
    let (response, _) = g.response(id);
    assert_eq!(response["error"]["code"], -32800, "{response}");
    takes_the_next_prompt(&mut g, &session);
}

#[test]
fn session_cancel_wins_over_cancel_request() {
    let (mut g, session, id) = streaming();
    // `session/cancel` asks for the `cancelled` stop reason; a `$/cancel_request` after it
    // does not turn that into an error.
    g.notify("session/cancel", json!({"sessionId": session}));
    g.notify("$/cancel_request", json!({"requestId": id}));
    let (reason, _) = g.stop_reason(id);
    assert_eq!(reason, "cancelled");
}

#[test]
fn a_model_change_under_way_is_answered_request_cancelled_once() {
    let mut g = acp(json!({"turns": []}));
    g.initialize(json!({}));
    let session = g.new_session();
    // A model change goes through the session. The cancel comes in the same write, so it
    // usually reaches the front end before the session has answered; when the session is
    // quicker, its answer stands and the cancel is ignored. Either way there is exactly one
    // answer. The cancel must win at least once. (`session/new` used to be the request under
    // way here; a live session now starts inside the front end and is answered at once.)
    for _ in 0..20 {
        let id = g.next_id;
        g.next_id += 1;
        let set = json!({"jsonrpc": "2.0", "id": id, "method": "session/set_config_option",
                         "params": {"sessionId": session, "configId": "model",
                                    "value": "scripted/scripted"}});
        let cancel = json!({"jsonrpc": "2.0", "method": "$/cancel_request",
                            "params": {"requestId": id}});
        g.send_line(&format!("{set}\n{cancel}"));
        let (response, _) = g.response(id);
        // Exactly one answer: the next message about `id` would be a second one.
        let auth = g.request("authenticate", json!({"methodId": "none"}));
        let (answer, before) = g.response(auth);
        assert_eq!(answer["result"], json!({}));
        assert!(
            before
                .iter()
                .all(|m| m["id"] != id || m.get("method").is_some()),
            "{before:?}"
        );
        if response["error"]["code"] == -32800 {
            return;
        }
        assert!(response["result"]["configOptions"].is_array(), "{response}");
    }
    panic!("the cancel never reached gjc before the model change was answered");
}

#[test]
fn unknown_or_malformed_cancel_requests_are_ignored() {
    let mut g = acp(json!({"turns": []}));
    g.initialize(json!({}));
    for params in [
        json!({"requestId": 999}),
        json!({"requestId": "nope"}),
        json!({}),
        Value::Null,
    ] {
        g.notify("$/cancel_request", params);
    }
    let id = g.request("authenticate", json!({"methodId": "none"}));
    let first = g.next();
    assert_eq!(first["id"], id, "nothing answers a notification: {first}");
    assert_eq!(first["result"], json!({}));
}

#[test]
fn parent_death_ends_gjc_and_the_command_it_ran() {
    let home = tempfile::tempdir().unwrap();
    let script = json!({"turns": [{"content": [{"type": "toolCall", "name": "bash",
        "id": "call_s", "arguments": {"command": "echo $$ > shell.pid; sleep 1000"}}]}]});
    let (gjc, project) = gjc_in(home.path(), &script);
    // sh starts gjc in the background (stdin passed on explicitly), prints its pid, then
    // becomes `sleep`; killing that process orphans gjc while this test holds its stdin open.
    let mut parent = Command::new("sh");
    parent
        .arg("-c")
        .arg(r#"exec 4<&0; "$0" "$@" <&4 & echo "$!"; exec sleep 1000"#)
        .arg(gjc.get_program())
        .args(gjc.get_args())
        .current_dir(&project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (key, value) in gjc.get_envs() {
        if let Some(value) = value {
            parent.env(key, value);
        }
    }
    let mut parent = parent.spawn().unwrap();
    let mut stdin = parent.stdin.take().unwrap();
    let mut out = BufReader::new(parent.stdout.take().unwrap());
    let mut pid = String::new();
    out.read_line(&mut pid).unwrap();
    let pid: u32 = pid.trim().parse().expect("gjc's pid");
    // The reader thread keeps gjc's stdout drained for the whole test.
    let (tx, lines) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let messages = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
               "params": {"cwd": project, "mcpServers": []}}),
    ];
    for m in messages {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
    let session = loop {
        let line = lines.recv_timeout(TIMEOUT).expect("session/new answered");
        let m: Value = serde_json::from_str(&line).unwrap();
        validate(&m);
        if m["id"] == 1 {
            break m["result"]["sessionId"].as_str().unwrap().to_string();
        }
    };
    for m in [
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/set_config_option",
               "params": {"sessionId": session, "configId": "permissions", "value": "allow_all"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
               "params": {"sessionId": session, "prompt": [{"type": "text", "text": "sleep"}]}}),
    ] {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
    let pid_file = project.join("shell.pid");
    let shell = wait_for(TIMEOUT, || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
    })
    .expect("the command started");
    assert!(!has_exited(pid) && !has_exited(shell));

    parent.kill().unwrap();
    parent.wait().unwrap();
    let gjc_gone = wait_gone(pid, Duration::from_secs(5));
    let shell_gone = wait_gone(shell, Duration::from_secs(5));
    kill_leftover(pid);
    kill_leftover(shell);
    assert!(gjc_gone, "gjc {pid} outlived its parent");
    assert!(shell_gone, "the command {shell} outlived gjc");
    drop(stdin);
}

/// Polls `probe` until it gives a value or `limit` passes.
fn wait_for<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads lines from a raw stdout, checking each against the protocol's types, until `stop`.
fn read_until(
    out: &mut BufReader<std::process::ChildStdout>,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut seen = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        let read = out.read_line(&mut line).unwrap();
        assert!(read > 0, "gjc closed stdout before the expected message");
        let m: Value = serde_json::from_str(&line).unwrap();
        validate(&m);
        let done = stop(&m);
        seen.push(m);
        if done {
            return seen;
        }
    }
}

#[test]
fn session_cancel_acts_while_the_client_reads_nothing() {
    let home = tempfile::tempdir().unwrap();
    // Far more output, as `session/update`s, than a pipe holds; then a stall until stopped.
    let script = json!({"turns": [{"content": [{"type": "text", "text": "ab".repeat(100_000)}],
        "chunkChars": 2, "stall": true}]});
    let (mut command, project) = gjc_in(home.path(), &script);
    let mut child = Host(
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let mut stdin = child.0.stdin.take().unwrap();
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut send = |m: Value| {
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
    };
    send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                "params": {"cwd": project, "mcpServers": []}}));
    let created = read_until(&mut out, |m| m["id"] == 1);
    let session = created.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}}),
    );
    // Nothing is read from here on. The provider thread lives until the reply has streamed and
    // stalls; by then the front end has long filled the pipe and is blocked writing.
    let started = wait_for(TIMEOUT, || {
        threads(pid)
            .iter()
            .any(|t| t == "gjc-provider")
            .then_some(())
    });
    assert!(started.is_some(), "the stream started");
    std::thread::sleep(Duration::from_millis(300));

    send(json!({"jsonrpc": "2.0", "method": "session/cancel",
                "params": {"sessionId": session}}));
    let start = Instant::now();
    let stopped = wait_for(TIMEOUT, || {
        (!threads(pid).iter().any(|t| t == "gjc-provider")).then_some(())
    });
    let took = start.elapsed();
    assert!(stopped.is_some(), "the stream was not shut down");
    // Generous for a loaded machine; the point is that it does not wait for the client.
    assert!(took < Duration::from_secs(1), "cancel took {took:?}");
    let peak_mb = status_kib(pid, "VmHWM").unwrap_or(0) / 1024;
    assert!(
        peak_mb < 64,
        "peak RSS {peak_mb} MB while stdout was blocked"
    );

    // Reading again, the client gets the streamed text and then the `cancelled` answer.
    let seen = read_until(&mut out, |m| m["id"] == 2);
    let answer = seen.last().unwrap();
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let chunks: Vec<&str> = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    let streamed = chunks.concat();
    // The run stopped wherever the stream was; what was streamed arrives whole and in order,
    // and deltas were merged while the client did not read.
    assert!(!streamed.is_empty());
    assert!("ab".repeat(100_000).starts_with(&streamed), "bytes lost");
    assert!(chunks.len() < streamed.len() / 2, "{} chunks", chunks.len());
}
