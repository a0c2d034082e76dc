//! Per-turn cost as the conversation grows, each figure beside its floor from the same run:
//! - a tool loop of `echo hi` (the model calls `bash` every turn) at 20, 200 and 1,000 iterations
//!   against the loopback fake provider: wall and gjc CPU per iteration (over the whole loop and
//!   over its last fifth, where the history is longest), RSS at the end, and the TCP connections
//!   the fake provider accepted;
//! - the same loop with a host tool (`set_host_tools`; this process answers each
//!   `host_tool_call`);
//! - the floor: this program run as `turns floor <base url> <n> <bash|host>`, a trivial
//!   process that asks the fake provider for each turn (a tiny request on one kept-alive
//!   connection), reads the answer, and runs `echo hi` (or echoes a line through `cat` for the
//!   host-tool loop);
//! - the chores floor: the same trivial process doing, besides, what any agent of this protocol
//!   must do each turn, sized from gjc's own figures in the same run: send the conversation with
//!   every request (bodies growing as gjc's did), write the very frames gjc wrote in one turn from
//!   the middle of its loop for a host that parses each one (a reader thread and an answering
//!   thread, as the `RpcClient` that is gjc's host here), append to a session file, and, in the
//!   host-tool loop, wait for the host to answer the tool call through those frames (instead of
//!   `cat`). This is the floor gjc is
//!   judged against: the plain floor sends a few bytes per request, while every request of an
//!   agent carries the whole conversation.
//! - the shape floor (host-tool loop): the chores, done by the thread roles gjc's fixed design
//!   gives an agent and no more (see `Shape`): the request on a thread of its own, frames out
//!   through a writer thread, the host's answer in through a reader thread and routed to its
//!   waiter by a broker thread, every hand-off a crossbeam channel. On a machine with few cores
//!   each hand-off is a wake-up and a context switch, which the one-thread floors never pay.
//!
//! gjc's CPU is the sum of its threads' `schedstat` (ns; no gjc thread ends during a loop), the
//! floors' from /proc/<pid>/stat (clock ticks of 10 ms: their helper threads end before the
//! last reading); the 20-iteration figures are sums over 25 fresh processes. The fake provider does not parse request bodies here, so its
//! own work does not grow with the history.
//!
//! Run: `cargo bench --bench turns`
//! (`cargo bench --bench turns -- 20 200` runs only those sizes; `no-usage` sends replies without usage;
//! `host-only` or `bash-only` runs one of the loops; `runs=N` repeats every loop N times (by
//! default 25, 9 and 5 times for short, middle and long loops); `GJC_BASE_BIN=<another gjc>`
//! runs every loop with that binary too, for a baseline from the same run).

mod common;
#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use crossbeam_channel::{unbounded, Receiver, Sender};
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
    /// Wall per iteration of each run, for the median.
    walls: Vec<f64>,
    rss_mb: f64,
    peak_mb: f64,
    connections: usize,
    /// What gjc wrote while the loop ran: frames and their bytes on stdout, and the session
    /// file's bytes (the work any agent of this protocol does per turn; the floor does none).
    frames: usize,
    frame_bytes: usize,
    session_bytes: u64,
    /// The request bodies' sizes, first and last (the last carries the whole conversation).
    first_body: usize,
    last_body: usize,
    /// The frames of one turn from the middle of the loop, as gjc wrote them: the chores
    /// floors write these very lines, so their host parses what gjc's host parsed.
    sample: Vec<String>,
}

impl Figures {
    /// Wall per iteration: the median over the runs.
    fn wall(&self) -> f64 {
        let mut walls = self.walls.clone();
        walls.sort_by(f64::total_cmp);
        walls.get(walls.len() / 2).copied().unwrap_or(0.0)
    }

    /// Wall against `other`'s: the median of the ratios of runs made one after the other, which
    /// saw the same machine (a loaded moment slows both).
    fn ratio(&self, other: &Figures) -> f64 {
        let mut ratios: Vec<f64> = self
            .walls
            .iter()
            .zip(&other.walls)
            .map(|(a, b)| a / b)
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios.get(ratios.len() / 2).copied().unwrap_or(0.0)
    }

