//! The baseline for bench_startup: the least a JSON-lines process can do. It writes one JSON line
//! at start, reads one line and answers with one JSON line, then waits for EOF.

use std::io::{BufRead, Write};

fn main() {
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
