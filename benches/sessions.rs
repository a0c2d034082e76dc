//! Session benchmarks: generated session files of 2,000 and 20,000 messages; `switch_session` and
//! `get_messages` latency and RSS after switching (beside the RSS of an idle gjc in the same run),
//! and `export_html` time for the large one. Latencies run from writing the command to the last
//! byte of its response line; the host's own parse of that line is printed on its own, and so is
//! `cat` moving the same bytes into the same host (the floor under any reader of those bytes).
//!
//! `cargo bench --bench sessions -- big` instead switches to a 100,000-message session: peak RSS during the switch
//! and the time from closing stdin to the process exiting afterwards, beside an idle gjc's;
//! `GJC_BASELINE_BIN=<another gjc>` measures that binary too, in the same rounds.
//!
//! Run: `cargo bench --bench sessions`

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use gjc::protocol::message::AgentMessage;
use gjc::session::store::Store;
use serde_json::json;

/// Writes a session of `messages` alternating user and assistant messages the way gjc writes
/// them (through its own session store); returns the file.
fn generate(dir: &Path, messages: usize, words: usize) -> PathBuf {
    let mut store = Store::create(dir, &format!("bench{messages}"), Path::new("/tmp"), None);
    for i in 0..messages {
        let text = format!(
            "message {i}: {}",
            "lorem ipsum dolor sit amet ".repeat(words)
        );
        let message = if i % 2 == 0 {
            json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": text}], "api": "scripted", "provider": "scripted", "model": "scripted",
                "usage": {"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 20, "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}},
                "stopReason": "stop", "timestamp": 0})
        };
        let message: AgentMessage = serde_json::from_value(message).unwrap();
        store.append_message(&message).unwrap();
    }
    store.path().unwrap().to_path_buf()
}

/// A host that only reads lines: latency is the time until a response line has fully arrived;
/// parsing it is the host's business and is timed separately.
struct LineHost {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next: u64,
}

impl LineHost {
    fn spawn(agent_dir: &Path, session_dir: &Path) -> LineHost {
        LineHost::spawn_bin(&gjc_bin(), agent_dir, session_dir)
    }

    fn spawn_bin(bin: &Path, agent_dir: &Path, session_dir: &Path) -> LineHost {
        let mut child = std::process::Command::new(bin)
            .args(["--mode", "rpc", "--session-dir"])
            .arg(session_dir)
            .env("GJC_CODING_AGENT_DIR", agent_dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut host = LineHost {
            child,
            stdin,
            stdout,
            next: 0,
        };
        host.line(); // ready
        host
    }

    fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        std::io::BufRead::read_until(&mut self.stdout, b'\n', &mut line).unwrap();
        assert!(!line.is_empty(), "gjc closed its stdout");
        line
    }

    /// Sends `command` and returns its response line and the time until it had fully arrived.
    fn request(&mut self, mut command: serde_json::Value) -> (Duration, Vec<u8>) {
        self.next += 1;
        let id = format!("b{}", self.next);
        command["id"] = json!(id);
        let prefix = format!("{{\"id\":\"{id}\"");
        let started = Instant::now();
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = self.line();
            if line.starts_with(prefix.as_bytes()) {
                return (started.elapsed(), line);
            }
        }
    }
}

impl LineHost {
    /// Closes stdin and waits for the process to exit: the time it took.
    fn exit(&mut self) -> Duration {
        let started = Instant::now();
        drop(self.stdin.take());
        self.child.wait().unwrap();
        started.elapsed()
    }
}

