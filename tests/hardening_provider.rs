//! Provider hardening: SSE lines and events have a size limit and a stream over it fails with a
//! clear error while memory stays bounded; `RUST_LOG=trace` never prints keys or configured header
//! values; `retry-after` (seconds, HTTP date, `retry-after-ms`) is honoured up to a cap and a longer
//! wait fails without retrying.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::unbounded;
use serde_json::{json, Value};

use crate::faults::{count, openai};
use crate::support::fake_provider::{anthropic_text, openai_text};
use crate::support::procfs::status_kib;
use crate::support::{Chunk, FakeProvider, Reply, TIMEOUT};

fn last_message_end(events: &[Value]) -> &Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .expect("a message_end")
}

fn giant_line(len: usize) -> Reply {
    Reply::sse_chunks(vec![
        Chunk::Bytes(b"data: ".to_vec()),
        Chunk::Repeat { byte: b'x', len },
        Chunk::Bytes(format!("\n\n{}", openai_text(&["after"])).into_bytes()),
    ])
}

#[test]
fn a_giant_sse_line_fails_the_stream_naming_the_limit_with_memory_bounded() {
    let fake = FakeProvider::start();
    fake.push(giant_line(128 << 20));
    let mut g = openai(&fake).spawn();
    let pid = g.client.pid();
    // Peak before the stream: start-up plus the first request's buffers.
    g.ok(json!({"type": "get_state"}));
    let idle_kib = status_kib(pid, "VmHWM").expect("VmHWM");
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let end = last_message_end(&events);
    assert_eq!(end["message"]["stopReason"], "error", "{end}");
    let error = end["message"]["errorMessage"].as_str().unwrap();
    assert!(
        error.contains("SSE line") && error.contains("16 MiB"),
        "the error names the limit: {error}"
    );
    assert_eq!(
        count(&events, "auto_retry_start"),
        0,
        "an oversized line is not retried"
    );
    assert_eq!(count(&events, "agent_end"), 1);
    let grown_mib = (status_kib(pid, "VmHWM").expect("VmHWM") - idle_kib) / 1024;
    // The 16 MiB line buffer (up to twice that while it doubles) and one copy of it: far less than
    // the 128 MiB the server sent.
    assert!(grown_mib < 64, "peak RSS grew by {grown_mib} MiB");
    // The process is still serving.
    assert_eq!(g.ok(json!({"type": "get_state"}))["isStreaming"], false);
}

#[test]
fn an_sse_event_over_the_event_limit_fails_naming_it() {
    let fake = FakeProvider::start();
    let line = format!("data: {}\n", "y".repeat(900));
    fake.push(Reply::sse(line.repeat(10)));
    let mut g = openai(&fake)
        .env("GJC_SSE_MAX_LINE_BYTES", "1024")
        .env("GJC_SSE_MAX_EVENT_BYTES", "4096")
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let error = last_message_end(&events)["message"]["errorMessage"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.contains("SSE event") && error.contains("4096 bytes"),
        "{error}"
    );
    assert_eq!(count(&events, "auto_retry_start"), 0);
}

// ---- secrets in logs ----

const KEY: &str = "gjc-secret-KEY-8f1d2c7a9e";
const HEADER_VALUE: &str = "hdr-secret-VALUE-4b6e0d13";

/// Runs one prompt through gjc with `RUST_LOG=trace` and returns everything it wrote to stderr.
fn traced_run(fake: &FakeProvider, provider: &str) -> String {
    let agent = tempfile::tempdir().unwrap();
    let model = json!([{"id": "m", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096}]);
    let base = &fake.base_url;
    let entry = |api: &str, path: &str| {
        json!({"baseUrl": format!("{base}/{path}"), "api": api, "apiKey": KEY,
            "headers": {"X-Team-Token": HEADER_VALUE}, "models": model})
    };
    let models = json!({"providers": {
        "t-anthropic": entry("anthropic-messages", "v1"),
        "t-openai": entry("openai-completions", "v1"),
        "t-google": entry("google-generative-ai", "v1beta"),
    }});
    std::fs::write(agent.path().join("models.json"), models.to_string()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gjc"))
        .args(["--mode", "rpc", "--provider", provider, "--model", "m"])
        .env("HOME", agent.path())
        .env("GJC_CODING_AGENT_DIR", agent.path())
        .env("RUST_LOG", "trace")
        .current_dir(agent.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, frames) = unbounded::<Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str(&line).unwrap_or(Value::Null));
        }
    });
    let mut stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"hi\"}\n")
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = frames.recv_timeout(left).expect("agent_end in time");
        if frame["type"] == "event" && frame["payload"]["event_type"] == "agent_end" {
            break;
        }
    }
    drop(stdin);
    let deadline = Instant::now() + TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "gjc did not exit after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    errors.join().unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `log` shows `secret` or a recognisable piece of it, plainly or hex-encoded (a hex dump
