//! User `bash` benchmarks, each beside a baseline in the same run:
//! - a command printing 50 MB: wall time through gjc beside `sh -c CMD > /dev/null` and beside
//!   `sh -c CMD > FILE` in the folder spill files go to (the cost of keeping the output) and
//!   `sh -c 'CMD | cat > /dev/null'` (the cost of reading the output through a pipe at all), gjc's
//!   peak RSS growth, and a check that truncation and the spill file are exact;
//! - `abort_bash` while `sleep 100` runs: response latency and time until the group is gone.
//!
//! Run: `cargo bench --bench bash`

mod common;

use std::time::{Duration, Instant};

use common::*;
use gjc::client::RpcClient;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);
const BYTES: u64 = 50 * 1024 * 1024;

fn main() {
    let home = tempfile::tempdir().unwrap();
    let mut c = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", home.path())
        .current_dir(home.path())
        .spawn()
        .unwrap();
    c.recv(WAIT).unwrap();
    let cmd = format!("yes 'the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuv' | head -c {BYTES}");
    let hwm_before = status_kib(c.pid(), "VmHWM:").unwrap_or(0);
    // The second baseline keeps the output as gjc must: in a file where spill files go.
    let floor_file = std::env::temp_dir().join(format!("gjc-bench-{}.out", std::process::id()));
    let shell = |tail: &str| {
        let started = Instant::now();
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{cmd} {tail}"))
            .status()
            .unwrap();
        ms(started.elapsed())
    };
    let (mut through_gjc, mut direct, mut to_file, mut piped) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..7 {
        direct.push(shell("> /dev/null"));
        piped.push(shell("| cat > /dev/null"));
        to_file.push(shell(&format!("> {}", floor_file.display())));
        let _ = std::fs::remove_file(&floor_file);
        let started = Instant::now();
        let r = c
            .request(json!({"type": "bash", "command": cmd}), WAIT)
            .unwrap();
        through_gjc.push(ms(started.elapsed()));
        let d = &r["data"];
        if round == 0 {
            let path = d["fullOutputPath"].as_str().expect("full output path");
            let full = std::fs::metadata(path).unwrap().len();
            println!("50 MB of output: truncated={} output {} bytes, totalBytes {}, spill file {} bytes (exact: {})", d["truncated"], d["output"].as_str().unwrap().len(), d["totalBytes"], full, full == BYTES);
        }
    }
    let hwm_after = status_kib(c.pid(), "VmHWM:").unwrap_or(0);
    let (g, b, f, p) = (
        median(&mut through_gjc),
        median(&mut direct),
        median(&mut to_file),
        median(&mut piped),
    );
    println!("user bash printing 50 MB, median of 7: gjc {g:.1} ms, sh -c CMD > /dev/null {b:.1} ms (ratio {:.2}x), sh -c CMD > FILE in the spill folder {f:.1} ms (ratio {:.2}x)", g / b, g / f);
    println!("  floors in the same run: sh -c 'CMD | cat > /dev/null' {p:.1} ms ({:.2}x of > /dev/null), > FILE {:.2}x of > /dev/null", p / b, f / b);
    println!(
        "gjc peak RSS growth over those runs: {:.2} MB (VmHWM {:.1} -> {:.1} MB)",
        (hwm_after.saturating_sub(hwm_before)) as f64 / 1024.0,
        hwm_before as f64 / 1024.0,
        hwm_after as f64 / 1024.0
    );

    let (mut respond, mut gone) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let id = c.next_id();
        c.send(&json!({"id": id, "type": "bash", "command": "sleep 100"}))
            .unwrap();
        let deadline = Instant::now() + WAIT;
        while !running("sleep 100") && Instant::now() < deadline {
            std::thread::yield_now();
        }
        let sent = Instant::now();
        c.request(json!({"type": "abort_bash"}), WAIT).unwrap();
        respond.push(ms(sent.elapsed()));
        while running("sleep 100") && Instant::now() < deadline {
            std::thread::yield_now();
        }
        gone.push(ms(sent.elapsed()));
        let r = c.wait_for(|f| f["id"] == id, WAIT).unwrap();
        assert_eq!(r["data"]["cancelled"], true);
    }
    println!("abort_bash during sleep 100, 10 runs: response median {:.3} ms (p90 {:.3}), group gone median {:.3} ms", median(&mut respond), percentile(&mut respond, 0.9), median(&mut gone));
}
