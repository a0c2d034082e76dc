//! Streaming benchmarks against the loopback fake provider, each beside a baseline in the same run:
//! - throughput: 100,000 text deltas → frames on stdout per second (compact mode), beside the rate
//!   a plain client reads the same stream from the fake server; stdout bytes per delta;
//! - prompt → the model request reaching the fake server;
//! - abort sent while the server is stalled → `agent_end`;
//! - per-turn overhead of a 20-step tool loop against an instant fake model;
//! - a 1,000-delta turn of about 8 kB of text in the default (reference-shape) frames and in
//!   compact frames: stdout bytes, frames per second and wall time, beside a plain client reading
//!   the same stream, and beside another gjc binary (`GJC_BASELINE_BIN`, e.g. a previous release)
//!   when one is given;
//! - the same 1,000-delta turn (compact frames) with 50 conditional rules loaded that never match,
//!   beside the turn with no rules (`cargo bench --bench stream -- rules` runs only this; with `GJC_BASELINE_BIN`
//!   that binary's two turns are measured in the same rounds);
//! - a 20-step tool loop on the scripted provider with a trivial `before_tool_call` hook, per
//!   iteration beside the same loop without hooks (`cargo bench --bench stream -- hooks` runs only this).
//!
//! Run: `cargo bench --bench stream`

mod common;
#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use std::io::BufReader;
use std::time::{Duration, Instant};

use common::*;
use fake_provider::{
    openai_deltas, openai_text, openai_tool_call, sse_events, Chunk, FakeProvider, Reply,
};
use gjc::client::RpcClient;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

fn spawn(fake: &FakeProvider, extra: &[&str]) -> (RpcClient, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let model = json!([{"id": "m", "contextWindow": 1000000, "maxTokens": 4096}]);
    let models = json!({"providers": {"fake": {"baseUrl": format!("{}/v1", fake.base_url), "api": "openai-completions", "apiKey": "k", "models": model}}});
    std::fs::write(home.path().join("models.json"), models.to_string()).unwrap();
    let mut c = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", home.path())
        .current_dir(home.path())
        .args(["--provider", "fake", "--model", "m"])
        .args(extra)
        .spawn()
        .unwrap();
    c.recv(WAIT).unwrap();
    (c, home)
}

/// How fast a plain client reads and decodes the same stream straight from the fake server.
fn raw_rate(fake: &FakeProvider, body: &str, n: usize) -> f64 {
    fake.push(Reply::sse(body.to_string()));
    let started = Instant::now();
    let resp = ureq::post(&format!("{}/v1/chat/completions", fake.base_url))
        .send("{}")
        .unwrap();
    let mut sse =
        gjc::provider::sse::SseReader::new(BufReader::new(resp.into_body().into_reader()));
    let mut events = 0;
    while let Some(e) = sse.next_event().unwrap() {
        let _: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
        events += 1;
    }
    let _ = fake.try_request();
    assert!(events > n);
    n as f64 / started.elapsed().as_secs_f64()
}

