//! Startup benchmark: spawn → `ready`, spawn → first `get_state` response, and RSS when idle after
//! ready, for one or more gjc binaries and for a baseline process (`common/baseline_echo.rs`, this
//! program started again as the least a JSON-lines process can do) measured in the same run,
//! interleaved.
//!
//! Run: `cargo bench --bench startup [-- runs [gjc...]]`
//!
//! Without binaries it measures the gjc that cargo built with it (`target/release/gjc`, or
//! `GJC_BIN`). To compare the plain build with the release script's: `.cargo/release.sh` then
//! `cargo bench --bench startup -- 30 target/release/gjc target/x86_64-unknown-linux-gnu/release/gjc target/x86_64-unknown-linux-musl/release/gjc`.

#[path = "common/baseline_echo.rs"]
mod baseline_echo;
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Sample {
    ready: f64,
    first_response: f64,
    rss_kib: u64,
}

fn measure(program: &Path, args: &[&str], agent_dir: &Path) -> Sample {
    let mut command = Command::new(program);
    if args.is_empty() {
        // No arguments: the baseline, which is this program.
        command.env(baseline_echo::MARKER, "1");
    }
    let started = Instant::now();
    let mut child = command
        .args(args)
        .env("GJC_CODING_AGENT_DIR", agent_dir)
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
    if std::env::var_os(baseline_echo::MARKER).is_some() {
        return baseline_echo::main();
    }
    let mut argv = args();
    let runs: usize = argv.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    let mut programs: Vec<PathBuf> = argv.map(PathBuf::from).collect();
    if programs.is_empty() {
        programs.push(gjc_bin());
    }
    for p in &programs {
        assert!(p.is_file(), "no gjc binary at {}", p.display());
    }
    let baseline = std::env::current_exe().expect("this benchmark's path");
    // Sessions and the registry go to a folder removed at exit, not to ~/.gjc.
    let agent_dir = tempfile::Builder::new()
        .prefix("gjc-bench-agent-")
        .tempdir()
        .expect("temporary agent dir");
    let agent_dir = agent_dir.path();
    let gjc_args = ["--mode", "rpc"];
    let mut samples: Vec<Vec<Sample>> = programs.iter().map(|_| Vec::new()).collect();
    let mut b = Vec::new();
    for p in &programs {
        measure(p, &gjc_args, agent_dir);
    }
    for _ in 0..runs {
        for (p, s) in programs.iter().zip(&mut samples) {
            s.push(measure(p, &gjc_args, agent_dir));
        }
        b.push(measure(&baseline, &[], agent_dir));
    }
    for (p, g) in programs.iter().zip(&samples) {
        println!(
            "startup of {}, {runs} runs each, interleaved (median / p90):",
            p.display()
        );
        report("spawn -> ready (ms)", g, &b, |s| s.ready);
        report("spawn -> first get_state response (ms)", g, &b, |s| {
            s.first_response
        });
        report("idle RSS after ready (MB)", g, &b, |s| {
            s.rss_kib as f64 / 1024.0
        });
    }
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
