//! MCP servers as tools: what gjc adds to a server, each figure beside its floor from the same
//! run. The server is the npm reference server (`@modelcontextprotocol/server-everything`,
//! installed with `npm ci` in tests/mcp; missing is a failure) over stdio.
//!
//! a. An `echo` call round trip. The floor is this program as the least client there is: it
//!    spawns the server, shakes hands (`initialize`, `notifications/initialized`) and times
//!    `tools/call echo` round trips on one thread (write a line, read lines until the answer).
//!    gjc's cost is a difference of two tool loops in RPC mode against the fake provider over
//!    HTTP on 127.0.0.1, both with the same server configured and ready: each turn the model calls
//!    `mcp__everything__echo`, or, in the other loop, the built-in `read` of a two-byte file (a
//!    tool that does next to nothing). (MCP loop − read loop) per turn is what an MCP call costs
//!    inside a turn over a built-in call: the tool call's way through gjc, the server's own work
//!    and the pipe, less the `read` (a few microseconds, so the figure slightly flatters gjc).
//!    Everything else in a turn (the model request, its stream, the frames to the host, the
//!    session file) is the same in both loops and cancels out. The figure against the floor is
//!    that difference divided by the direct round trip (target ≤ 1.3×), a median over runs made
//!    one after the other (a loaded moment slows all three). The direct client sends the call
//!    as gjc does, with a progress token. Also shown: the span from the `tool_execution_start`
//!    frame to the `tool_execution_end` frame as the host sees them; a second floor in the shape
//!    gjc's design gives a server, the same client with a reader thread that hands each answer
//!    to the caller over a channel (see `threaded_round_trips`); and the in-turn floor: the read
//!    loop again, with the least client's `echo` call to a server of its own made by the fake
//!    provider before each answer that follows a tool result ((that loop − read loop) per turn).
//!    A tight loop of calls keeps node and its core warm; one call per turn, between the
//!    provider's and the host's work, does not, and the in-turn floor is what the least client
//!    pays for a call at that point of a turn on the same machine.
//! b. spawn → `ready` with five servers in the agent dir's mcp.json against spawn → `ready` with
//!    no mcp.json, interleaved (target within 1.2×): starting servers must not delay `ready`.
//! c. gjc's own RSS (VmRSS of the gjc process, not its children) once servers are ready, idle
//!    after the same settling time, with none, one and 1 + N servers. The first server also pages
//!    in gjc's MCP code (about 2 MB of the binary's text, once per process), so it is shown on its
//!    own; (RSS_1+N − RSS_1) / N is what each further connected server costs on gjc's side
//!    (target ≤ 0.3 MB). (RSS_N − RSS_0) / N, which spreads the code over the N servers, is shown
//!    too.
//!
//! Run: `cargo bench --bench mcp [-- turns=N runs=N servers=N]` (defaults: 100 turns per loop,
//! 7 runs, 10 servers for the RSS figure).

mod common;
#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use fake_provider::{openai_text, openai_tool_call, Chunk, FakeProvider, Reply};
use gjc::client::RpcClient;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

/// The reference server's entry point.
fn everything() -> PathBuf {
    let entry = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "{} is missing: run `npm ci` in tests/mcp",
        entry.display()
    );
    entry
}

/// Writes the agent dir's mcp.json with `n` reference servers (`s0`, `s1`, ...; the first is
/// `everything` when there is one), or none at all for `n == 0`.
fn write_mcp_json(agent: &Path, n: usize) {
    let server = json!({"command": "node", "args": [everything(), "stdio"]});
    let servers: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            let name = if i == 0 {
                "everything".to_string()
            } else {
                format!("s{i}")
            };
            (name, server.clone())
        })
        .collect();
    if n > 0 {
        let text = json!({ "mcpServers": servers }).to_string();
        std::fs::write(agent.join("mcp.json"), text).unwrap();
    }
}

