//! A host that stops reading stdout mid-stream, each figure beside its baseline from the same run:
//! - abort latency: `abort` written → the model stream shut down (the `gjc-provider` thread gone,
//!   polled in /proc every 100 µs), with the host not reading, beside the same with the host
//!   reading;
//! - SIGTERM and stdin EOF → process exit, with the host not reading;
//! - peak RSS while the host reads nothing, beside idle RSS.
//!
//! `GJC_BASELINE_BIN` runs the same against another gjc binary (e.g. a previous release); its
//! waits are capped at 3 s.
//!
//! Run: `cargo bench --bench backpressure`

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const CAP: Duration = Duration::from_secs(3);
const ROUNDS: usize = 7;

struct Host {
    child: Child,
    _home: tempfile::TempDir,
}

/// gjc streaming a long scripted reply that then stalls; `reading` drains stdout on a thread.
fn start(bin: &Path, reading: bool) -> Host {
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("script.json");
    let text = "ab".repeat(100_000);
    let turn = serde_json::json!({"turns": [{"content": [{"type": "text", "text": text}],
        "chunkChars": 2, "stall": true}]});
    std::fs::write(&script, turn.to_string()).unwrap();
    let mut child = Command::new(bin)
        .args([
            "--mode",
            "rpc",
            "--no-session",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(&script)
        .env("GJC_CODING_AGENT_DIR", home.path())
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    if reading {
        std::thread::spawn(move || {
            let mut sink = [0u8; 1 << 16];
            while matches!(out.read(&mut sink), Ok(n) if n > 0) {}
        });
    } else {
        // Kept open, never read.
        std::mem::forget(out);
    }
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, r#"{{"id":"p","type":"prompt","message":"go"}}"#).unwrap();
    stdin.flush().unwrap();
    let pid = child.id();
    let started = Instant::now();
    while !threads(pid).iter().any(|t| t == "gjc-provider") && started.elapsed() < CAP {
        std::thread::sleep(Duration::from_micros(100));
    }
    // Long enough for stdout to fill when nobody reads it.
    std::thread::sleep(Duration::from_millis(300));
    Host { child, _home: home }
}

fn abort_latency(bin: &Path, reading: bool) -> f64 {
    let mut host = start(bin, reading);
    let pid = host.child.id();
    let stdin = host.child.stdin.as_mut().unwrap();
    let sent = Instant::now();
    writeln!(stdin, r#"{{"id":"a","type":"abort"}}"#).unwrap();
    stdin.flush().unwrap();
    while threads(pid).iter().any(|t| t == "gjc-provider") && sent.elapsed() < CAP {
        std::thread::sleep(Duration::from_micros(100));
    }
    let took = ms(sent.elapsed());
    let _ = host.child.kill();
    let _ = host.child.wait();
    took
}

fn exit_latency(bin: &Path, sigterm: bool) -> (f64, f64) {
    let mut host = start(bin, false);
    let pid = host.child.id();
    let peak = status_kib(pid, "VmHWM:").unwrap_or(0) as f64 / 1024.0;
    let sent = Instant::now();
    if sigterm {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    } else {
        drop(host.child.stdin.take());
    }
    while sent.elapsed() < CAP {
        if let Ok(Some(_)) = host.child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let took = ms(sent.elapsed());
    let _ = host.child.kill();
    let _ = host.child.wait();
    (took, peak)
}

fn idle_rss(bin: &Path) -> f64 {
    let mut child = Command::new(bin)
        .args(["--mode", "rpc", "--no-session"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let rss = status_kib(child.id(), "VmRSS:").unwrap_or(0) as f64 / 1024.0;
    let _ = child.kill();
    let _ = child.wait();
    rss
}

fn report(name: &str, bin: &Path) {
    let mut blocked: Vec<f64> = (0..ROUNDS).map(|_| abort_latency(bin, false)).collect();
    let mut read: Vec<f64> = (0..ROUNDS).map(|_| abort_latency(bin, true)).collect();
    let term: Vec<(f64, f64)> = (0..ROUNDS).map(|_| exit_latency(bin, true)).collect();
    let eof: Vec<(f64, f64)> = (0..ROUNDS).map(|_| exit_latency(bin, false)).collect();
    let mut term_ms: Vec<f64> = term.iter().map(|t| t.0).collect();
    let mut eof_ms: Vec<f64> = eof.iter().map(|t| t.0).collect();
    let mut peaks: Vec<f64> = term.iter().chain(&eof).map(|t| t.1).collect();
    println!("{name} ({}):", bin.display());
    println!(
        "  abort -> stream shut down: host not reading {:.3} ms (p90 {:.3}), host reading {:.3} ms (medians of {ROUNDS}; capped at {} s)",
        median(&mut blocked),
        percentile(&mut blocked, 0.9),
        median(&mut read),
        CAP.as_secs()
    );
    println!(
        "  host not reading: SIGTERM -> exit {:.1} ms, stdin EOF -> exit {:.1} ms",
        median(&mut term_ms),
        median(&mut eof_ms)
    );
    println!(
        "  peak RSS while not reading {:.1} MB, idle RSS {:.1} MB",
        median(&mut peaks),
        idle_rss(bin)
    );
}

fn main() {
    report("gjc", &gjc_bin());
    if let Some(base) = std::env::var_os("GJC_BASELINE_BIN") {
        report("baseline", Path::new(&base));
    }
}
