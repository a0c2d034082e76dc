//! Many live ACP sessions in one process, against baselines from the same run:
//! - two sessions streaming `deltas` text deltas each at once, beside a lone session streaming
//!   the same (wall from the prompts to the last answer; rounds interleaved; target ≤ 1.2×),
//!   with the floor this machine puts under that ratio: twice a lone turn's CPU time spread over
//!   every core;
//! - RSS added per idle live session (target ≤ 0.5 MB), and the RSS of `idle` idle live
//!   sessions in one process (target ≤ 64 MB), beside the process with one session.
//!
//! The scripted provider plays the turns, so no network is involved.
//!
//! Run: `cargo bench --bench live_sessions -- [rounds] [deltas] [idle]`
//! (defaults 10, 1000, 100; release is what `cargo bench` builds).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver};
use serde_json::{json, Value};

/// The longest any one answer may take before the benchmark gives up.
const ANSWER_WAIT: Duration = Duration::from_secs(120);

/// One `gjc --mode acp` process driven over its stdio.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: i64,
}

impl Acp {
    fn start(agent: &Path, project: &Path, script: &Path) -> Acp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gjc"))
            .args(["--mode", "acp", "--provider", "scripted", "--script"])
            .arg(script)
            .env("GJC_CODING_AGENT_DIR", agent)
            .env("GJC_TODO_REMINDERS", "0")
            .current_dir(project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn gjc");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut acp = Acp {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        let init = acp.send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        acp.answers(&[init]);
        acp
    }

    fn send(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        self.next_id
    }

    /// Waits for the answers to `ids` (in any order) and returns them in that order.
    fn answers(&mut self, ids: &[i64]) -> Vec<Value> {
        let mut got: Vec<Option<Value>> = vec![None; ids.len()];
        while got.iter().any(Option::is_none) {
            let line = self
                .lines
                .recv_timeout(ANSWER_WAIT)
                .expect("gjc answered in time");
            let message: Value = serde_json::from_str(&line).expect("a JSON line");
            if message.get("method").is_some() {
                continue;
            }
            if let Some(i) = ids.iter().position(|id| message["id"] == *id) {
                assert!(message.get("error").is_none(), "{message}");
                got[i] = Some(message["result"].clone());
            }
        }
        got.into_iter().flatten().collect()
    }

    fn new_session(&mut self, project: &Path) -> String {
        let id = self.send("session/new", json!({"cwd": project, "mcpServers": []}));
        let answer = self.answers(&[id]);
        answer[0]["sessionId"].as_str().unwrap().to_string()
    }

    /// Prompts each of `sessions` at once and times them.
    fn prompt_all(&mut self, sessions: &[&str]) -> Turns {
        let cpu = cpu_ms(self.child.id(), None) + cpu_ms(std::process::id(), None);
        let writer = cpu_ms(self.child.id(), Some("gjc-acp"));
        let started = Instant::now();
        let ids: Vec<i64> = sessions
            .iter()
            .map(|s| {
                let prompt = json!({"sessionId": s, "prompt": [{"type": "text", "text": "go"}]});
                self.send("session/prompt", prompt)
            })
            .collect();
        for answer in self.answers(&ids) {
            assert_eq!(answer["stopReason"], "end_turn", "{answer}");
        }
        Turns {
            wall: started.elapsed().as_secs_f64() * 1000.0,
            cpu: cpu_ms(self.child.id(), None) + cpu_ms(std::process::id(), None) - cpu,
            writer: cpu_ms(self.child.id(), Some("gjc-acp")) - writer,
        }
    }

    fn rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()));
        let kib = status
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            })
            .unwrap_or(f64::NAN);
        kib / 1024.0
    }

    fn close(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// Turns prompted at once, in ms: the wall until every one has ended, the CPU time gjc and this
/// benchmark spent meanwhile, and the part of it spent by gjc's one ACP writer.
struct Turns {
    wall: f64,
    cpu: f64,
    writer: f64,
}

/// CPU time of the threads of process `pid` so far (those named `thread`, else all), in ms
/// (`schedstat`: nanoseconds on CPU).
fn cpu_ms(pid: u32, thread: Option<&str>) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let named = |t: &std::fs::DirEntry| match thread {
        Some(name) => {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)
        }
        None => true,
    };
    let ns: u64 = tasks
        .flatten()
        .filter(named)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A script of `turns` turns, each streaming `deltas` one-character deltas.
fn script(dir: &Path, turns: usize, deltas: usize) -> PathBuf {
    let turn = json!({"content": [{"type": "text", "text": "x".repeat(deltas)}], "chunkChars": 1});
    let path = dir.join("script.json");
    std::fs::write(&path, json!({ "turns": vec![turn; turns] }).to_string()).unwrap();
    path
}

fn arg(n: usize, default: usize) -> usize {
    // `cargo bench` passes `--bench` first; numbers are ours.
    let numbers: Vec<usize> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    numbers.get(n).copied().unwrap_or(default)
}

fn main() {
    let (rounds, deltas, idle) = (arg(0, 10), arg(1, 1000), arg(2, 100));
    let home = tempfile::tempdir().unwrap();
    let agent = home.path().join("agent");
    let project = home.path().join("project");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let project = project.canonicalize().unwrap();
    // One warm-up round, then per round a lone turn and a pair.
    let script = script(home.path(), 3 * (rounds + 1), deltas);

    let mut g = Acp::start(&agent, &project, &script);
    let (a, b) = (g.new_session(&project), g.new_session(&project));
    g.prompt_all(&[&a]);
    g.prompt_all(&[&a, &b]);
    let (mut lone, mut pair, mut lone_cpu, mut writer) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let turn = g.prompt_all(&[&a]);
        lone.push(turn.wall);
        lone_cpu.push(turn.cpu);
        writer.push(turn.writer);
        pair.push(g.prompt_all(&[&a, &b]).wall);
    }
    g.close();
    let (lone, pair) = (median(lone), median(pair));
    let (lone_cpu, writer) = (median(lone_cpu), median(writer));
    // Two turns are twice a lone turn's work. They cannot end sooner than that work spread over
    // every core, nor sooner than twice the writer's part, since every frame of every session
    // leaves through the one ACP writer (one stdout).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let floor = (2.0 * lone_cpu / cores / lone)
        .max(2.0 * writer / lone)
        .max(1.0);
    println!("{rounds} rounds, {deltas} deltas a turn, medians:");
    println!("  lone session streaming (ms)            {lone:10.2}");
    println!("  two sessions streaming at once (ms)    {pair:10.2}");
    println!(
        "  ratio (target <= 1.2)                  {:10.2}",
        pair / lone
    );
    println!("  CPU of a lone turn, gjc + reader (ms)  {lone_cpu:10.2}");
    println!("  of which the one ACP writer (ms)       {writer:10.2}");
    println!("  floor of the ratio on {cores} cores        {floor:10.2} (the work twice, over the cores or the writer)");

    let mut g = Acp::start(&agent, &project, &script);
    g.new_session(&project);
    std::thread::sleep(Duration::from_millis(200));
    let one = g.rss_mb();
    for _ in 1..idle {
        g.new_session(&project);
    }
    std::thread::sleep(Duration::from_millis(200));
    let many = g.rss_mb();
    g.close();
    let added = (many - one) / (idle.max(2) - 1) as f64;
    println!("  RSS with one idle session (MB)         {one:10.2}");
    println!("  RSS with {idle:>4} idle sessions (MB)      {many:10.2} (target <= 64 at 100)");
    println!("  RSS added per idle session (MB)        {added:10.3} (target <= 0.5)");
}