/// gjc in RPC mode with `servers` reference servers; returns once `ready` is read, and how long
/// that took from the spawn.
fn spawn_gjc(agent: &Path, fake: &FakeProvider, servers: usize) -> (RpcClient, Duration) {
    let model = json!([{"id": "m", "contextWindow": 10000000, "maxTokens": 4096}]);
    let models = json!({"providers": {"fake": {"baseUrl": format!("{}/v1", fake.base_url), "api": "openai-completions", "apiKey": "k", "models": model}}});
    std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
    write_mcp_json(agent, servers);
    let started = Instant::now();
    let mut c = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", agent)
        .env("HOME", agent)
        .current_dir(agent)
        .args(["--provider", "fake", "--model", "m"])
        .spawn()
        .unwrap();
    let ready = c.recv(WAIT).unwrap();
    let took = started.elapsed();
    assert_eq!(ready.value["type"], "ready", "{}", ready.line);
    (c, took)
}

/// Waits until `n` servers have said `ready` (their `mcp_server_state` events).
fn await_servers(c: &mut RpcClient, n: usize) {
    let mut ready = std::collections::HashSet::new();
    while ready.len() < n {
        let f = c.recv(WAIT).unwrap();
        let e = &f.value["payload"]["event"];
        if e["type"] == "mcp_server_state" {
            assert_ne!(e["state"], "failed", "a server failed: {e}");
            if e["state"] == "ready" {
                ready.insert(e["name"].as_str().unwrap_or("").to_string());
            }
        }
    }
}

fn close(mut c: RpcClient) {
    c.close_stdin();
    c.wait_exit(Duration::from_secs(10));
}

#[derive(Clone)]
enum Kind {
    Mcp,
    Read,
    /// The read loop, with the least client's `echo` call to a server of its own made by the
    /// fake provider before each answer that follows a tool result: the in-turn floor.
    ReadAndDirect(Arc<Mutex<Direct>>),
}

/// One loop's figures: wall per turn and the median tool span, in ms.
struct Loop {
    per_turn: f64,
    span: f64,
}

/// One prompt of `n` tool turns and a final answer, in a fresh gjc with one server ready.
fn gjc_loop(fake: &FakeProvider, n: usize, kind: Kind) -> Loop {
    let agent = tempfile::tempdir().unwrap();
    std::fs::write(agent.path().join("tiny.txt"), "hi").unwrap();
    let (mut c, _) = spawn_gjc(agent.path(), fake, 1);
    await_servers(&mut c, 1);
    for i in 0..=n {
        let body = match &kind {
            _ if i == n => openai_text(&["done"]),
            Kind::Mcp => openai_tool_call(
                &format!("c{i}"),
                "mcp__everything__echo",
                &json!({"message": "hi"}),
            ),
            Kind::Read | Kind::ReadAndDirect(_) => {
                openai_tool_call(&format!("c{i}"), "read", &json!({"path": "tiny.txt"}))
            }
        };
        let mut reply = Reply::sse(body);
        if let (Kind::ReadAndDirect(server), true) = (&kind, i > 0) {
            let server = server.clone();
            let call = Chunk::Run(Box::new(move || {
                let mut server = server.lock().unwrap();
                let id = server.next_id;
                server.call("tools/call", echo_params(id));
            }));
            reply.chunks.insert(0, call);
        }
        fake.push(reply);
    }
    let started = Instant::now();
    c.request(json!({"type": "prompt", "message": "loop"}), WAIT)
        .unwrap();
    let (mut spans, mut began, mut ends) = (Vec::new(), None, 0);
    loop {
        let f = c.recv(WAIT).unwrap();
        let event = &f.value["payload"]["event"];
        match event["type"].as_str() {
            Some("tool_execution_start") => began = Some(Instant::now()),
            Some("tool_execution_end") => {
                assert_eq!(event["isError"], false, "{}", f.line);
                ends += 1;
                if let Some(at) = began.take() {
                    spans.push(ms(at.elapsed()));
                }
            }
            Some("agent_end") => break,
            _ => {}
        }
    }
    let wall = ms(started.elapsed());
    assert_eq!(ends, n, "every turn ran its tool");
    while fake.try_request().is_some() {}
    close(c);
    Loop {
        per_turn: wall / n as f64,
        span: median(&mut spans),
    }
}

