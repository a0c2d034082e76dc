//! The default (reference-shape) frames, where every `message_update` carries the message so far,
//! each figure beside compact frames in the same run:
//! - `get_state` latency while a 10,000-delta reply streams (a `get_state` every 2 ms over five
//!   such turns, from writing the line to its response arriving), and with nothing streaming;
//! - peak RSS of gjc over a 100,000-delta reply, the host reading everything, beside idle.
//!
//! The host reads raw lines on a thread and parses only its own responses.
//!
//! Run: `cargo bench --bench default_stream`
//! (`... get_state` for the latency part only; `GJC_BIN=path` measures another gjc binary).

mod common;
#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use crossbeam_channel::{unbounded, Receiver};
use fake_provider::{openai_deltas, FakeProvider, Reply};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(300);

enum Line {
    /// The response to `get_state` number n, and when it arrived.
    State(u64, Instant),
    End,
}

struct Host {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Line>,
    _home: tempfile::TempDir,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(fake: &FakeProvider, compact: bool) -> Host {
    let home = tempfile::tempdir().unwrap();
    let model = json!([{"id": "m", "contextWindow": 1000000, "maxTokens": 4096}]);
    let models = json!({"providers": {"fake": {"baseUrl": format!("{}/v1", fake.base_url), "api": "openai-completions", "apiKey": "k", "models": model}}});
    std::fs::write(home.path().join("models.json"), models.to_string()).unwrap();
    let mut cmd = Command::new(gjc_bin());
    cmd.args([
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "fake",
        "--model",
        "m",
    ]);
    if compact {
        cmd.arg("--compact-updates");
    }
    let mut child = cmd
        .env("GJC_CODING_AGENT_DIR", home.path())
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let (tx, lines) = unbounded();
    std::thread::spawn(move || {
        let mut line = Vec::new();
        loop {
            line.clear();
            if out.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                return;
            }
            if let Some(rest) = line.strip_prefix(b"{\"id\":\"gs") {
                let end = rest.iter().position(|b| *b == b'"').unwrap();
                let n = std::str::from_utf8(&rest[..end]).unwrap().parse().unwrap();
                let _ = tx.send(Line::State(n, Instant::now()));
            } else if contains(&line[..line.len().min(256)], b"\"agent_end\"") {
                let _ = tx.send(Line::End);
            }
        }
    });
    let mut host = Host {
        child,
        stdin,
        lines,
        _home: home,
    };
    host.get_state(0);
    host
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

impl Host {
    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// One `get_state` with nothing else going on: its latency in ms.
    fn get_state(&mut self, n: u64) -> f64 {
        let sent = Instant::now();
        self.send(&json!({"id": format!("gs{n}"), "type": "get_state"}));
        loop {
            match self.lines.recv_timeout(WAIT).unwrap() {
                Line::State(k, at) if k == n => return ms(at.duration_since(sent)),
                _ => {}
            }
        }
    }

    /// Streams one reply of `n` deltas; while it runs, a `get_state` every 2 ms when `probe`.
    /// Returns the latencies (ms) and the wall time of the turn.
    fn stream(&mut self, fake: &FakeProvider, n: usize, probe: bool) -> (Vec<f64>, f64) {
        fake.push(Reply::sse(openai_deltas(n)));
        let started = Instant::now();
        self.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
        let mut sent: Vec<Instant> = Vec::new();
        let mut lat = Vec::new();
        let mut ended = false;
        while !ended {
            if probe {
                sent.push(Instant::now());
                let id = 1_000 + sent.len() as u64 - 1;
                self.send(&json!({"id": format!("gs{id}"), "type": "get_state"}));
            }
            // Probes go out every 2 ms whatever arrives in between.
            let wait = if probe {
                Duration::from_millis(2)
            } else {
                WAIT
            };
            let until = Instant::now() + wait;
            while let Ok(line) = self.lines.recv_deadline(until) {
                match line {
                    Line::State(k, at) if k >= 1_000 => {
                        lat.push(ms(at.duration_since(sent[(k - 1_000) as usize])));
                    }
                    Line::State(..) => {}
                    Line::End => ended = true,
                }
                if ended {
                    break;
                }
            }
        }
        let wall = ms(started.elapsed());
        // The answers still in flight when the turn ended.
        while lat.len() < sent.len() {
            if let Line::State(k, at) = self.lines.recv_timeout(WAIT).unwrap() {
                lat.push(ms(at.duration_since(sent[(k - 1_000) as usize])));
            }
        }
        let _ = fake.try_request();
        (lat, wall)
    }
}

fn get_state_during_stream(fake: &FakeProvider, n: usize) {
    println!("get_state while a {n}-delta reply streams (a get_state every 2 ms):");
    for compact in [false, true] {
        let mut host = spawn(fake, compact);
        let mut idle: Vec<f64> = (1..=20).map(|i| host.get_state(i)).collect();
        // Five turns, for enough probes.
        let (mut lat, mut wall) = (Vec::new(), 0.0);
        for _ in 0..5 {
            let (l, w) = host.stream(fake, n, true);
            lat.extend(l);
            wall += w / 5.0;
        }
        println!(
            "  {:7}: median {:.3} ms, p90 {:.3} ms, max {:.3} ms ({} probes over five turns of {:.0} ms); idle get_state median {:.3} ms",
            if compact { "compact" } else { "default" },
            median(&mut lat),
            percentile(&mut lat, 0.9),
            percentile(&mut lat, 1.0),
            lat.len(),
            wall,
            median(&mut idle),
        );
    }
}

fn peak_rss(fake: &FakeProvider, n: usize) {
    println!("peak RSS over a {n}-delta reply, the host reading everything:");
    for compact in [false, true] {
        let mut host = spawn(fake, compact);
        let pid = host.child.id();
        let idle = status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0;
        let (_, wall) = host.stream(fake, n, false);
        let peak = status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0;
        println!(
            "  {:7}: peak {peak:.1} MB (idle peak {idle:.1} MB), turn {wall:.0} ms",
            if compact { "compact" } else { "default" },
        );
    }
}

fn main() {
    let fake = FakeProvider::start();
    fake.skip_bodies();
    get_state_during_stream(&fake, 10_000);
    // `get_state` alone skips the long peak-RSS turns.
    if args().next().as_deref() != Some("get_state") {
        peak_rss(&fake, 100_000);
    }
}