    fn add(&mut self, other: Figures) {
        self.iterations += other.iterations;
        self.wall_ms += other.wall_ms;
        self.walls.push(per(other.wall_ms, other.iterations));
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
        self.first_body = other.first_body;
        self.last_body = other.last_body;
        if !other.sample.is_empty() {
            self.sample = other.sample;
        }
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
    let (cpu0, t0) = (threads_cpu_ms(pid).unwrap(), Instant::now());
    let (mut tail_cpu0, mut tail_t0) = (cpu0, t0);
    c.request(json!({"type": "prompt", "message": "loop"}), WAIT)
        .unwrap();
    let (mut done, mut frames, mut frame_bytes) = (0, 0, 0);
    // A turn's frames end with its host tool call, or with the end of its bash call.
    let (mut turn, mut turns, mut sample) = (Vec::new(), 0, Vec::new());
    loop {
        let f = c.recv(WAIT).unwrap();
        frames += 1;
        frame_bytes += f.line.len() + 1;
        turn.push(f.line.clone());
        let ends_turn = match kind {
            Kind::Host => f.value["type"] == "host_tool_call",
            Kind::Bash => f.value["payload"]["event_type"] == "tool_execution_end",
        };
        if ends_turn {
            turns += 1;
            if turns == (n / 2).max(2) {
                sample = std::mem::take(&mut turn);
            }
            turn.clear();
        }
        if f.value["type"] == "host_tool_call" {
            c.send(&json!({"type": "host_tool_result", "id": f.value["id"], "result": {"content": [{"type": "text", "text": "hi"}]}}))
                .unwrap();
        }
        match f.value["payload"]["event_type"].as_str() {
            Some("tool_execution_end") => {
                done += 1;
                if done == tail_from {
                    (tail_cpu0, tail_t0) = (threads_cpu_ms(pid).unwrap(), Instant::now());
                }
            }
            Some("agent_end") => break,
            _ => {}
        }
    }
    let (cpu1, wall) = (threads_cpu_ms(pid).unwrap(), t0.elapsed());
    assert_eq!(done, n, "every turn ran its tool");
    let bodies: Vec<usize> = std::iter::from_fn(|| fake.try_request())
        .map(|r| r.body_len)
        .collect();
    let figures = Figures {
        iterations: n,
        wall_ms: ms(wall),
        cpu_ms: cpu1 - cpu0,
        tail_iterations: n - tail_from,
        tail_wall_ms: ms(tail_t0.elapsed()),
        tail_cpu_ms: cpu1 - tail_cpu0,
        walls: Vec::new(),
        rss_mb: status_kib(pid, "VmRSS").unwrap_or(0) as f64 / 1024.0,
        peak_mb: status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0,
        connections: fake.connections() - connections,
        frames,
        frame_bytes,
        session_bytes: jsonl_bytes(home.path()),
        first_body: bodies.first().copied().unwrap_or(0),
        last_body: bodies.last().copied().unwrap_or(0),
        sample,
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

/// The floor: this program as a trivial agent, in its own process; with `chores` sized from
/// what gjc did in the same run (`gjc` is that run's figures).
fn floor_loop(
    fake: &FakeProvider,
    n: usize,
    kind: Kind,
    chores: Option<&Figures>,
    shape: bool,
) -> Figures {
    queue_turns(fake, n, kind);
    let connections = fake.connections();
    let mode = if kind == Kind::Bash { "bash" } else { "host" };
    let sizes = chores.map(|g| {
        let per_turn = |x: usize| (x as f64 / g.iterations as f64).round() as usize;
        [
            per_turn(g.frames),
            per_turn(g.frame_bytes),
            per_turn(g.session_bytes as usize),
            g.first_body,
            g.last_body,
        ]
        .map(|x| x.to_string())
    });
    let mut floor = Command::new(std::env::current_exe().unwrap());
    floor.args(["floor", &fake.base_url, &n.to_string(), mode]);
    if let Some(sizes) = &sizes {
        floor
            .arg(if shape { "shape" } else { "chores" })
            .args(sizes);
    }
    let dir = tempfile::tempdir().unwrap();
    if let Some(g) = chores.filter(|g| !g.sample.is_empty()) {
        let path = dir.path().join("frames.jsonl");
        std::fs::write(&path, g.sample.join("\n")).unwrap();
        floor.arg(path);
    }
    let out = floor.stderr(Stdio::inherit()).output().unwrap();
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

/// How much of each chore a turn does, as gjc did it in the same run.
struct ChoreSizes {
    frames: usize,
    frame_bytes: usize,
    session_bytes: usize,
    first_body: usize,
    last_body: usize,
    /// gjc's frames of one turn, written instead of padded ones of the same sizes.
    sample: Vec<String>,
}

/// What any agent of this protocol must do each turn besides running the tool (the `chores`
/// floor), sized from gjc's own figures of the same run:
/// - send the whole conversation with every request: the body grows from the size of gjc's
///   first request to that of its last (the floor's body is padding, kept and extended, never
///   rebuilt);
/// - write the turn's frames (as many, as many bytes) for a host that parses every one;
/// - append the turn to a session file (no fsync, as gjc);
/// - in the host-tool loop, the turn's last frame is the tool call: the host answers it once it
///   has parsed everything before it, and the turn waits for that answer.
struct Chores {
    sizes: ChoreSizes,
    shape: Option<Shape>,
    frames: Option<std::io::PipeWriter>,
    answers: Option<BufReader<std::io::PipeReader>>,
    host: Option<std::thread::JoinHandle<usize>>,
    session: std::fs::File,
    body: Arc<Vec<u8>>,
    _dir: tempfile::TempDir,
}

const BODY_HEAD: &str = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":""#;
const BODY_TAIL: &str = r#""}]}"#;

impl Chores {
    fn start(sizes: ChoreSizes, shape: bool) -> Chores {
        let (reader, writer) = std::io::pipe().unwrap();
        let (answers, mut answer) = std::io::pipe().unwrap();
        // The host, built as the `RpcClient` that plays it for gjc: a reader thread hands each
        // line over a channel to the thread that parses it and answers.
        let (lines_tx, lines) = unbounded::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                if lines_tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        let host = std::thread::spawn(move || {
            let mut parsed = 0;
            for line in lines {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                parsed += usize::from(v.is_object());
                if v["type"] == "host_tool_call" {
                    let reply = json!({"type": "host_tool_result", "id": v["id"], "result": {"content": [{"type": "text", "text": "hi"}]}});
                    writeln!(answer, "{reply}").unwrap();
                }
            }
            parsed
        });
        let dir = tempfile::tempdir().unwrap();
        let session = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("s.jsonl"))
            .unwrap();
        let (frames, answers, shape) = match shape {
            false => (Some(writer), Some(BufReader::new(answers)), None),
            true => (None, None, Some(Shape::start(writer, answers))),
        };
        Chores {
            sizes,
            shape,
            frames,
            answers,
            host: Some(host),
            session,
            body: Arc::new(format!("{BODY_HEAD}{BODY_TAIL}").into_bytes()),
            _dir: dir,
        }
    }

    /// Request `i` of `n`: as long as gjc's would be there.
    fn body(&mut self, i: usize, n: usize) -> Arc<Vec<u8>> {
        let s = &self.sizes;
        let want = s.first_body + (s.last_body.saturating_sub(s.first_body)) * i / n.max(1);
        if self.body.len() < want {
            // Never shared here: the provider thread lets go of a body before it answers.
            let body = Arc::get_mut(&mut self.body).expect("the body is not shared");
            body.truncate(body.len() - BODY_TAIL.len());
            body.resize(want - BODY_TAIL.len(), b'x');
            body.extend_from_slice(BODY_TAIL.as_bytes());
        }
        self.body.clone()
    }

    /// The turn's frames and session entry; with `call`, the last frame is a host tool call and
    /// this waits for the host's answer.
    fn turn(&mut self, i: usize, call: bool) {
        let count = self.sizes.frames.max(1);
        let pad = "x".repeat((self.sizes.frame_bytes / count).saturating_sub(80));
        let id = format!("h{i}");
        if let (true, Some(shape)) = (call, &self.shape) {
            shape.register(&id);
        }
        for k in 0..count {
            let last_call = call && k == count - 1;
            let mut line = match self.sizes.sample.get(k) {
                // gjc's own frame; its tool call carries this turn's id.
                Some(frame) if last_call => {
                    let mut v: serde_json::Value = serde_json::from_str(frame).unwrap();
                    v["id"] = json!(id);
                    v.to_string()
                }
                Some(frame) => frame.clone(),
                None if last_call => {
                    json!({"type": "host_tool_call", "id": id, "toolName": "echo_host", "pad": pad}).to_string()
                }
                None => json!({"type": "event", "payload": {"event_type": "message_update", "kind": k, "text": pad, "timestamp": i}}).to_string(),
            };
            line.push('\n');
            match (&mut self.frames, &self.shape) {
                (Some(pipe), _) => pipe.write_all(line.as_bytes()).unwrap(),
                (None, Some(shape)) => shape.frames.send(line.into_bytes()).unwrap(),
                (None, None) => unreachable!("frames go somewhere"),
            }
        }
        let entry = json!({"type": "message", "id": i, "text": "x".repeat(self.sizes.session_bytes.saturating_sub(40))});
        let mut line = entry.to_string();
        line.push('\n');
        self.session.write_all(line.as_bytes()).unwrap();
        if call {
            let v = match (&mut self.answers, &self.shape) {
                (Some(answers), _) => {
                    let mut answer = String::new();
                    answers.read_line(&mut answer).unwrap();
                    serde_json::from_str(&answer).unwrap()
                }
                (None, Some(shape)) => shape.results.recv_timeout(WAIT).unwrap(),
                (None, None) => unreachable!("answers come from somewhere"),
            };
            assert_eq!(v["id"], id);
        }
    }

    /// Waits for the host to have parsed every frame.
    fn finish(&mut self, turns: usize) {
        drop(self.frames.take());
        if let Some(shape) = self.shape.take() {
            shape.stop();
        }
        let parsed = self.host.take().unwrap().join().unwrap();
        assert_eq!(parsed, self.sizes.frames.max(1) * turns);
    }
}

/// The shape floor's threads: what gjc's design (thread per role, crossbeam channels between
/// them, blocking HTTP off the loop) costs a turn at least, with no work of its own.
/// - `gjc-provider`: the loop sends it the body; it posts, reads the answer and sends it back;
/// - `gjc-stdout`: writes the frames the loop sends it, as many as are queued in one write;
/// - `gjc-stdin`: reads the host's answers, parses each and hands it to the broker;
/// - `gjc-host`: the broker: routes an answer to the waiter registered under its id.
struct Shape {
    requests: Sender<Arc<Vec<u8>>>,
    answers: Receiver<String>,
    frames: Sender<Vec<u8>>,
    broker: Sender<Routed>,
    results: Receiver<serde_json::Value>,
    result_tx: Sender<serde_json::Value>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

enum Routed {
    Register(String, Sender<serde_json::Value>),
    Answer(serde_json::Value),
}

impl Shape {
    fn start(pipe: std::io::PipeWriter, answers_pipe: std::io::PipeReader) -> Shape {
        let (frames, frames_rx) = unbounded::<Vec<u8>>();
        let (broker, broker_rx) = unbounded::<Routed>();
        let (result_tx, results) = unbounded();
        let (requests, _) = unbounded();
        let (_, answers) = unbounded();
        let mut threads = vec![std::thread::spawn(move || {
            let mut pipe = pipe;
            let mut batch = Vec::new();
            while let Ok(frame) = frames_rx.recv() {
                batch.extend_from_slice(&frame);
                batch.extend(frames_rx.try_iter().flatten());
                pipe.write_all(&batch).unwrap();
                batch.clear();
            }
        })];
        let to_broker = broker.clone();
        threads.push(std::thread::spawn(move || {
            for line in BufReader::new(answers_pipe).lines() {
                let v = serde_json::from_str(&line.unwrap()).unwrap();
                if to_broker.send(Routed::Answer(v)).is_err() {
                    return;
                }
            }
        }));
        threads.push(std::thread::spawn(move || {
            let mut waiting = std::collections::HashMap::new();
            for routed in broker_rx {
                match routed {
                    Routed::Register(id, tx) => {
                        waiting.insert(id, tx);
                    }
                    Routed::Answer(v) => {
                        let id = v["id"].as_str().unwrap_or_default().to_string();
                        if let Some(tx) = waiting.remove(&id) {
                            let _ = tx.send(v);
                        }
                    }
                }
            }
        }));
        Shape {
            requests,
            answers,
            frames,
            broker,
            results,
            result_tx,
            threads,
        }
    }

    /// Starts the provider thread for `url`.
    fn with_provider(mut self, url: String) -> Shape {
        let (requests, requests_rx) = unbounded::<Arc<Vec<u8>>>();
        let (answers_tx, answers) = unbounded();
        self.threads.push(std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
            for body in requests_rx {
                let answer = post(&agent, &url, &body);
                drop(body);
                if answers_tx.send(answer).is_err() {
                    return;
                }
            }
        }));
        (self.requests, self.answers) = (requests, answers);
        self
    }

    /// One request, on the provider thread.
    fn post(&self, body: Arc<Vec<u8>>) -> String {
        self.requests.send(body).unwrap();
        self.answers.recv_timeout(WAIT).unwrap()
    }

    fn register(&self, id: &str) {
        let tx = self.result_tx.clone();
        self.broker.send(Routed::Register(id.into(), tx)).unwrap();
    }

    /// Lets every thread run out (the host thread's end closes the answers pipe).
    fn stop(self) {
        let Shape {
            requests,
            frames,
            broker,
            result_tx,
            threads,
            ..
        } = self;
        drop((requests, frames, broker, result_tx));
        for t in threads {
            t.join().unwrap();
        }
    }
}

/// `turns floor <base url> <n> <bash|host> [chores <frames> <frame bytes> <session bytes>
/// <first body> <last body>]`: prints wall, CPU, tail wall, tail CPU (ms), RSS and peak RSS (MB).
fn floor_main(base_url: &str, n: usize, mode: &str, chores: Option<ChoreSizes>, shape: bool) {
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let url = format!("{base_url}/v1/chat/completions");
    let mut chores = chores.map(|sizes| Chores::start(sizes, shape));
    if let Some(c) = &mut chores {
        c.shape = c.shape.take().map(|s| s.with_provider(url.clone()));
    }
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
    let small =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "loop"}]})
            .to_string();
    for i in 0..=n {
        if i == tail_from {
            (tail_cpu0, tail_t0) = (cpu_ms(pid).unwrap(), Instant::now());
        }
        let body = match &mut chores {
            Some(c) => c.body(i, n),
            None => Arc::new(small.clone().into_bytes()),
        };
        let answer = match chores.as_ref().and_then(|c| c.shape.as_ref()) {
            Some(shape) => shape.post(body),
            None => post(&agent, &url, &body),
        };
        if i == n {
            break;
        }
        assert!(answer.contains("tool_calls"), "a tool turn: {answer}");
        if mode == "bash" {
            let out = Command::new("bash")
                .args(["-c", "echo hi"])
                .output()
                .unwrap();
            assert_eq!(out.stdout, b"hi\n");
            if let Some(c) = &mut chores {
                c.turn(i, false);
            }
        } else if let Some(c) = &mut chores {
            // The host answers the call, through the protocol.
            c.turn(i, true);
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

/// One model request of the floors: the answer's whole body.
fn post(agent: &ureq::Agent, url: &str, body: &[u8]) -> String {
    let mut answer = String::new();
    agent
        .post(url)
        .header("content-type", "application/json")
        .send(body)
        .unwrap()
        .into_body()
        .into_reader()
        .read_to_string(&mut answer)
        .unwrap();
    answer
}

fn per(total: f64, n: usize) -> f64 {
    total / n.max(1) as f64
}

fn print_row(name: &str, f: &Figures) {
    println!(
        "    {name:6} wall {:7.2} ms/iter (last fifth {:7.2}), CPU {:6.2} ms/iter (last fifth {:6.2}), RSS {:5.1} MB (peak {:5.1}), {} connection(s)",
        f.wall(),
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

fn run(fake: &FakeProvider, kind: Kind, sizes: &[usize], runs: Option<usize>) {
    for &n in sizes {
        // Short loops are repeated in fresh processes: CPU time moves in 10 ms ticks, and a
        // 20-iteration host-tool loop takes about one. Every loop is repeated, interleaved with
        // its floors, so that wall figures are medians over runs that saw the same machine.
        let repeats = runs.unwrap_or(match n {
            0..100 => 25,
            100..500 => 9,
            _ => 5,
        });
        let (mut gjc, mut floor) = (Figures::default(), Figures::default());
        let base_bin = std::env::var_os("GJC_BASE_BIN").map(std::path::PathBuf::from);
        let (mut base, mut chores) = (Figures::default(), Figures::default());
        let mut shape = Figures::default();
        for _ in 0..repeats {
            let this = gjc_loop(fake, n, kind, &gjc_bin());
            floor.add(floor_loop(fake, n, kind, None, false));
            chores.add(floor_loop(fake, n, kind, Some(&this), false));
            if kind == Kind::Host {
                shape.add(floor_loop(fake, n, kind, Some(&this), true));
            }
            gjc.add(this);
            if let Some(bin) = &base_bin {
                base.add(gjc_loop(fake, n, kind, bin));
            }
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
                format!(", {repeats} runs, wall the median")
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
        if kind == Kind::Host {
            print_row("shape", &shape);
        }
        print!(
            "    gjc/floor wall {:.2}x, gjc/chores wall {:.2}x",
            gjc.ratio(&floor),
            gjc.ratio(&chores)
        );
        if kind == Kind::Host {
            print!(", gjc/shape wall {:.2}x", gjc.ratio(&shape));
        }
        println!(" (medians of the runs' ratios)");
    }
}

fn main() {
    let args: Vec<String> = args().collect();
    if args.first().map(String::as_str) == Some("floor") {
        let number = |i: usize| args[i].parse::<usize>().unwrap();
        let shape = args.get(4).is_some_and(|a| a == "shape");
        let chores = (args.get(4).is_some_and(|a| a == "chores") || shape).then(|| {
            let sample: Vec<String> = args
                .get(10)
                .map(|path| {
                    let text = std::fs::read_to_string(path).unwrap();
                    text.lines().map(str::to_string).collect()
                })
                .unwrap_or_default();
            ChoreSizes {
                frames: if sample.is_empty() {
                    number(5)
                } else {
                    sample.len()
                },
                frame_bytes: number(6),
                session_bytes: number(7),
                first_body: number(8),
                last_body: number(9),
                sample,
            }
        });
        return floor_main(&args[1], number(2), &args[3], chores, shape);
    }
    if args.iter().any(|a| a == "no-usage") {
        USAGE.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![20, 200, 1000];
    }
    // `runs=N`: every loop N times.
    let runs = args
        .iter()
        .find_map(|a| a.strip_prefix("runs=").and_then(|n| n.parse().ok()));
    let fake = FakeProvider::start();
    fake.skip_bodies();
    println!("per-iteration cost against the loopback fake provider (openai-completions):");
    // `host-only` / `bash-only`: one of the two loops.
    if !args.iter().any(|a| a == "host-only") {
        run(&fake, Kind::Bash, &sizes, runs);
    }
    if !args.iter().any(|a| a == "bash-only") {
        run(&fake, Kind::Host, &sizes, runs);
    }
}