/// The floor's server: spawned, shaken hands with, ready for calls.
struct Direct {
    child: Child,
    stdin: ChildStdin,
    /// Taken by the reader thread of the threaded floor.
    stdout: Option<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Direct {
    fn start() -> Direct {
        let mut child = Command::new("node")
            .arg(everything())
            .arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node");
        let stdin = child.stdin.take().unwrap();
        let stdout = Some(BufReader::new(child.stdout.take().unwrap()));
        let mut d = Direct {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        d.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        d.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        d
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// One request and its answer (other lines, notifications, are read past).
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            let stdout = self.stdout.as_mut().expect("not taken");
            assert!(stdout.read_line(&mut line).unwrap() > 0, "server gone");
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == id {
                return v;
            }
        }
    }

    /// The median of `n` echo round trips, in ms.
    fn echo_round_trips(&mut self, n: usize) -> f64 {
        let mut times: Vec<f64> = (0..n)
            .map(|_| {
                let t = Instant::now();
                let v = self.call("tools/call", echo_params(self.next_id));
                let took = ms(t.elapsed());
                assert!(v["result"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("hi")));
                took
            })
            .collect();
        median(&mut times)
    }
}

/// The `echo` call as gjc makes it: with a progress token (gjc gives the tool call's id), which
/// the server takes in and may report progress against, so the floor asks the server for the
/// same work.
fn echo_params(n: u64) -> Value {
    json!({"name": "echo", "arguments": {"message": "hi"},
        "_meta": {"progressToken": format!("call_{n}_0")}})
}

/// The floor in the shape gjc's design gives a server (`src/mcp/stdio.rs`): a reader thread
/// parses each line and hands the answer over a channel to the caller, which wrote the request;
/// two wake-ups per call where the one-thread client has none. Returns the median, in ms.
fn threaded_round_trips(n: usize) -> f64 {
    let mut server = Direct::start();
    let stdout = server.stdout.take().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded::<Value>();
    let reader = std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(v) = serde_json::from_str::<Value>(&line.unwrap_or_default()) else {
                break;
            };
            if v.get("id").is_some() && tx.send(v).is_err() {
                break;
            }
        }
    });
    let mut times = Vec::with_capacity(n + 20);
    for i in 0..n + 20 {
        let id = server.next_id;
        server.next_id += 1;
        let t = Instant::now();
        server.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": echo_params(id)}));
        let answer = rx.recv_timeout(WAIT).expect("an answer");
        assert_eq!(answer["id"], id);
        // The first 20 warm up, as in the one-thread floor.
        if i >= 20 {
            times.push(ms(t.elapsed()));
        }
    }
    drop(server);
    let _ = reader.join();
    median(&mut times)
}

impl Drop for Direct {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn round_trip(fake: &FakeProvider, turns: usize, runs: usize) {
    println!("a. MCP echo round trip, {turns} turns per loop, {runs} runs, interleaved:");
    let (mut mcp, mut read, mut direct, mut added, mut ratios, mut spans) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut threaded, mut shape_ratios) = (vec![], vec![]);
    let (mut in_turn, mut in_turn_ratios) = (vec![], vec![]);
    let least = || {
        let mut server = Direct::start();
        server.echo_round_trips(20);
        Kind::ReadAndDirect(Arc::new(Mutex::new(server)))
    };
    // One of each first, unmeasured: caches, the page cache, node's compile cache.
    gjc_loop(fake, 5, Kind::Mcp);
    gjc_loop(fake, 5, Kind::Read);
    gjc_loop(fake, 5, least());
    for _ in 0..runs {
        let m = gjc_loop(fake, turns, Kind::Mcp);
        let r = gjc_loop(fake, turns, Kind::Read);
        let floor = gjc_loop(fake, turns, least()).per_turn - r.per_turn;
        in_turn.push(floor);
        in_turn_ratios.push((m.per_turn - r.per_turn) / floor);
        let d = {
            let mut server = Direct::start();
            server.echo_round_trips(20);
            server.echo_round_trips(turns)
        };
        let t = threaded_round_trips(turns);
        let extra = m.per_turn - r.per_turn;
        threaded.push(t);
        shape_ratios.push(extra / t);
        mcp.push(m.per_turn);
        read.push(r.per_turn);
        direct.push(d);
        added.push(extra);
        ratios.push(extra / d);
        spans.push(m.span / d);
    }
    let (m, r, d) = (median(&mut mcp), median(&mut read), median(&mut direct));
    println!("  turn with an MCP echo call        {m:8.3} ms");
    println!("  turn with a built-in read         {r:8.3} ms");
    println!(
        "  MCP call inside a turn (diff.)    {:8.3} ms   direct round trip {d:8.3} ms   ratio {:.2}x (target <= 1.3x)",
        median(&mut added),
        median(&mut ratios)
    );
    println!(
        "  tool start -> end frames (host)   ratio to the direct round trip {:.2}x",
        median(&mut spans)
    );
    println!(
        "  direct with a reader thread       {:8.3} ms   MCP call inside a turn against it {:.2}x",
        median(&mut threaded),
        median(&mut shape_ratios)
    );
    println!(
        "  least client's call in a turn     {:8.3} ms   MCP call inside a turn against it {:.2}x (the in-turn floor)",
        median(&mut in_turn),
        median(&mut in_turn_ratios)
    );
}

