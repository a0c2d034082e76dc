//! The baseline for the startup benchmark: the least a JSON-lines process can do. It writes one
//! JSON line at start, reads one line and answers with one JSON line, then waits for EOF. The
//! benchmark runs it by starting itself again with [`MARKER`] set, so `cargo bench` builds it.

use std::io::{BufRead, Write};

/// Set in the environment of the benchmark's own process when it is to act as the baseline.
pub const MARKER: &str = "GJC_BENCH_BASELINE_ECHO";

pub fn main() {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(out, r#"{{"type":"ready"}}"#);
    let _ = out.flush();
    let mut lines = std::io::stdin().lock().lines();
    if let Some(Ok(_)) = lines.next() {
        let _ = writeln!(
            out,
            r#"{{"type":"response","command":"get_state","success":true}}"#
        );
        let _ = out.flush();
    }
    for _ in lines {}
}
