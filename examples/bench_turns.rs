//! Per-turn cost as the conversation grows, each figure beside its floor from the same run:
//! - a tool loop of `echo hi` (the model calls `bash` every turn) at 20, 200 and 1,000 iterations
//!   against the loopback fake provider: wall and gjc CPU per iteration (over the whole loop and
//!   over its last fifth, where the history is longest), RSS at the end, and the TCP connections
//!   the fake provider accepted;
//! - the same loop with a host tool (`set_host_tools`; this process answers each
//!   `host_tool_call`);
//! - the floor: this program run as `bench_turns floor <base url> <n> <bash|host>`, a trivial
//!   process that asks the fake provider for each turn (a tiny request on one kept-alive
//!   connection), reads the answer, and runs `echo hi` (or echoes a line through `cat` for the
//!   host-tool loop); and the same with `chores`, which also does what any agent of this
//!   protocol must each turn: frames written for a host that parses them, a session-file append.
//!
//! gjc's CPU comes from /proc/<pid>/stat (clock ticks of 10 ms): the 20-iteration figure is the
//! sum over five fresh processes. The fake provider does not parse request bodies here, so its
//! own work does not grow with the history.
//!
//! Run: `cargo build --release --bins --examples && target/release/examples/bench_turns`
//! (`bench_turns 20 200` runs only those sizes; `no-usage` sends replies without usage;
//! `host-only` or `bash-only` runs one of the loops; `GJC_BASE_BIN=<another gjc>` runs every
//! loop with that binary too, for a baseline from the same run).

mod common;
#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fake_provider::{openai_text, openai_tool_call, FakeProvider, Reply};
use gjc::client::RpcClient;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Bash,
    Host,
}

/// What one loop cost.
#[derive(Default)]
struct Figures {
    iterations: usize,
    wall_ms: f64,
    cpu_ms: f64,
    /// Over the last fifth of the iterations.
    tail_iterations: usize,
    tail_wall_ms: f64,
    tail_cpu_ms: f64,
    rss_mb: f64,
    peak_mb: f64,
    connections: usize,
    /// What gjc wrote while the loop ran: frames and their bytes on stdout, and the session
    /// file's bytes (the work any agent of this protocol does per turn; the floor does none).
    frames: usize,
    frame_bytes: usize,
    session_bytes: u64,
}

impl Figures {
    fn add(&mut self, other: Figures) {
        self.iterations += other.iterations;
        self.wall_ms += other.wall_ms;
        self.cpu_ms += other.cpu_ms;
        self.tail_iterations += other.tail_iterations;
        self.tail_wall_ms += other.tail_wall_ms;
        self.tail_cpu_ms += other.tail_cpu_ms;
        self.rss_mb = self.rss_mb.max(other.rss_mb);
        self.peak_mb = self.peak_mb.max(other.peak_mb);
        self.connections = self.connections.max(other.connections);
        self.frames += other.frames;
        self.frame_bytes += other.frame_bytes;
        self.session_bytes += other.session_bytes;
    }
}

/// Whether replies report usage, as providers do (`no-usage` on the command line turns it off:
/// each turn's context estimate then walks the whole history, having no reported figure to
/// start from).
static USAGE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

const USAGE_EVENT: &str = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,\"total_tokens\":15}}\n\n";

fn queue_turns(fake: &FakeProvider, n: usize, kind: Kind) {
    let usage = USAGE.load(std::sync::atomic::Ordering::Relaxed);
    for i in 0..n {
        let body = match kind {
            Kind::Bash => {
                openai_tool_call(&format!("c{i}"), "bash", &json!({"command": "echo hi"}))
            }
            Kind::Host => {
                openai_tool_call(&format!("c{i}"), "echo_host", &json!({"message": "hi"}))
            }
        };
        let body = match usage {
            true => body.replace("data: [DONE]", &format!("{USAGE_EVENT}data: [DONE]")),
            false => body,
        };
        fake.push(Reply::sse(body));
    }
    fake.push(Reply::sse(openai_text(&["done"])));
}