/// splits bytes into rows, so every 8-byte window is looked for).
fn leaks(log: &str, secret: &str) -> Option<String> {
    let squeezed: String = log.chars().filter(|c| !c.is_whitespace()).collect();
    let squeezed = squeezed.to_ascii_lowercase();
    secret.as_bytes().windows(8).find_map(|w| {
        let plain = std::str::from_utf8(w).unwrap();
        if log.contains(plain) {
            Some(format!("{plain:?}"))
        } else if squeezed.contains(&hex(w)) {
            Some(format!("hex of {plain:?}"))
        } else {
            None
        }
    })
}

#[test]
fn trace_logging_shows_neither_keys_nor_custom_header_values() {
    let gemini = std::fs::read(format!(
        "{}/tests/fixtures/providers/gemini-thinking-text.sse",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for (provider, body) in [
        ("t-anthropic", anthropic_text(None, "hi").into_bytes()),
        ("t-openai", openai_text(&["hi"]).into_bytes()),
        ("t-google", gemini.clone()),
    ] {
        let fake = FakeProvider::start();
        fake.push(Reply::sse(body));
        let log = traced_run(&fake, provider);
        let request = fake.request(TIMEOUT);
        // The secrets really were sent, so their absence from the log means something.
        assert_eq!(request.header("x-team-token"), Some(HEADER_VALUE));
        assert!(
            request.headers.iter().any(|(_, v)| v.contains(KEY)),
            "{provider}: the key was sent"
        );
        assert!(
            log.contains("TRACE") || log.contains("DEBUG"),
            "{provider}: trace logging is on"
        );
        for secret in [KEY, HEADER_VALUE] {
            if let Some(piece) = leaks(&log, secret) {
                panic!("{provider}: stderr shows {piece} of a secret");
            }
        }
        assert!(
            log.contains("x-team-token: <redacted>"),
            "{provider}: gjc logs the request with the custom header redacted:\n{log}"
        );
    }
}

// ---- retry-after ----

fn rate_limited() -> Reply {
    Reply::status(
        429,
        r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#,
    )
}

/// Runs one prompt whose first request gets `reply` and second a normal answer.
fn after(reply: Reply, envs: &[(&str, &str)]) -> Vec<Value> {
    let fake = FakeProvider::start();
    fake.push(reply);
    fake.push(Reply::sse(openai_text(&["ok"])));
    let mut builder = openai(&fake).env("GJC_RETRY_BASE_MS", "1");
    for (k, v) in envs {
        builder = builder.env(k, v);
    }
    let mut g = builder.spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.run_events()
}

fn assert_not_retried(events: &[Value], cap: &str) {
    assert_eq!(count(events, "auto_retry_start"), 0, "no retry");
    let end = last_message_end(events);
    assert_eq!(end["message"]["stopReason"], "error");
    assert_eq!(end["message"]["errorStatus"], 429);
    let error = end["message"]["errorMessage"].as_str().unwrap();
    assert!(
        error.starts_with("HTTP 429: rate_limit_error: slow down"),
        "the provider's message: {error}"
    );
    assert!(error.contains(cap), "names the cap: {error}");
    assert_eq!(count(events, "agent_end"), 1);
}

#[test]
fn retry_after_above_the_cap_fails_with_the_providers_message() {
    assert_not_retried(
        &after(rate_limited().header("retry-after", "90"), &[]),
        "60 s",
    );
    assert_not_retried(
        &after(rate_limited().header("retry-after-ms", "120000"), &[]),
        "60 s",
    );
    // The cap is an environment setting.
    assert_not_retried(
        &after(
            rate_limited().header("retry-after", "1"),
            &[("GJC_RETRY_AFTER_MAX_MS", "500")],
        ),
        "0.5 s",
    );
}

/// An IMF-fixdate `secs` seconds from now.
fn http_date(from_now: u64) -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + from_now;
    let (days, rem) = (t / 86400, t % 86400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let names = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        names[month as usize - 1],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[test]
fn retry_after_as_an_http_date_is_honoured() {
    let events = after(rate_limited().header("retry-after", &http_date(2)), &[]);
    let start = events
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .expect("retried");
    let delay = start["delayMs"].as_u64().unwrap();
    // Whole seconds on the wire and a clock that moved on: between 1 and 2 s, not the 1 ms base.
    assert!((900..=2000).contains(&delay), "delay {delay} ms");
    assert_eq!(count(&events, "agent_end"), 1);
    let end = last_message_end(&events);
    assert_eq!(end["message"]["stopReason"], "stop");
    // A date an hour away is over the cap.
    assert_not_retried(
        &after(rate_limited().header("retry-after", &http_date(3600)), &[]),
        "60 s",
    );
}

#[test]
fn retry_after_within_the_cap_is_waited_for() {
    let events = after(
        rate_limited().header("retry-after", "1"),
        &[("GJC_RETRY_AFTER_MAX_MS", "1500")],
    );
    let start = events
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .expect("retried");
    assert_eq!(start["delayMs"], 1000);
    assert_eq!(last_message_end(&events)["message"]["stopReason"], "stop");
}