impl Drop for LineHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The time for `cat` to start and for this host to read `path` through a pipe, line by line the
/// way it reads gjc: the floor under moving those bytes from the page cache to a host.
fn cat(path: &Path) -> Duration {
    let started = Instant::now();
    let mut child = std::process::Command::new("cat")
        .arg(path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = Vec::new();
    while std::io::BufRead::read_until(&mut out, b'\n', &mut line).unwrap() > 0 {
        line.clear();
    }
    let took = started.elapsed();
    child.wait().unwrap();
    took
}

/// What one binary's rounds of `big` measured.
#[derive(Default)]
struct BigRounds {
    idle_peak: Vec<f64>,
    idle_exit: Vec<f64>,
    peak: Vec<f64>,
    after: Vec<f64>,
    exit: Vec<f64>,
    switch: Vec<f64>,
}

impl BigRounds {
    /// One round: an idle gjc's peak and exit, then a switch to `path` and the exit after it.
    fn round(&mut self, bin: &Path, dir: &Path, path: &Path) {
        let mut host = LineHost::spawn_bin(bin, dir, &dir.join("new"));
        host.request(json!({"type": "get_state"}));
        self.idle_peak
            .push(status_kib(host.child.id(), "VmHWM").unwrap_or(0) as f64 / 1024.0);
        self.idle_exit.push(ms(host.exit()));
        let mut host = LineHost::spawn_bin(bin, dir, &dir.join("new"));
        let pid = host.child.id();
        let (took, line) = host.request(json!({"type": "switch_session", "sessionPath": path}));
        assert!(line.windows(14).any(|w| w == b"\"success\":true"));
        self.switch.push(ms(took));
        self.peak
            .push(status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0);
        self.after
            .push(status_kib(pid, "VmRSS").unwrap_or(0) as f64 / 1024.0);
        self.exit.push(ms(host.exit()));
    }

    fn print(&mut self, name: &str, size: usize, bytes: u64, rounds: usize) {
        println!(
            "{name}: switch to {size} messages ({:.1} MB file), median of {rounds}: switch {:.1} ms, peak RSS {:.1} MB, RSS after {:.1} MB, stdin EOF -> exit {:.1} ms",
            bytes as f64 / 1e6,
            median(&mut self.switch),
            median(&mut self.peak),
            median(&mut self.after),
            median(&mut self.exit)
        );
        println!(
            "  idle gjc in the same run: peak RSS {:.1} MB, stdin EOF -> exit {:.1} ms",
            median(&mut self.idle_peak),
            median(&mut self.idle_exit)
        );
    }
}

/// Peak RSS of a switch to a 100,000-message session, and exit afterwards, beside idle gjc (and
/// beside `GJC_BASELINE_BIN`'s figures, rounds interleaved, when it is given).
fn big() {
    let dir = tempfile::tempdir().unwrap();
    let size = 100_000;
    let path = generate(dir.path(), size, 22);
    let bytes = std::fs::metadata(&path).unwrap().len();
    let mut bins = vec![("gjc", gjc_bin(), BigRounds::default())];
    if let Some(base) = std::env::var_os("GJC_BASELINE_BIN") {
        bins.push(("baseline", PathBuf::from(base), BigRounds::default()));
    }
    let rounds = 5;
    for _ in 0..rounds {
        for (_, bin, measured) in &mut bins {
            measured.round(bin, dir.path(), &path);
        }
    }
    for (name, _, measured) in &mut bins {
        measured.print(name, size, bytes, rounds);
    }
}

fn main() {
    if args().next().as_deref() == Some("big") {
        return big();
    }
    let dir = tempfile::tempdir().unwrap();
    let mut idle = Vec::new();
    for size in [2_000usize, 20_000] {
        let path = generate(dir.path(), size, 8);
        let bytes = std::fs::metadata(&path).unwrap().len();
        let (mut switch, mut get, mut parse, mut rss) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut cat_file, mut cat_response) = (Vec::new(), Vec::new());
        let response_copy = dir.path().join("response.json");
        for round in 0..7 {
            let mut host = LineHost::spawn(dir.path(), &dir.path().join("new"));
            host.request(json!({"type": "get_state"}));
            let pid = host.child.id();
            idle.push(status_kib(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0);
            let (took, line) = host.request(json!({"type": "switch_session", "sessionPath": path}));
            switch.push(ms(took));
            let r: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(r["success"], true, "{r}");
            let (took, line) = host.request(json!({"type": "get_messages"}));
            get.push(ms(took));
            let t = Instant::now();
            let r: serde_json::Value = serde_json::from_slice(&line).unwrap();
            parse.push(ms(t.elapsed()));
            assert_eq!(r["data"]["messages"].as_array().unwrap().len(), size);
            rss.push(status_kib(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0);
            std::fs::write(&response_copy, &line).unwrap();
            cat_file.push(ms(cat(&path)));
            cat_response.push(ms(cat(&response_copy)));
            if size == 20_000 && round == 0 {
                let (took, line) = host.request(
                    json!({"type": "export_html", "outputPath": dir.path().join("big.html")}),
                );
                let r: serde_json::Value = serde_json::from_slice(&line).unwrap();
                let html = std::fs::metadata(r["data"]["path"].as_str().unwrap())
                    .unwrap()
                    .len();
                println!(
                    "export_html of {size} messages: {:.1} ms ({:.1} MB of HTML)",
                    ms(took),
                    html as f64 / 1e6
                );
            }
        }
        println!(
            "{size} messages ({:.1} MB file), median of 7: switch_session {:.1} ms, get_messages {:.1} ms, switch + get {:.1} ms, RSS after {:.1} MB",
            bytes as f64 / 1e6,
            median(&mut switch.clone()),
            median(&mut get.clone()),
            median(&mut switch) + median(&mut get),
            median(&mut rss)
        );
        println!(
            "  (the host's own parse of that get_messages line into serde_json::Value: {:.1} ms, not included above)",
            median(&mut parse)
        );
        println!(
            "  baselines in the same run, each including cat's start: `cat` of the session file into this host {:.1} ms, `cat` of the get_messages line {:.1} ms",
            median(&mut cat_file),
            median(&mut cat_response)
        );
    }
    println!(
        "idle gjc RSS in the same run (baseline): {:.1} MB",
        median(&mut idle)
    );
}