fn spawn(fake: &FakeProvider, home: &std::path::Path, bin: &std::path::Path) -> RpcClient {
    let model = json!([{"id": "m", "contextWindow": 10000000, "maxTokens": 4096}]);
    let models = json!({"providers": {"fake": {"baseUrl": format!("{}/v1", fake.base_url), "api": "openai-completions", "apiKey": "k", "models": model}}});
    std::fs::write(home.join("models.json"), models.to_string()).unwrap();
    let mut c = RpcClient::builder(bin)
        .env("GJC_CODING_AGENT_DIR", home)
        .current_dir(home)
        .args(["--provider", "fake", "--model", "m"])
        .spawn()
        .unwrap();
    c.recv(WAIT).unwrap();
    c
}

/// One prompt of `n` tool iterations and a final answer, in a fresh gjc.
fn gjc_loop(fake: &FakeProvider, n: usize, kind: Kind, bin: &std::path::Path) -> Figures {
    let home = tempfile::tempdir().unwrap();
    let mut c = spawn(fake, home.path(), bin);
    let pid = c.pid();
    if kind == Kind::Host {
        let tool = json!({"name": "echo_host", "description": "echo", "parameters": {"type": "object", "properties": {"message": {"type": "string"}}}});
        c.request(json!({"type": "set_host_tools", "tools": [tool]}), WAIT)
            .unwrap();
    }
    queue_turns(fake, n, kind);
    let connections = fake.connections();
    let tail_from = n - n / 5;
    let (cpu0, t0) = (cpu_ms(pid).unwrap(), Instant::now());
    let (mut tail_cpu0, mut tail_t0) = (cpu0, t0);
    c.request(json!({"type": "prompt", "message": "loop"}), WAIT)
        .unwrap();
    let (mut done, mut frames, mut frame_bytes) = (0, 0, 0);
    loop {
        let f = c.recv(WAIT).unwrap();
        frames += 1;
        frame_bytes += f.line.len() + 1;
        if f.value["type"] == "host_tool_call" {
            c.send(&json!({"type": "host_tool_result", "id": f.value["id"], "result": {"content": [{"type": "text", "text": "hi"}]}}))
                .unwrap();
        }
        match f.value["payload"]["event_type"].as_str() {
            Some("tool_execution_end") => {
                done += 1;
                if done == tail_from {
                    (tail_cpu0, tail_t0) = (cpu_ms(pid).unwrap(), Instant::now());
                }
            }
            Some("agent_end") => break,
            _ => {}
        }
    }
    let (cpu1, wall) = (cpu_ms(pid).unwrap(), t0.elapsed());
    assert_eq!(done, n, "every turn ran its tool");
    while fake.try_request().is_some() {}
    let figures = Figures {
        iterations: n,
        wall_ms: ms(wall),
        cpu_ms: cpu1 - cpu0,
        tail_iterations: n - tail_from,
        tail_wall_ms: ms(tail_t0.elapsed()),
        tail_cpu_ms: cpu1 - tail_cpu0,
        rss_mb: status_kib(pid, "VmRSS").unwrap_or(0) as f64 / 1024.0,
        peak_mb: status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0,
        connections: fake.connections() - connections,
        frames,
        frame_bytes,
        session_bytes: jsonl_bytes(home.path()),
    };
    c.close_stdin();
    c.wait_exit(Duration::from_secs(10));
    figures
}

/// The bytes of the session files under `dir`.
fn jsonl_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => jsonl_bytes(&e.path()),
            Ok(_) if e.path().extension().is_some_and(|x| x == "jsonl") => {
                e.metadata().map_or(0, |m| m.len())
            }
            _ => 0,
        })
        .sum()
}

