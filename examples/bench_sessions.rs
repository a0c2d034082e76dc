//! Session benchmarks: generated session files of 2,000 and 20,000 messages; `switch_session` and
//! `get_messages` latency and RSS after switching (beside the RSS of an idle gjc in the same run),
//! and `export_html` time for the large one.
//!
//! Run: `cargo build --release --bins --examples && target/x86_64-unknown-linux-gnu/release/examples/bench_sessions`

mod common;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use gjc::client::RpcClient;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);

fn generate(path: &Path, messages: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "{}", json!({"type": "session", "version": 3, "id": "bench", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"})).unwrap();
    let mut parent: Option<String> = None;
    for i in 0..messages {
        let id = format!("{i:08x}");
        let text = format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(8));
        let message = if i % 2 == 0 {
            json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": text}], "api": "scripted", "provider": "scripted", "model": "scripted",
                "usage": {"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 20, "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}},
                "stopReason": "stop", "timestamp": 0})
        };
        writeln!(f, "{}", json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", "message": message})).unwrap();
        parent = Some(id);
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut idle = Vec::new();
    for size in [2_000usize, 20_000] {
        let path = dir.path().join(format!("s{size}.jsonl"));
        generate(&path, size);
        let bytes = std::fs::metadata(&path).unwrap().len();
        let (mut switch, mut get, mut rss) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..7 {
            let mut c = RpcClient::builder(gjc_bin())
                .env("GJC_CODING_AGENT_DIR", dir.path())
                .args(["--session-dir"])
                .arg(dir.path().join("new"))
                .spawn()
                .unwrap();
            c.recv(WAIT).unwrap();
            c.request(json!({"type": "get_state"}), WAIT).unwrap();
            idle.push(status_kib(c.pid(), "VmRSS:").unwrap_or(0) as f64 / 1024.0);
            let t = Instant::now();
            let r = c
                .request(json!({"type": "switch_session", "sessionPath": path}), WAIT)
                .unwrap();
            switch.push(ms(t.elapsed()));
            assert_eq!(r["success"], true, "{r}");
            let t = Instant::now();
            let r = c.request(json!({"type": "get_messages"}), WAIT).unwrap();
            get.push(ms(t.elapsed()));
            assert_eq!(r["data"]["messages"].as_array().unwrap().len(), size);
            rss.push(status_kib(c.pid(), "VmRSS:").unwrap_or(0) as f64 / 1024.0);
            if size == 20_000 && switch.len() == 1 {
                let t = Instant::now();
                let r = c
                    .request(
                        json!({"type": "export_html", "outputPath": dir.path().join("big.html")}),
                        WAIT,
                    )
                    .unwrap();
                let html = std::fs::metadata(r["data"]["path"].as_str().unwrap())
                    .unwrap()
                    .len();
                println!(
                    "export_html of {size} messages: {:.1} ms ({:.1} MB of HTML)",
                    ms(t.elapsed()),
                    html as f64 / 1e6
                );
            }
        }
        println!(
            "{size} messages ({:.1} MB file), median of 7: switch_session {:.1} ms, get_messages {:.1} ms, switch + get {:.1} ms, RSS after {:.1} MB",
            bytes as f64 / 1e6,
            median(&mut switch.clone()),
            median(&mut get.clone()),
            median(&mut switch) + median(&mut get),
            median(&mut rss)
        );
    }
    println!(
        "idle gjc RSS in the same run (baseline): {:.1} MB",
        median(&mut idle)
    );
}
