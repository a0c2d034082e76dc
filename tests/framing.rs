//! Framing and bad input: ready first, id echo, malformed / huge / invalid-UTF-8 lines answered,
//! nothing lost or reordered, the process stays up until stdin closes.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{gjc, TIMEOUT};

fn next_response(g: &mut crate::support::Gjc) -> Value {
    g.client
        .wait_for(|f| f["type"] == "response", TIMEOUT)
        .expect("a response")
}

#[test]
fn bad_lines_get_documented_answers_and_the_process_stays_up() {
    let mut g = gjc().spawn();
    let cases: Vec<(&[u8], &str, Option<&str>)> = vec![
        (b"{not json\n", "parse", None),
        (b"[1,2,3]\n", "parse", None),
        (b"42\n", "parse", None),
        (b"null\n", "parse", None),
        (
            b"{\"id\":\"n0\",\"type\":\"get\x00state\"}\n",
            "parse",
            None,
        ),
        (
            b"{\"id\":\"n1\",\"type\":\"get\\u0000state\"}\n",
            "get\u{0}state",
            Some("n1"),
        ),
        (
            b"{\"id\":\"u1\",\"type\":\"frobnicate\"}\n",
            "frobnicate",
            Some("u1"),
        ),
        (b"{\"id\":\"t1\"}\n", "parse", Some("t1")),
        (
            b"{\"id\":\"w1\",\"type\":\"set_session_name\",\"name\":42}\n",
            "set_session_name",
            Some("w1"),
        ),
        (
            b"{\"id\":\"w2\",\"type\":\"set_model\",\"provider\":\"x\"}\n",
            "set_model",
            Some("w2"),
        ),
        (
            b"{\"id\":\"i1\",\"type\":\"set_session_name\",\"name\":\"a\xff\xfeb\"}\r\n",
            "set_session_name",
            Some("i1"),
        ),
    ];
    for (line, command, id) in cases {
        g.client.send_raw(line).unwrap();
        let r = next_response(&mut g);
        assert_eq!(
            r["command"],
            command,
            "line {:?}: {r}",
            String::from_utf8_lossy(line)
        );
        assert_eq!(r["id"].as_str(), id, "{r}");
        if command != "set_session_name" || id != Some("i1") {
            assert_eq!(r["success"], false, "{r}");
            assert!(r["error"].is_string(), "{r}");
        }
    }
    // Empty and blank lines are skipped without an answer; the next command still works.
    g.client.send_raw(b"\n   \n\r\n").unwrap();
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(
        state["sessionName"], "a\u{fffd}\u{fffd}b",
        "invalid UTF-8 is replaced, not fatal"
    );
}

#[test]
fn error_messages_name_the_field() {
    let mut g = gjc().spawn();
    let r = g.request(json!({"type": "prompt", "message": 5}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("message: invalid type"),
        "{r}"
    );
    let r = g.request(json!({"type": "set_todos"}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("missing field `phases`"),
        "{r}"
    );
}

#[test]
fn oversize_line_is_a_parse_error_and_later_lines_still_work() {
    let mut g = gjc().env("GJC_MAX_LINE_BYTES", "1048576").spawn();
    let big = format!(
        "{{\"id\":\"big\",\"type\":\"prompt\",\"message\":\"{}\"}}\n",
        "x".repeat(3 * 1024 * 1024)
    );
    g.client.send_raw(big.as_bytes()).unwrap();
    let r = next_response(&mut g);
    assert_eq!(r["command"], "parse");
    assert!(r["error"].as_str().unwrap().contains("exceeds"), "{r}");
    g.ok(json!({"type": "get_state"}));
}

#[test]
fn a_64_mib_line_is_refused_without_killing_the_process() {
    let mut g = gjc().spawn();
    let mut line = vec![b'x'; 64 * 1024 * 1024 + 16];
    line.push(b'\n');
    g.client.send_raw(&line).unwrap();
    let r = next_response(&mut g);
    assert_eq!(r["command"], "parse");
    g.ok(json!({"type": "get_state"}));
}

#[test]
fn ten_thousand_commands_in_one_burst_keep_their_order() {
    let mut g = gjc().spawn();
    let mut burst = Vec::new();
    for i in 0..10_000 {
        let cmd = if i % 2 == 0 {
            json!({"id": format!("b{i}"), "type": "get_state"})
        } else {
            json!({"id": format!("b{i}"), "type": "set_steering_mode", "mode": "all"})
        };
        burst.extend_from_slice(cmd.to_string().as_bytes());
        burst.push(b'\n');
    }
    g.client.send_raw(&burst).unwrap();
    for i in 0..10_000 {
        let r = next_response(&mut g);
        assert_eq!(r["id"], format!("b{i}"), "response {i} out of order");
        assert_eq!(r["success"], true);
    }
}

#[test]
fn line_separators_are_escaped_in_output() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "set_todos", "phases": [{"name": "p", "tasks": [{"content": "a\u{2028}b\u{2029}c"}]}]}));
    g.client
        .send(&json!({"id": "s", "type": "get_state"}))
        .unwrap();
    let frame = g
        .client
        .wait_for_frame(|f| f["id"] == "s", TIMEOUT)
        .unwrap();
    assert!(frame.line.contains(r"a\u2028b\u2029c"), "{}", frame.line);
    assert!(!frame.line.contains('\u{2028}'));
}