fn throughput(n: usize) {
    let fake = FakeProvider::start();
    let body = openai_deltas(n);
    let mut raw: Vec<f64> = (0..3).map(|_| raw_rate(&fake, &body, n)).collect();
    let (mut c, _home) = spawn(&fake, &["--compact-updates"]);
    let mut rates = Vec::new();
    let mut bytes_per_delta = 0.0;
    for _ in 0..3 {
        fake.push(Reply::sse(body.clone()));
        c.request(json!({"type": "prompt", "message": "go"}), WAIT)
            .unwrap();
        let (mut first, mut updates, mut bytes) = (None, 0usize, 0usize);
        loop {
            let f = c.recv(WAIT).unwrap();
            let kind = f.value["payload"]["event_type"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if kind == "message_update" {
                first.get_or_insert_with(Instant::now);
                updates += 1;
                if f.value["payload"]["assistantMessageEvent"]["type"] == "text_delta" {
                    bytes += f.line.len() + 1;
                }
            }
            if kind == "agent_end" {
                break;
            }
        }
        let secs = first.unwrap().elapsed().as_secs_f64();
        rates.push(updates as f64 / secs);
        bytes_per_delta = bytes as f64 / n as f64;
        let _ = fake.try_request();
    }
    println!("throughput, {n} text deltas, median of 3:");
    println!(
        "  fake server read by a plain client: {:>10.0} deltas/s",
        median(&mut raw)
    );
    println!(
        "  gjc compact message_update frames:  {:>10.0} frames/s ({:.2}x of the raw rate)",
        median(&mut rates),
        median(&mut rates) / median(&mut raw)
    );
    println!("  stdout bytes per text_delta frame (compact): {bytes_per_delta:.0}");
}

fn default_mode_bytes(n: usize) {
    let fake = FakeProvider::start();
    let (mut c, _home) = spawn(&fake, &[]);
    fake.push(Reply::sse(openai_deltas(n)));
    c.request(json!({"type": "prompt", "message": "go"}), WAIT)
        .unwrap();
    let mut bytes = 0usize;
    loop {
        let f = c.recv(WAIT).unwrap();
        if f.value["payload"]["event"]["assistantMessageEvent"]["type"] == "text_delta" {
            bytes += f.line.len() + 1;
        }
        if f.value["payload"]["event_type"] == "agent_end" {
            break;
        }
    }
    let text_chars = n * 3;
    println!("  default mode, {n} deltas ({text_chars} characters): {:.1} MB of text_delta frames, {:.0} bytes per delta (the snapshot grows with the message)", bytes as f64 / 1e6, bytes as f64 / n as f64);
}

/// One turn of `n` deltas: (stdout bytes of the run, frames of the run, wall ms prompt → agent_end,
/// ms the session thread spent on a CPU meanwhile).
fn one_turn(
    bin: &std::path::Path,
    fake: &FakeProvider,
    body: &str,
    compact: bool,
    rules: usize,
) -> (usize, usize, f64, f64) {
    let home = tempfile::tempdir().unwrap();
    write_rules(home.path(), rules);
    let model = json!([{"id": "m", "contextWindow": 1000000, "maxTokens": 4096}]);
    let models = json!({"providers": {"fake": {"baseUrl": format!("{}/v1", fake.base_url), "api": "openai-completions", "apiKey": "k", "models": model}}});
    std::fs::write(home.path().join("models.json"), models.to_string()).unwrap();
    let mut builder = RpcClient::builder(bin)
        .env("GJC_CODING_AGENT_DIR", home.path())
        .current_dir(home.path())
        .args(["--provider", "fake", "--model", "m", "--no-session"]);
    if compact {
        builder = builder.arg("--compact-updates");
    }
    let mut c = builder.spawn().unwrap();
    c.recv(WAIT).unwrap();
    fake.push(Reply::sse(body.to_string()));
    let pid = c.pid();
    // The session thread may start only after `ready`: none yet is no CPU time yet.
    let session_cpu = || thread_cpu_ns(pid, "gjc-session").unwrap_or(0) as f64;
    let cpu_before = session_cpu();
    let started = Instant::now();
    c.send(&json!({"id": "p", "type": "prompt", "message": "go"}))
        .unwrap();
    let (mut bytes, mut frames) = (0usize, 0usize);
    loop {
        let f = c.recv(WAIT).unwrap();
        bytes += f.line.len() + 1;
        frames += 1;
        if f.value["payload"]["event_type"] == "agent_end" {
            break;
        }
    }
    let wall = ms(started.elapsed());
    (bytes, frames, wall, (session_cpu() - cpu_before) / 1e6)
}

/// `n` conditional rules in `<agent dir>/rules`, watching every scope, none matching the
/// benchmark's text (`wordNNN `).
fn write_rules(agent_dir: &std::path::Path, n: usize) {
    if n == 0 {
        return;
    }
    let dir = agent_dir.join("rules");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..n {
        let condition = match i % 3 {
            0 => format!("forbidden_call_{i}\\("),
            1 => format!("\\bTODO-{i}\\b"),
            _ => format!("(?i)password\\s*=\\s*{i}"),
        };
        let text = format!("---\ncondition: '{condition}'\n---\nRule {i}.");
        std::fs::write(dir.join(format!("r{i:02}.md")), text).unwrap();
    }
}

/// The `n`-delta turn as `reference_turn` sends it.
fn turn_body(n: usize) -> String {
    let mut events: Vec<Value> = (0..n)
        .map(|i| json!({"choices":[{"index":0,"delta":{"content":format!("word{:03} ", i % 1000)}}]}))
        .collect();
    events.push(json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
    let mut body = sse_events(&events, false);
    body.push_str("data: [DONE]\n\n");
    body
}

/// The cost of watching a stream: the 1,000-delta turn with 50 non-matching conditional rules
/// beside the same turn with none, interleaved, medians of 15 runs each (and the same for
/// `GJC_BASELINE_BIN`, in the same rounds, when given).
fn rules_turn(n: usize) {
    let fake = FakeProvider::start();
    let body = turn_body(n);
    let mut bins = vec![("this build", gjc_bin())];
    if let Some(base) = std::env::var_os("GJC_BASELINE_BIN") {
        bins.push(("baseline", base.into()));
    }
    let mut runs = vec![(Vec::new(), Vec::new()); bins.len()];
    for _ in 0..15 {
        for ((_, bin), (none, fifty)) in bins.iter().zip(&mut runs) {
            none.push(one_turn(bin, &fake, &body, true, 0));
            fifty.push(one_turn(bin, &fake, &body, true, 50));
        }
    }
    for ((name, _), (none, fifty)) in bins.iter().zip(&runs) {
        let pick = |v: &[(usize, usize, f64, f64)], f: fn(&(usize, usize, f64, f64)) -> f64| {
            median(&mut v.iter().map(f).collect::<Vec<f64>>())
        };
        let (a, b) = (pick(none, |r| r.2), pick(fifty, |r| r.2));
        let (ca, cb) = (pick(none, |r| r.3), pick(fifty, |r| r.3));
        println!(
            "{n}-delta turn, compact frames, prompt -> agent_end ({name}): no rules {a:.2} ms, 50 non-matching conditional rules {b:.2} ms ({:.2}x); session thread on CPU {ca:.2} ms vs {cb:.2} ms ({:.2}x); medians of 15",
            b / a,
            cb / ca
        );
    }
}

/// The 1,000-delta turn (~8 kB of text), default and compact frames, medians of 9 runs.
fn reference_turn(n: usize) {
    let fake = FakeProvider::start();
    let body = turn_body(n);
    let text_bytes = n * 8;
    let mut raw: Vec<f64> = (0..9)
        .map(|_| 1000.0 * n as f64 / raw_rate(&fake, &body, n))
        .collect();
    println!(
        "{n}-delta turn ({text_bytes} bytes of text); plain client reading the same stream: median {:.2} ms",
        median(&mut raw)
    );
    let mut bins = vec![("gjc", gjc_bin())];
    if let Some(base) = std::env::var_os("GJC_BASELINE_BIN") {
        bins.push(("baseline", std::path::PathBuf::from(base)));
    }
    for compact in [false, true] {
        for (name, bin) in &bins {
            let runs: Vec<(usize, usize, f64, f64)> = (0..9)
                .map(|_| one_turn(bin, &fake, &body, compact, 0))
                .collect();
            let mut bytes: Vec<f64> = runs.iter().map(|r| r.0 as f64).collect();
            let mut frames: Vec<f64> = runs.iter().map(|r| r.1 as f64).collect();
            let mut wall: Vec<f64> = runs.iter().map(|r| r.2).collect();
            let mut rate: Vec<f64> = runs.iter().map(|r| r.1 as f64 / (r.2 / 1000.0)).collect();
            println!(
                "  {:7} {name:8}: stdout {:.2} MB, {:.0} frames, {:.0} frames/s, wall {:.2} ms (medians)",
                if compact { "compact" } else { "default" },
                median(&mut bytes) / 1e6,
                median(&mut frames),
                median(&mut rate),
                median(&mut wall),
            );
        }
    }
}

fn prompt_to_request() {
    let fake = FakeProvider::start();
    let (mut c, _home) = spawn(&fake, &[]);
    let mut lat = Vec::new();
    for _ in 0..30 {
        fake.push(Reply::sse(openai_text(&["ok"])));
        let id = c.next_id();
        let sent = Instant::now();
        c.send(&json!({"id": id, "type": "prompt", "message": "hi"}))
            .unwrap();
        let req = fake.request(WAIT);
        lat.push(ms(req.received.duration_since(sent)));
        c.wait_event("agent_end", WAIT).unwrap();
    }
    println!(
        "prompt -> request at the fake server: median {:.3} ms, p90 {:.3} ms (30 prompts)",
        median(&mut lat),
        percentile(&mut lat, 0.9)
    );
}

fn abort_latency() {
    let fake = FakeProvider::start();
    let (mut c, _home) = spawn(&fake, &[]);
    let head = sse_events(
        &[json!({"choices":[{"index":0,"delta":{"content":"partial"}}]})],
        false,
    );
    let (mut lat, mut closed_lat) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let (closed_tx, closed) = crossbeam_channel::bounded(1);
        fake.push(Reply::sse_chunks(vec![
            Chunk::Bytes(head.clone().into_bytes()),
            Chunk::StallUntilClosed(closed_tx),
        ]));
        c.request(json!({"type": "prompt", "message": "hi"}), WAIT)
            .unwrap();
        // The delta itself: the turn's earlier `message_update` (`text_start`) stays queued in
        // the client, and waiting for any update would find the previous turn's and abort
        // before the request is even made.
        c.wait_for(
            |f| f["payload"]["event"]["assistantMessageEvent"]["type"] == "text_delta",
            WAIT,
        )
        .unwrap();
        let sent = Instant::now();
        c.send(&json!({"type": "abort"})).unwrap();
        c.wait_event("agent_end", WAIT).unwrap();
        lat.push(ms(sent.elapsed()));
        // The provider's side: the connection seen closed (FIN or reset) by the server.
        let at: Instant = closed.recv_timeout(WAIT).unwrap();
        closed_lat.push(ms(at.saturating_duration_since(sent)));
        let _ = fake.try_request();
    }
    println!(
        "abort while the server stalls -> agent_end: median {:.3} ms, p90 {:.3} ms (20 aborts)",
        median(&mut lat),
        percentile(&mut lat, 0.9)
    );
    println!(
        "abort while the server stalls -> the server sees the connection closed: median {:.3} ms, p90 {:.3} ms (20 aborts)",
        median(&mut closed_lat),
        percentile(&mut closed_lat, 0.9)
    );
}

fn tool_loop_overhead() {
    let fake = FakeProvider::start();
    let (mut c, home) = spawn(&fake, &[]);
    std::fs::write(home.path().join("f.txt"), "x").unwrap();
    let mut per_turn = Vec::new();
    for _ in 0..5 {
        for i in 0..20 {
            fake.push(Reply::sse(openai_tool_call(
                &format!("c{i}"),
                "ls",
                &json!({}),
            )));
        }
        fake.push(Reply::sse(openai_text(&["done"])));
        per_turn.push(one_loop(&mut c));
        while fake.try_request().is_some() {}
    }
    println!("20-step tool loop, instant fake model over HTTP: {:.3} ms per turn beyond the tools' own time (median of 5 runs; includes each HTTP request)", median(&mut per_turn));
}

/// Runs one prompt of 21 turns; returns the time per turn beyond the tools' own time, in ms.
fn one_loop(c: &mut RpcClient) -> f64 {
    let (total, tools) = timed_loop(c);
    ms(total.saturating_sub(tools)) / 21.0
}

/// Runs one prompt of 21 turns: (prompt -> agent_end, the time between each tool's start and
/// end events).
fn timed_loop(c: &mut RpcClient) -> (Duration, Duration) {
    let started = Instant::now();
    c.request(json!({"type": "prompt", "message": "loop"}), WAIT)
        .unwrap();
    let mut tool_time = Duration::ZERO;
    let mut tool_started = None;
    loop {
        let f = c.recv(WAIT).unwrap();
        match f.value["payload"]["event_type"].as_str() {
            Some("tool_execution_start") => tool_started = Some(Instant::now()),
            Some("tool_execution_end") => tool_time += tool_started.take().unwrap().elapsed(),
            Some("agent_end") => break,
            _ => {}
        }
    }
    (started.elapsed(), tool_time)
}

/// gjc on the scripted provider, scripted for `runs` prompts of a 20-step `ls` loop each, in
/// `dir` (its agent dir and project), where `f.txt` is what `ls` lists.
fn scripted_looper(dir: &std::path::Path, runs: usize) -> RpcClient {
    std::fs::write(dir.join("f.txt"), "x").unwrap();
    let mut turns: Vec<Value> = Vec::new();
    for run in 0..runs {
        for i in 0..20 {
            turns.push(json!({"content": [{"type": "toolCall", "id": format!("r{run}c{i}"), "name": "ls", "arguments": {}}]}));
        }
        turns.push(json!({"content": [{"type": "text", "text": "done"}]}));
    }
    let script = dir.join("script.json");
    std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
    let mut c = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", dir)
        .current_dir(dir)
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .spawn()
        .unwrap();
    c.recv(WAIT).unwrap();
    c
}

/// The same loop against the scripted provider: no HTTP at all, only gjc's own work per turn.
fn scripted_loop_overhead() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = scripted_looper(dir.path(), 5);
    let mut per_turn = Vec::new();
    for _ in 0..5 {
        per_turn.push(one_loop(&mut c));
    }
    println!("20-step tool loop, scripted provider (no HTTP): {:.3} ms per turn beyond the tools' own time (median of 5 runs)", median(&mut per_turn));
}

