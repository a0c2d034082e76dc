//! The kernel sandbox's cost, each figure beside `danger-full-access` in the same run, runs
//! interleaved so both sides see the same machine:
//! - the `echo hi` tool loop: a prompt whose model (the scripted provider) calls bash `echo hi`
//!   TURNS times, wall time per iteration;
//! - a user `bash` printing 50 MB;
//! - the sandbox's own spawn cost: a user `bash true` under each policy (the difference is what
//!   the child's three system calls and the confined exec add), and the one-time preparation of
//!   a policy's ruleset and filter, in microseconds.
//!
//! Run: `cargo bench --bench sandbox`

mod common;

use std::time::{Duration, Instant};

use common::*;
use gjc::client::RpcClient;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(300);
const BYTES: u64 = 50 * 1024 * 1024;
const TURNS: usize = 200;
const POLICIES: [&str; 2] = ["danger-full-access", "workspace-write"];

/// A gjc playing `turns` (when given) under `policy`, in its own folder.
fn start(policy: &str, turns: Option<&Value>) -> (RpcClient, tempfile::TempDir) {
    start_with(policy, turns, &[])
}

fn start_with(
    policy: &str,
    turns: Option<&Value>,
    extra: &[&str],
) -> (RpcClient, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let mut b = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", home.path())
        .env("GJC_TODO_REMINDERS", "0")
        .current_dir(home.path())
        .args(["--sandbox", policy, "--no-session"])
        .args(extra);
    if let Some(turns) = turns {
        let script = home.path().join("script.json");
        std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
        b = b.args(["--provider", "scripted", "--script"]).arg(&script);
    }
    let mut c = b.spawn().unwrap();
    c.recv(WAIT).unwrap();
    (c, home)
}

/// The wall time of one prompt whose model calls bash `echo hi` TURNS times, per iteration.
fn tool_loop(policy: &str) -> f64 {
    let mut turns: Vec<Value> = (0..TURNS)
        .map(|_| json!({"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": "echo hi"}}], "chunkChars": 1000}))
        .collect();
    turns.push(json!({"content": [{"type": "text", "text": "done"}]}));
    let (mut c, _home) = start(policy, Some(&Value::from(turns)));
    let started = Instant::now();
    c.request(json!({"type": "prompt", "message": "go"}), WAIT)
        .unwrap();
    c.collect_until(
        |f| f["type"] == "event" && f["payload"]["event_type"] == "agent_end",
        WAIT,
    )
    .unwrap();
    ms(started.elapsed()) / TURNS as f64
}

fn user_bash(c: &mut RpcClient, command: &str) -> f64 {
    let started = Instant::now();
    let r = c
        .request(json!({"type": "bash", "command": command}), WAIT)
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    ms(started.elapsed())
}

/// The medians side by side, their ratio, and the median of the runs' paired ratios (each
/// workspace-write run over the danger-full-access run next to it), which a machine whose speed
/// drifts during the benchmark disturbs less.
fn ratio_line(what: &str, unit: &str, full: &mut [f64], confined: &mut [f64]) -> (f64, f64) {
    let mut paired: Vec<f64> = full
        .iter()
        .zip(confined.iter())
        .map(|(f, w)| w / f)
        .collect();
    let (f, w) = (median(full), median(confined));
    println!(
        "{what}: danger-full-access {f:.3} {unit}, workspace-write {w:.3} {unit} (ratio {:.3}x, paired {:.3}x)",
        w / f,
        median(&mut paired)
    );
    (f, w)
}

fn main() {
    // The tool loop, six runs a policy.
    let (mut loop_full, mut loop_ws) = (Vec::new(), Vec::new());
    // Alternating which goes first (ABBA), so neither side always runs on a warmer machine.
    for round in 0..6 {
        if round % 2 == 0 {
            loop_full.push(tool_loop(POLICIES[0]));
            loop_ws.push(tool_loop(POLICIES[1]));
        } else {
            loop_ws.push(tool_loop(POLICIES[1]));
            loop_full.push(tool_loop(POLICIES[0]));
        }
    }
    ratio_line(
        &format!("echo hi tool loop, {TURNS} iterations, per iteration, median of 6"),
        "ms",
        &mut loop_full,
        &mut loop_ws,
    );

    // 50 MB of output and `true`, one gjc a policy, alternating command by command.
    let (mut full, _h1) = start(POLICIES[0], None);
    let (mut ws, _h2) = start(POLICIES[1], None);
    let big = format!("yes 'the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuv' | head -c {BYTES}");
    let (mut big_full, mut big_ws) = (Vec::new(), Vec::new());
    for round in 0..20 {
        if round % 2 == 0 {
            big_full.push(user_bash(&mut full, &big));
            big_ws.push(user_bash(&mut ws, &big));
        } else {
            big_ws.push(user_bash(&mut ws, &big));
            big_full.push(user_bash(&mut full, &big));
        }
    }
    ratio_line(
        "user bash printing 50 MB, median of 20",
        "ms",
        &mut big_full,
        &mut big_ws,
    );
    // With network granted there is no seccomp filter: the two rows apart show each part.
    let (mut net, _h3) = start_with(POLICIES[1], None, &["--sandbox-network"]);
    let (mut true_full, mut true_ws, mut true_net) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..300 {
        true_full.push(user_bash(&mut full, "true"));
        true_ws.push(user_bash(&mut ws, "true"));
        true_net.push(user_bash(&mut net, "true"));
    }
    println!(
        "  workspace-write with network (Landlock only, no seccomp filter): {:.3} ms",
        median(&mut true_net)
    );
    let (f, w) = ratio_line(
        "user bash `true`, median of 300",
        "ms",
        &mut true_full,
        &mut true_ws,
    );
    println!(
        "  the sandbox's spawn cost (workspace-write minus danger-full-access): {:.0} µs",
        (w - f) * 1000.0
    );

    // Preparing a policy: the ruleset (roots opened, rules added) and the socket filter.
    let dir = tempfile::tempdir().unwrap();
    let roots = [dir.path().to_path_buf(), std::env::temp_dir()];
    let mut prepare = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        let c = gjc::sandbox::Confinement::prepare(
            &roots,
            false,
            None,
            gjc::sandbox::landlock_abi(None),
        )
        .expect("Landlock");
        prepare.push(started.elapsed().as_secs_f64() * 1e6);
        drop(c);
    }
    println!(
        "preparing a workspace-write policy (once per policy, cwd and limits, not per command): median {:.0} µs of 200",
        median(&mut prepare)
    );
}
