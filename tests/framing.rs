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
    let out = std::process::Command::new(bin)
        .args(["--mode", "rpc", "@notes.md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("@file arguments are not supported"));
    assert!(out.stdout.is_empty(), "nothing may reach stdout");
    let out = std::process::Command::new(bin)
        .args(["--mode", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = std::process::Command::new(bin)
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("gjc "));
}
