//! Memory when a provider sends one endless SSE line: peak RSS (VmHWM) of the gjc child after the
//! loopback fake provider streams a 300 MiB `data:` line with no newline, beside the same
//! process's idle peak measured just before the prompt. Also the time from prompt to `agent_end`
//! and the error the run ended with. Medians over the runs.
//!
//! Run: `cargo bench --bench sse_line [-- runs]`

mod common;
#[path = "../tests/support/fake_provider.rs"]
#[allow(dead_code)]
mod fake_provider;

use std::time::{Duration, Instant};

use common::*;
use fake_provider::{openai_text, Chunk, FakeProvider, Reply};
use gjc::client::RpcClient;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(300);
const LINE: usize = 300 << 20;

struct Sample {
    idle_hwm_kib: u64,
    peak_hwm_kib: u64,
    to_end: Duration,
    error: String,
}

fn measure() -> Sample {
    let fake = FakeProvider::start();
    let home = tempfile::tempdir().unwrap();
    let model = json!([{"id": "m", "contextWindow": 1000000, "maxTokens": 4096}]);
    let models = json!({"providers": {"fake": {"baseUrl": format!("{}/v1", fake.base_url),
        "api": "openai-completions", "apiKey": "k", "models": model}}});
    std::fs::write(home.path().join("models.json"), models.to_string()).unwrap();
    let mut c = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", home.path())
        .env("GJC_RETRY_BASE_MS", "1")
        .current_dir(home.path())
        .args(["--provider", "fake", "--model", "m"])
        .spawn()
        .unwrap();
    c.recv(WAIT).unwrap();
    c.request(json!({"type": "get_state"}), WAIT).unwrap();
    let pid = c.pid();
    let idle_hwm_kib = status_kib(pid, "VmHWM").unwrap();
    fake.push(Reply::sse_chunks(vec![
        Chunk::Bytes(b"data: ".to_vec()),
        Chunk::Repeat {
            byte: b'x',
            len: LINE,
        },
        Chunk::Bytes(format!("\n\n{}", openai_text(&["after"])).into_bytes()),
    ]));
    let started = Instant::now();
    let r = c
        .request(json!({"type": "prompt", "message": "go"}), WAIT)
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    let frames = c
        .collect_until(
            |f| f["type"] == "event" && f["payload"]["event_type"] == "agent_end",
            WAIT,
        )
        .unwrap();
    let to_end = started.elapsed();
    let peak_hwm_kib = status_kib(pid, "VmHWM").unwrap();
    let error = frames
        .iter()
        .rev()
        .find(|f| f["payload"]["event_type"] == "message_end")
        .and_then(|f| f["payload"]["event"]["message"]["errorMessage"].as_str())
        .unwrap_or("(none)")
        .to_string();
    c.close_stdin();
    c.wait_exit(Duration::from_secs(10));
    Sample {
        idle_hwm_kib,
        peak_hwm_kib,
        to_end,
        error,
    }
}

fn mb(kib: f64) -> f64 {
    kib * 1024.0 / 1e6
}

fn main() {
    let runs: usize = args().next().and_then(|a| a.parse().ok()).unwrap_or(5);
    println!("gjc: {}", gjc_bin().display());
    let samples: Vec<Sample> = (0..runs).map(|_| measure()).collect();
    let column = |f: &dyn Fn(&Sample) -> f64| -> f64 {
        let mut v: Vec<f64> = samples.iter().map(f).collect();
        median(&mut v)
    };
    let idle = column(&|s| s.idle_hwm_kib as f64);
    let peak = column(&|s| s.peak_hwm_kib as f64);
    let grown = column(&|s| (s.peak_hwm_kib - s.idle_hwm_kib) as f64);
    let to_end = column(&|s| ms(s.to_end));
    println!("runs: {runs}; line: {} MiB without a newline", LINE >> 20);
    println!(
        "idle peak RSS (VmHWM before the prompt): {:.1} MB",
        mb(idle)
    );
    println!(
        "peak RSS after the 300 MiB line:          {:.1} MB",
        mb(peak)
    );
    println!(
        "growth over idle:                         {:.1} MB",
        mb(grown)
    );
    println!("prompt → agent_end:                       {to_end:.0} ms");
    let errors: Vec<&str> = samples.iter().map(|s| s.error.as_str()).collect();
    let first: &Value = &json!(errors[0]);
    println!("run ended with: {first}");
    assert!(
        errors.iter().all(|e| *e == errors[0]),
        "every run ends the same way: {errors:?}"
    );
}