/// A 20-step tool loop with a trivial `before_tool_call` hook (a shell script that reads its
/// input and allows the call) beside the same loop with no hook: two gjc processes, their runs
/// alternating, wall time per iteration (prompt -> agent_end / 20), medians.
fn hook_loop_overhead() {
    const RUNS: usize = 7;
    let plain_dir = tempfile::tempdir().unwrap();
    let hooked_dir = tempfile::tempdir().unwrap();
    let hook = hooked_dir.path().join("allow.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncat >/dev/null\necho '{\"decision\":\"allow\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let hooks = json!({"hooks": [{"event": "before_tool_call", "command": hook}]});
    std::fs::write(hooked_dir.path().join("hooks.json"), hooks.to_string()).unwrap();
    let mut plain = scripted_looper(plain_dir.path(), RUNS);
    let mut hooked = scripted_looper(hooked_dir.path(), RUNS);
    let input = hooked_dir.path().join("input.json");
    std::fs::write(&input, r#"{"event":"before_tool_call"}"#).unwrap();
    let (mut without, mut with, mut direct) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        without.push(ms(timed_loop(&mut plain).0) / 20.0);
        with.push(ms(timed_loop(&mut hooked).0) / 20.0);
        direct.push(spawn_directly(&hook, &input, 20) / 20.0);
    }
    let (a, b, d) = (median(&mut without), median(&mut with), median(&mut direct));
    println!(
        "20-step tool loop, scripted provider: no hook {a:.3} ms per iteration, trivial before_tool_call hook {b:.3} ms per iteration (+{:.3} ms for the hook; the same hook started by this benchmark through the same shell: {d:.3} ms), medians of {RUNS} alternating runs",
        b - a
    );
}

/// The floor of a hook's cost on this machine: `n` runs of `<shell> -c 'exec <hook> <input'`, in
/// ms, with the shell gjc runs commands with (bash when present, else sh).
fn spawn_directly(hook: &std::path::Path, input: &std::path::Path, n: usize) -> f64 {
    let command = format!("exec '{}' <'{}'", hook.display(), input.display());
    let shell = if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let started = Instant::now();
    for _ in 0..n {
        let out = std::process::Command::new(shell)
            .args(["-c", &command])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    ms(started.elapsed())
}

fn main() {
    match args().next().as_deref() {
        Some("rules") => return rules_turn(1_000),
        Some("hooks") => return hook_loop_overhead(),
        Some("abort") => return abort_latency(),
        _ => {}
    }
    let n: usize = args()
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    reference_turn(1_000);
    rules_turn(1_000);
    throughput(n);
    default_mode_bytes(2_000);
    prompt_to_request();
    abort_latency();
    tool_loop_overhead();
    scripted_loop_overhead();
    hook_loop_overhead();
}
