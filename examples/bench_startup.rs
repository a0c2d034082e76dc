//! Startup benchmark: spawn → `ready`, spawn → first `get_state` response, and RSS when idle after
//! ready, for gjc and for a baseline process (baseline_echo) measured in the same run, interleaved.
//!
//! Run: `cargo build --release --bins --examples && target/x86_64-unknown-linux-gnu/release/examples/bench_startup [runs]`

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Sample {
    ready: f64,
    first_response: f64,
    rss_kib: u64,
}

fn measure(program: &Path, args: &[&str]) -> Sample {
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env(
            "GJC_CODING_AGENT_DIR",
            std::env::temp_dir().join("gjc-bench-agent"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let ready = started.elapsed();
    assert!(line.contains("ready"), "{line}");
    stdin
        .write_all(b"{\"id\":\"1\",\"type\":\"get_state\"}\n")
        .unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let first_response = started.elapsed();
    assert!(line.contains("\"response\""), "{line}");
    // Idle: give the threads a moment to settle, then read the resident set.
    std::thread::sleep(Duration::from_millis(50));
    let rss_kib = status_kib(child.id(), "VmRSS:").unwrap_or(0);
    drop(stdin);
    let _ = child.wait();
    Sample {
        ready: ms(ready),
        first_response: ms(first_response),
        rss_kib,
    }
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let gjc = gjc_bin();
    let baseline = sibling("baseline_echo");
    assert!(
        baseline.is_file(),
        "build the examples first: cargo build --release --bins --examples"
    );
    let (mut g, mut b) = (Vec::new(), Vec::new());
    measure(&gjc, &["--mode", "rpc"]);
    for _ in 0..runs {
        g.push(measure(&gjc, &["--mode", "rpc"]));
        b.push(measure(&baseline, &[]));
    }
    println!("startup, {runs} runs each, interleaved (median / p90):");
    report("spawn -> ready (ms)", &g, &b, |s| s.ready);
    report("spawn -> first get_state response (ms)", &g, &b, |s| {
        s.first_response
    });
    report("idle RSS after ready (MB)", &g, &b, |s| {
        s.rss_kib as f64 / 1024.0
    });
}

fn report(what: &str, g: &[Sample], b: &[Sample], f: impl Fn(&Sample) -> f64) {
    let mut gv: Vec<f64> = g.iter().map(&f).collect();
    let mut bv: Vec<f64> = b.iter().map(&f).collect();
    let (gm, bm) = (median(&mut gv), median(&mut bv));
    println!(
        "  {what:42} gjc {gm:8.3} (p90 {:8.3})   baseline {bm:8.3} (p90 {:8.3})   ratio {:.2}x",
        percentile(&mut gv, 0.9),
        percentile(&mut bv, 0.9),
        gm / bm
    );
}
