//! Inbound memory benchmark: idle RSS, peak RSS (VmHWM) while one 64 MiB line is read and
//! answered, RSS after it, and peak RSS while a host writes 10^6 `get_state` commands without
//! reading stdout (then reads everything). Each figure is the median of a few runs; the idle RSS
//! comes from the same processes.
//!
//! Run: `cargo bench --bench inbound [-- runs [commands]]`
//! (`GJC_BIN=/path/to/gjc` measures another build.)

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

const LINE: usize = 64 * 1024 * 1024 - 1;

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    _home: tempfile_dir::Dir,
}

/// A private scratch HOME, removed afterwards.
mod tempfile_dir {
    pub struct Dir(pub std::path::PathBuf);

    impl Dir {
        pub fn new(tag: &str) -> Dir {
            let path = std::env::temp_dir()
                .join(format!("gjc-bench-inbound-{}-{tag}", std::process::id()));
            std::fs::create_dir_all(path.join("project")).unwrap();
            Dir(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Proc {
    fn spawn(tag: &str) -> Proc {
        let home = tempfile_dir::Dir::new(tag);
        let mut child = Command::new(gjc_bin())
            .args(["--mode", "rpc", "--no-session"])
            .env_clear()
            .env("HOME", &home.0)
            .env("GJC_CODING_AGENT_DIR", home.0.join("agent"))
            .current_dir(home.0.join("project"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn gjc");
        let mut p = Proc {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            _home: home,
        };
        assert!(p.line().contains("ready"));
        p.write(b"{\"id\":\"warm\",\"type\":\"get_state\"}\n");
        assert!(p.line().contains("warm"));
        std::thread::sleep(Duration::from_millis(50));
        p
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line
    }

    fn write(&mut self, bytes: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(bytes).unwrap();
    }

    fn kib(&self, field: &str) -> f64 {
        status_kib(self.child.id(), field).unwrap_or(0) as f64
    }

    fn finish(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

struct LongLine {
    idle: f64,
    peak: f64,
    after: f64,
}

fn long_line() -> LongLine {
    let mut p = Proc::spawn("line");
    let idle = p.kib("VmRSS:");
    let mut line = b"{\"id\":\"big\",\"type\":\"get_state\",\"pad\":\"".to_vec();
    line.resize(LINE - 2, b'x');
    line.extend_from_slice(b"\"}\n");
    p.write(&line);
    drop(line);
    assert!(p.line().contains("\"big\""));
    p.write(b"{\"id\":\"next\",\"type\":\"get_state\"}\n");
    assert!(p.line().contains("next"));
    let sample = LongLine {
        idle,
        peak: p.kib("VmHWM:"),
        after: p.kib("VmRSS:"),
    };
    p.finish();
    sample
}

struct Flood {
    idle: f64,
    held: f64,
    peak: f64,
    read_before_stall: usize,
    seconds: f64,
}

fn flood(n: usize) -> Flood {
    let mut p = Proc::spawn("flood");
    let idle = p.kib("VmRSS:");
    let started = Instant::now();
    let mut stdin = p.stdin.take().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let count = written.clone();
    let writer = std::thread::spawn(move || {
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, &mut stdin);
        for i in 0..n {
            writeln!(out, "{{\"id\":\"g{i}\",\"type\":\"get_state\"}}").unwrap();
            count.fetch_add(1, Ordering::Relaxed);
        }
        out.flush().unwrap();
        drop(out);
        // Kept open: gjc would exit after the last answer, taking its /proc entry with it.
        stdin
    });
    // The host does not read until its writes stop making progress (or all are written).
    let mut last = usize::MAX;
    let mut still_since = Instant::now();
    loop {
        let now = written.load(Ordering::Relaxed);
        if now == n {
            break;
        }
        if now != last {
            last = now;
            still_since = Instant::now();
        } else if still_since.elapsed() > Duration::from_millis(500) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let read_before_stall = written.load(Ordering::Relaxed);
    let held = p.kib("VmRSS:");
    for _ in 0..n {
        assert!(p.line().contains("\"response\""));
    }
    p.stdin = Some(writer.join().unwrap());
    let sample = Flood {
        idle,
        held,
        peak: p.kib("VmHWM:"),
        read_before_stall,
        seconds: started.elapsed().as_secs_f64(),
    };
    p.finish();
    sample
}

fn mb(kib: f64) -> String {
    format!("{:.1} MB", kib * 1024.0 / 1e6)
}

fn main() {
    let mut args = args();
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    println!("gjc: {}", gjc_bin().display());
    let (mut idle, mut peak, mut after) = (vec![], vec![], vec![]);
    let (mut fidle, mut held, mut fpeak, mut stall, mut secs) =
        (vec![], vec![], vec![], vec![], vec![]);
    for run in 0..runs {
        let l = long_line();
        let f = flood(n);
        eprintln!(
            "run {run}: line idle {} peak {} after {}; flood idle {} held {} peak {} (lines written before the host read: {}, {:.1} s)",
            mb(l.idle), mb(l.peak), mb(l.after), mb(f.idle), mb(f.held), mb(f.peak),
            f.read_before_stall, f.seconds
        );
        idle.push(l.idle);
        peak.push(l.peak);
        after.push(l.after);
        fidle.push(f.idle);
        held.push(f.held);
        fpeak.push(f.peak);
        stall.push(f.read_before_stall as f64);
        secs.push(f.seconds);
    }
    println!("medians of {runs} runs");
    println!(
        "one {LINE}-byte line:   idle {}  peak {}  after {}",
        mb(median(&mut idle)),
        mb(median(&mut peak)),
        mb(median(&mut after))
    );
    println!(
        "{n} unread commands:  idle {}  while unread {}  peak {}  (written before the host read: {:.0}; all answered in {:.1} s)",
        mb(median(&mut fidle)),
        mb(median(&mut held)),
        mb(median(&mut fpeak)),
        median(&mut stall),
        median(&mut secs)
    );
}
