//! A host that stops reading stdout: gjc's control lane still acts (abort, SIGTERM, EOF), its
//! memory stays bounded, and nothing it promised is lost once the host reads again.
//!
//! These tests drive gjc through raw pipes: the test client's reader thread would drain stdout.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::contract::Contract;
use crate::support::procfs::{status_kib, threads};
use crate::support::TIMEOUT;

/// A scripted turn that streams `chars` characters two at a time and then stalls until aborted:
/// in reference-shape frames that is far more output than any pipe holds.
fn long_stalling_turn(chars: usize) -> Value {
    json!({"turns": [{"content": [{"type": "text", "text": "ab".repeat(chars / 2)}],
        "chunkChars": 2, "stall": true}]})
}

struct RawGjc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    _home: tempfile::TempDir,
}

impl RawGjc {
    fn spawn(script: Value) -> RawGjc {
        let home = tempfile::tempdir().unwrap();
        let script_path = home.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_gjc"))
            .args([
                "--mode",
                "rpc",
                "--no-session",
                "--provider",
                "scripted",
                "--script",
            ])
            .arg(&script_path)
            .env("HOME", home.path())
            .env("GJC_CODING_AGENT_DIR", home.path().join("agent"))
            .env("RUST_LOG", "warn")
            .current_dir(home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).unwrap();
        assert!(ready.starts_with(r#"{"type":"ready""#), "{ready}");
        RawGjc {
            child,
            stdin,
            stdout,
            _home: home,
        }
    }

    fn send(&mut self, frame: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{frame}").unwrap();
        stdin.flush().unwrap();
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads frames (checking each against the client contract) until `stop` matches one.
    fn read_until(&mut self, contract: &Contract, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut frames = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                panic!("gjc closed stdout before the expected frame");
            }
            contract.check(line.trim_end_matches('\n'));
            let v: Value = serde_json::from_str(&line).unwrap();
            let done = stop(&v);
            frames.push(v);
            if done {
                return frames;
            }
        }
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }
}

impl Drop for RawGjc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_micros(200));
    }
    start.elapsed()
}

/// Starts a long turn, then stops reading until stdout is full and the stream stalls.
fn blocked_host() -> RawGjc {
    let mut g = RawGjc::spawn(long_stalling_turn(200_000));
    g.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let pid = g.pid();
    // The provider thread runs until the turn's text is all streamed and it stalls; by then
    // gjc has long filled the pipe nobody reads.
    wait_until("the stream to start", TIMEOUT, || {
        threads(pid).iter().any(|t| t == "gjc-provider")
    });
    std::thread::sleep(Duration::from_millis(300));
    g
}

#[test]
fn abort_acts_at_once_while_the_host_reads_nothing() {
    let mut g = blocked_host();
    let pid = g.pid();
    assert!(threads(pid).iter().any(|t| t == "gjc-provider"));
    g.send(json!({"id": "a", "type": "abort"}));
    let took = wait_until("the stream to be shut down", TIMEOUT, || {
        !threads(pid).iter().any(|t| t == "gjc-provider")
    });
    // Generous for a loaded CI machine; the benchmark measures the real figure.
    assert!(took < Duration::from_millis(500), "abort took {took:?}");
    // Memory stayed bounded while the host read nothing.
    let peak_mb = status_kib(pid, "VmHWM").unwrap_or(0) / 1024;
    assert!(
        peak_mb < 64,
        "peak RSS {peak_mb} MB while stdout was blocked"
    );

    // Reading again, the host gets every promised frame: the prompt and abort responses and
    // exactly one agent_end, with the whole streamed text in the final message.
    let contract = Contract::default();
    let frames = g.read_until(&contract, |f| f["payload"]["event_type"] == "agent_end");
    let end = frames.last().unwrap().clone();
    let answered = |frames: &[Value], id: &str| {
        frames
            .iter()
            .any(|r| r["type"] == "response" && r["id"] == id && r["success"] == true)
    };
    assert!(answered(&frames, "p"));
    // The abort is answered once it has acted, right after the run's end.
    if !answered(&frames, "a") {
        let rest = g.read_until(&contract, |f| f["type"] == "response");
        assert!(answered(&rest, "a"), "{rest:?}");
    }
    assert_eq!(end["payload"]["event"]["outcome"], "aborted");
    let streamed: String = frames
        .iter()
        .filter(|f| f["payload"]["event_type"] == "message_update")
        .filter_map(|f| f["payload"]["event"]["assistantMessageEvent"]["delta"].as_str())
        .collect();
    let last_end = frames
        .iter()
        .rev()
        .find(|f| f["payload"]["event_type"] == "message_end")
        .unwrap();
    let final_text = last_end["payload"]["event"]["message"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert_eq!(
        streamed, final_text,
        "every streamed byte arrives, in order"
    );
    let updates = frames
        .iter()
        .filter(|f| f["payload"]["event_type"] == "message_update")
        .count();
    assert!(
        updates < final_text.len() / 2,
        "deltas were merged while the host did not read ({updates} frames)"
    );
    assert_eq!(contract.violations(), Vec::<String>::new());
}

#[test]
fn sigterm_exits_within_a_second_while_the_host_reads_nothing() {
    let mut g = blocked_host();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(g.pid() as i32, libc::SIGTERM) };
    let took = g.wait_exit(Duration::from_secs(5)).expect("gjc exited");
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
}

#[test]
fn stdin_eof_exits_within_a_second_while_the_host_reads_nothing() {
    let mut g = blocked_host();
    g.stdin = None;
    let took = g.wait_exit(Duration::from_secs(5)).expect("gjc exited");
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
}