/// The floor: this program as a trivial agent, in its own process.
fn floor_loop(fake: &FakeProvider, n: usize, kind: Kind, chores: bool) -> Figures {
    queue_turns(fake, n, kind);
    let connections = fake.connections();
    let mode = if kind == Kind::Bash { "bash" } else { "host" };
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["floor", &fake.base_url, &n.to_string(), mode])
        .args(chores.then_some("chores"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "the floor process failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Vec<f64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    while fake.try_request().is_some() {}
    Figures {
        iterations: n,
        wall_ms: v[0],
        cpu_ms: v[1],
        tail_iterations: n - (n - n / 5),
        tail_wall_ms: v[2],
        tail_cpu_ms: v[3],
        rss_mb: v[4],
        peak_mb: v[5],
        connections: fake.connections() - connections,
        ..Figures::default()
    }
}

/// What an agent of this protocol does each turn besides asking the model and running the tool
/// (the `chores` floor): writes its frames for a host that parses them (11 lines of about 600
/// bytes, as gjc writes) and appends the turn to a session file (800 bytes, no fsync, as gjc).
struct Chores {
    frames: Option<std::io::PipeWriter>,
    host: Option<std::thread::JoinHandle<usize>>,
    session: std::fs::File,
    _dir: tempfile::TempDir,
}

impl Chores {
    fn start() -> Chores {
        let (reader, writer) = std::io::pipe().unwrap();
        let host = std::thread::spawn(move || {
            let mut parsed = 0;
            for line in BufReader::new(reader).lines() {
                let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
                parsed += usize::from(v.is_object());
            }
            parsed
        });
        let dir = tempfile::tempdir().unwrap();
        let session = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("s.jsonl"))
            .unwrap();
        Chores {
            frames: Some(writer),
            host: Some(host),
            session,
            _dir: dir,
        }
    }

    fn turn(&mut self, i: usize) {
        let text = "x".repeat(450);
        let frames = self.frames.as_mut().unwrap();
        for kind in 0..11 {
            let frame = json!({"type": "event", "payload": {"event_type": "message_end", "kind": kind,
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": i}}});
            let mut line = frame.to_string();
            line.push('\n');
            frames.write_all(line.as_bytes()).unwrap();
        }
        let entry = json!({"type": "message", "id": i, "message": {"role": "toolResult", "text": "x".repeat(700)}});
        let mut line = entry.to_string();
        line.push('\n');
        self.session.write_all(line.as_bytes()).unwrap();
    }

    /// Waits for the host to have parsed every frame.
    fn finish(&mut self, turns: usize) {
        drop(self.frames.take());
        let parsed = self.host.take().unwrap().join().unwrap();
        assert_eq!(parsed, 11 * turns);
    }
}

/// `bench_turns floor <base url> <n> <bash|host> [chores]`: prints wall, CPU, tail wall, tail CPU
/// (ms), RSS and peak RSS (MB).
fn floor_main(base_url: &str, n: usize, mode: &str, chores: bool) {
    let mut chores = chores.then(Chores::start);
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let url = format!("{base_url}/v1/chat/completions");
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cat_in = cat.stdin.take().unwrap();
    let mut cat_out = BufReader::new(cat.stdout.take().unwrap());
    let pid = std::process::id();
    let tail_from = n - n / 5;
    let (cpu0, t0) = (cpu_ms(pid).unwrap(), Instant::now());
    let (mut tail_cpu0, mut tail_t0) = (cpu0, t0);
    let mut line = String::new();
    for i in 0..=n {
        if i == tail_from {
            (tail_cpu0, tail_t0) = (cpu_ms(pid).unwrap(), Instant::now());
        }
        let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "loop"}]});
        let mut answer = String::new();
        agent
            .post(&url)
            .header("content-type", "application/json")
            .send(body.to_string().as_bytes())
            .unwrap()
            .into_body()
            .into_reader()
            .read_to_string(&mut answer)
            .unwrap();
        if i == n {
            break;
        }
        assert!(answer.contains("tool_calls"), "a tool turn: {answer}");
        if let Some(c) = &mut chores {
            c.turn(i);
        }
        if mode == "bash" {
            let out = Command::new("bash")
                .args(["-c", "echo hi"])
                .output()
                .unwrap();
            assert_eq!(out.stdout, b"hi\n");
        } else {
            cat_in.write_all(b"{\"text\":\"hi\"}\n").unwrap();
            line.clear();
            cat_out.read_line(&mut line).unwrap();
        }
    }
    if let Some(c) = &mut chores {
        c.finish(n);
    }
    let (cpu1, wall) = (cpu_ms(pid).unwrap(), t0.elapsed());
    drop(cat_in);
    let _ = cat.wait();
    println!(
        "{} {} {} {} {} {}",
        ms(wall),
        cpu1 - cpu0,
        ms(tail_t0.elapsed()),
        cpu1 - tail_cpu0,
        status_kib(pid, "VmRSS").unwrap_or(0) as f64 / 1024.0,
        status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0,
    );
}