#[test]
fn stdin_eof_exits_zero_within_a_second() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "get_state"}));
    let started = Instant::now();
    let status = g.close_and_wait().expect("gjc exited");
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn sigterm_exits_cleanly() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "get_state"}));
    unsafe { libc::kill(g.client.pid() as i32, libc::SIGTERM) };
    let status = g
        .client
        .wait_exit(Duration::from_secs(5))
        .expect("gjc exited");
    assert!(status.success(), "{status:?}");
}

#[test]
fn cli_rejects_file_arguments_and_other_modes() {
    let bin = env!("CARGO_BIN_EXE_gjc");
    let gjc_command = || {
        let mut command = std::process::Command::new(bin);
        (crate::support::isolate(&mut command), command)
    };
    let (_home, mut command) = gjc_command();
    let out = command
        .args(["--mode", "rpc", "@notes.md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("@file arguments are not supported"));
    assert!(out.stdout.is_empty(), "nothing may reach stdout");
    let (_home, mut command) = gjc_command();
    let out = command.args(["--mode", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let (_home, mut command) = gjc_command();
    let out = command.arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("gjc "));
}

/// Whether `pid` is gone or only a zombie waiting for a reaper that is not us.
pub fn has_exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
        Err(_) => true,
    }
}

/// Polls `has_exited` until `limit`; the bounded wait for a process that is not our child.
pub fn wait_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if has_exited(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    has_exited(pid)
}

#[test]
fn parent_death_ends_gjc_while_its_stdin_stays_open() {
    use std::io::{BufRead, BufReader};
    // sh starts gjc in the background (stdin passed on explicitly), prints its pid, then becomes
    // `sleep`; killing that process orphans gjc while this test still holds gjc's stdin open.
    let mut command = std::process::Command::new("sh");
    let _home = crate::support::isolate(&mut command);
    let mut parent = command
        .arg("-c")
        .arg(r#"exec 4<&0; "$0" --mode rpc --no-session <&4 & echo "$!"; exec sleep 1000"#)
        .arg(env!("CARGO_BIN_EXE_gjc"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _stdin = parent.stdin.take().unwrap();
    let mut out = BufReader::new(parent.stdout.take().unwrap());
    let (mut pid_line, mut ready) = (String::new(), String::new());
    out.read_line(&mut pid_line).unwrap();
    let pid: u32 = pid_line.trim().parse().expect("gjc's pid");
    out.read_line(&mut ready).unwrap();
    assert!(ready.starts_with(r#"{"type":"ready","#), "{ready}");
    assert!(!has_exited(pid));

    parent.kill().unwrap();
    parent.wait().unwrap();
    assert!(
        wait_gone(pid, Duration::from_secs(5)),
        "gjc {pid} outlived its parent"
    );
}

#[test]
fn closed_stdout_is_a_clean_exit() {
    use std::io::{BufRead, BufReader, Write};
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gjc"));
    let _home = crate::support::isolate(&mut command);
    let mut child = command
        .args(["--mode", "rpc", "--no-session"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert!(ready.starts_with(r#"{"type":"ready","#), "{ready}");
    // The reader above is dropped: the host is gone. The next frame gjc writes fails.
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"id\":\"1\",\"type\":\"get_state\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    let pid = child.id();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| {
            // SAFETY: plain kill of the process this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("gjc kept running after its stdout closed")
        })
        .unwrap();
    assert!(status.success(), "{status:?}");
    drop(stdin);
}