fn ready_time(fake: &FakeProvider, runs: usize) {
    println!("b. spawn -> ready, {runs} runs each, interleaved:");
    let (mut none, mut five) = (vec![], vec![]);
    let mut ratios = vec![];
    for i in 0..=runs {
        let one = |n: usize| {
            let agent = tempfile::tempdir().unwrap();
            let (c, took) = spawn_gjc(agent.path(), fake, n);
            close(c);
            ms(took)
        };
        let (a, b) = (one(0), one(5));
        // The first pair warms the page cache and is not counted.
        if i > 0 {
            none.push(a);
            five.push(b);
            ratios.push(b / a);
        }
    }
    let (a, b) = (median(&mut none), median(&mut five));
    println!(
        "  no servers {a:8.3} ms   five servers {b:8.3} ms   ratio {:.2}x (target <= 1.2x; median of the pairs' ratios)",
        median(&mut ratios)
    );
}

/// gjc's RSS (KiB) once `n` servers are ready, idle.
fn rss_with(fake: &FakeProvider, n: usize) -> u64 {
    let agent = tempfile::tempdir().unwrap();
    let (mut c, _) = spawn_gjc(agent.path(), fake, n);
    await_servers(&mut c, n);
    c.request(json!({"type": "get_state"}), WAIT).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let rss = status_kib(c.pid(), "VmRSS").unwrap_or(0);
    close(c);
    rss
}

fn rss_per_server(fake: &FakeProvider, servers: usize, runs: usize) {
    println!(
        "c. gjc's RSS with 0, 1, {servers} and {} servers ready, {runs} runs each, interleaved:",
        servers + 1
    );
    let (mut first, mut per, mut spread) = (vec![], vec![], vec![]);
    let (mut none, mut one, mut many) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        let mb = |n| rss_with(fake, n) as f64 / 1024.0;
        let (zero, single, n, n_plus_one) = (mb(0), mb(1), mb(servers), mb(servers + 1));
        first.push(single - zero);
        per.push((n_plus_one - single) / servers as f64);
        spread.push((n - zero) / servers as f64);
        none.push(zero);
        one.push(single);
        many.push(n_plus_one);
    }
    println!(
        "  0 servers {:7.2} MB   1 server {:7.2} MB   {} servers {:7.2} MB",
        median(&mut none),
        median(&mut one),
        servers + 1,
        median(&mut many)
    );
    println!(
        "  the first server {:.3} MB (with gjc's MCP code)   each further server {:.3} MB (target <= 0.3 MB)   (RSS_{servers} - RSS_0) / {servers} {:.3} MB",
        median(&mut first),
        median(&mut per),
        median(&mut spread)
    );
}

fn main() {
    let (mut turns, mut runs, mut servers) = (100, 7, 10);
    for arg in args() {
        let (key, value) = arg.split_once('=').unwrap_or((&arg, ""));
        let value: usize = value
            .parse()
            .unwrap_or_else(|_| panic!("bad argument {arg}"));
        match key {
            "turns" => turns = value.max(1),
            "runs" => runs = value.max(1),
            "servers" => servers = value.max(1),
            _ => panic!("unknown argument {arg}"),
        }
    }
    everything();
    let fake = FakeProvider::start();
    fake.skip_bodies();
    round_trip(&fake, turns, runs);
    ready_time(&fake, runs * 2);
    rss_per_server(&fake, servers, runs.min(5));
}