fn per(total: f64, n: usize) -> f64 {
    total / n.max(1) as f64
}

fn print_row(name: &str, f: &Figures) {
    println!(
        "    {name:6} wall {:7.2} ms/iter (last fifth {:7.2}), CPU {:6.2} ms/iter (last fifth {:6.2}), RSS {:5.1} MB (peak {:5.1}), {} connection(s)",
        per(f.wall_ms, f.iterations),
        per(f.tail_wall_ms, f.tail_iterations),
        per(f.cpu_ms, f.iterations),
        per(f.tail_cpu_ms, f.tail_iterations),
        f.rss_mb,
        f.peak_mb,
        f.connections,
    );
    if f.frames > 0 {
        println!(
            "           wrote {:.1} frames ({:.0} bytes) and {:.0} session-file bytes per iteration",
            per(f.frames as f64, f.iterations),
            per(f.frame_bytes as f64, f.iterations),
            per(f.session_bytes as f64, f.iterations),
        );
    }
}

fn run(fake: &FakeProvider, kind: Kind, sizes: &[usize]) {
    for &n in sizes {
        // Short loops are repeated in fresh processes: CPU time moves in 10 ms ticks.
        let repeats = if n < 100 { 5 } else { 1 };
        let (mut gjc, mut floor) = (Figures::default(), Figures::default());
        let base_bin = std::env::var_os("GJC_BASE_BIN").map(std::path::PathBuf::from);
        let (mut base, mut chores) = (Figures::default(), Figures::default());
        for _ in 0..repeats {
            gjc.add(gjc_loop(fake, n, kind, &gjc_bin()));
            if let Some(bin) = &base_bin {
                base.add(gjc_loop(fake, n, kind, bin));
            }
            floor.add(floor_loop(fake, n, kind, false));
            chores.add(floor_loop(fake, n, kind, true));
        }
        let what = if kind == Kind::Bash {
            "tool loop of `echo hi`"
        } else {
            "host-tool loop"
        };
        println!(
            "  {what}, {n} iterations ({} messages at the end){}:",
            2 * n + 2,
            if repeats > 1 {
                format!(", {repeats} runs")
            } else {
                String::new()
            }
        );
        print_row("gjc", &gjc);
        if base_bin.is_some() {
            print_row("base", &base);
        }
        print_row("floor", &floor);
        print_row("chores", &chores);
        println!(
            "    gjc/floor wall {:.2}x, gjc/chores wall {:.2}x",
            per(gjc.wall_ms, gjc.iterations) / per(floor.wall_ms, floor.iterations),
            per(gjc.wall_ms, gjc.iterations) / per(chores.wall_ms, chores.iterations)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("floor") {
        let chores = args.get(4).is_some_and(|a| a == "chores");
        return floor_main(&args[1], args[2].parse().unwrap(), &args[3], chores);
    }
    if args.iter().any(|a| a == "no-usage") {
        USAGE.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![20, 200, 1000];
    }
    let fake = FakeProvider::start();
    fake.skip_bodies();
    println!("per-iteration cost against the loopback fake provider (openai-completions):");
    // `host-only` / `bash-only`: one of the two loops.
    if !args.iter().any(|a| a == "host-only") {
        run(&fake, Kind::Bash, &sizes);
    }
    if !args.iter().any(|a| a == "bash-only") {
        run(&fake, Kind::Host, &sizes);
    }
}
