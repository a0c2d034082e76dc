//! `checkpoint_for_handoff`: refused while anything runs; when idle, the 13-field receipt of a
//! synced file, after which the process is stopped the way the published client stops it and
//! another gjc continues the session from that file with nothing lost.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::receipt::{marker_digest, sha256_hex};
use crate::support::{gjc, Gjc, TIMEOUT};

fn answer(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn authority() -> Value {
    json!({"incarnationDigest": "0a".repeat(32), "epochRevision": 4, "leaseId": 9_007_199_254_740_991u64, "deploymentGeneration": 2})
}

fn checkpoint(g: &mut Gjc, lane: &str) -> Value {
    g.request(json!({"type": "checkpoint_for_handoff", "authority": authority(), "lane": lane}))
}

fn refused_with(r: &Value, prefix: &str) {
    assert_eq!(r["success"], false, "{r}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.starts_with(prefix), "want {prefix:?}: {r}");
}

/// Waits (bounded) until `path` exists: the user `bash` below creates it once it runs.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + TIMEOUT;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn refused_while_a_run_streams_or_a_bash_runs() {
    let mut g = gjc()
        .script(json!({"turns": [
            json!({"content": [{"type": "text", "text": "never ends"}], "stall": true}),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("message_update");
    refused_with(
        &checkpoint(&mut g, "main"),
        "busy: Session is not quiescent for handoff checkpoint: a run is in progress",
    );
    g.ok(json!({"type": "abort"}));
    g.run_events();

    let started = g.home.path().join("started");
    let command = format!("touch '{}' && sleep 20", started.display());
    let id = "bash-1";
    g.client
        .send(&json!({"type": "bash", "id": id, "command": command}))
        .unwrap();
    wait_for(&started);
    refused_with(
        &checkpoint(&mut g, "main"),
        "busy: Session is not quiescent for handoff checkpoint: a bash command is running",
    );
    g.ok(json!({"type": "abort_bash"}));
    let r = g
        .client
        .collect_until(|f| f["type"] == "response" && f["id"] == id, TIMEOUT)
        .expect("the bash response");
    assert!(r.last().is_some());
    // Idle again: the same request is answered with a receipt.
    assert_eq!(checkpoint(&mut g, "main")["success"], true);
}

#[test]
fn bad_authority_and_lane_are_refused_and_the_process_stays_up() {
    let mut g = gjc().script(json!({"turns": [answer("a")]})).spawn();
    let mut extra = authority();
    extra["extra"] = json!(1);
    let mut zero = authority();
    zero["leaseId"] = json!(0);
    let mut upper = authority();
    upper["incarnationDigest"] = json!("0A".repeat(32));
    let mut float = authority();
    float["epochRevision"] = json!(1.5);
    for (authority, lane) in [
        (extra, "main"),
        (zero, "main"),
        (upper, "main"),
        (float, "main"),
        (authority(), "other"),
    ] {
        let r = g.request(
            json!({"type": "checkpoint_for_handoff", "authority": authority, "lane": lane}),
        );
        assert_eq!(r["success"], false, "{authority} {lane}: {r}");
        let error = r["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("authority") || error.contains("lane"),
            "the error names the field: {r}"
        );
    }
    // The same process takes a well-formed request.
    assert_eq!(checkpoint(&mut g, "main")["success"], true);
}

#[test]
fn a_session_without_a_file_has_no_checkpoint() {
    let mut g = gjc()
        .script(json!({"turns": [answer("a")]}))
        .args(&["--no-session"])
        .spawn();
    refused_with(
        &checkpoint(&mut g, "main"),
        "checkpoint_unavailable: A persistent session and concrete model profile are required",
    );
}

#[test]
fn receipt_then_another_process_continues_with_nothing_lost() {
    let mut g = gjc()
        .script(json!({"turns": [answer("one"), answer("two")]}))
        .spawn();
    for prompt in ["first", "second"] {
        g.ok(json!({"type": "prompt", "message": prompt}));
        g.run_events();
    }
    let state = g.ok(json!({"type": "get_state"}));
    let before = g.messages();
    let r = checkpoint(&mut g, "self");
    assert_eq!(r["success"], true, "{r}");
    let d = r["data"].as_object().unwrap().clone();
    // Exactly the 13 fields and every rule of the published client (the frame checker applies
    // them too), plus what it compares with its request.
    crate::support::receipt::check(&d).unwrap();
    assert_eq!(d.len(), 13);
    assert_eq!(d["authority"], authority());
    assert_eq!(d["lane"], "self");
    assert_eq!(d["sessionId"], state["sessionId"]);
    assert_eq!(d["sessionFile"], state["sessionFile"]);
    assert_eq!(d["thinking"], state["thinkingLevel"]);
    assert_eq!(
        (&d["provider"], &d["model"], &d["modelProfile"]),
        (&json!("scripted"), &json!("scripted"), &json!("scripted"))
    );
    let path = PathBuf::from(d["sessionFile"].as_str().unwrap());
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(d["transcriptDigest"], sha256_hex(&bytes));
    assert_eq!(d["completedMarkerDigest"], marker_digest(&d));

    // The published client stops the server at once: stdin closed, SIGTERM, then the exit.
    g.client.close_stdin();
    unsafe { libc::kill(g.client.pid() as i32, libc::SIGTERM) };
    let status = g.client.wait_exit(TIMEOUT).expect("gjc exits");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "nothing is written after the receipt"
    );

    let mut h = gjc().script(json!({"turns": [answer("three")]})).spawn();
    h.ok(json!({"type": "switch_session", "sessionPath": path}));
    assert_eq!(h.messages(), before, "every message of the first process");
    let s = h.ok(json!({"type": "get_state"}));
    assert_eq!(s["sessionId"], state["sessionId"]);
    h.ok(json!({"type": "prompt", "message": "third"}));
    h.run_events();
    let texts: Vec<Value> = h
        .messages()
        .iter()
        .map(|m| m["content"][0]["text"].clone())
        .collect();
    assert_eq!(
        texts,
        ["first", "one", "second", "two", "third", "three"].map(|t| json!(t))
    );
}

/// A steering message sent before the first reply waits in memory for the next prompt: handing
/// the session over then would lose it.
#[test]
fn queued_messages_block_the_checkpoint() {
    let mut g = gjc().script(json!({"turns": [answer("a")]})).spawn();
    g.ok(json!({"type": "steer", "message": "later"}));
    refused_with(
        &checkpoint(&mut g, "main"),
        "busy: Session is not quiescent for handoff checkpoint: messages are queued",
    );
}
