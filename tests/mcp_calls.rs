//! MCP tool calls and what a server does wrong during one: progress that keeps a call alive,
//! aborts, calls that wait on no thread of their own, a server that stops reading its input,
//! crashes, hangs, garbage and a 50 MB result. Servers: the npm reference server and
//! tests/mcp/misbehaving.js (helpers in `mcp`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp::{
    abort_during_progress, add, call, everything, misbehaving, results, say, state_event, text_of,
};
use crate::support::{gjc, Gjc, TIMEOUT};

/// gjc with the reference server ready, whose model calls the minute-long operation.
fn long_call_ahead() -> Gjc {
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__everything__trigger-long-running-operation", json!({"duration": 60, "steps": 60})),
            say("never"),
        ]}))
        .spawn();
    add(&mut g, "everything", everything());
    state_event(&mut g, "everything", "ready");
    g
}

/// A call's timeout counts from its last progress: an operation three times longer than its
/// tool timeout, reporting every half second, ends well.
#[test]
fn progress_keeps_a_call_alive_past_its_timeout() {
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__everything__trigger-long-running-operation", json!({"duration": 3, "steps": 6})),
            say("done"),
        ]}))
        .spawn();
    let mut server = everything();
    server["toolTimeoutSec"] = json!(1.0);
    add(&mut g, "everything", server);
    state_event(&mut g, "everything", "ready");
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let ends = results(&events);
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    let updates = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update")
        .count();
    assert!(updates >= 4, "{updates} progress updates");
}

#[test]
fn aborting_a_long_running_call_cancels_it_and_the_server_stays_ready() {
    abort_during_progress(&mut long_call_ahead());
}

/// The names of the process's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim_end().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_call_to_a_ready_server_waits_on_no_thread_of_its_own() {
    let mut g = long_call_ahead();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.client
        .collect_until(
            |f| f["payload"]["event"]["type"] == "tool_execution_update",
            TIMEOUT,
        )
        .expect("progress");
    // The call is under way, and its progress reaches the host: yet no tool thread waits for
    // the server, the server's reader hands everything to the session.
    let names = thread_names(g.client.pid());
    assert!(
        !names.iter().any(|n| n == "gjc-tool"),
        "a thread waits for the call: {names:?}"
    );
    g.ok(json!({"type": "abort"}));
    let ends = results(&g.run_events());
    assert_eq!(ends.last().unwrap()["isError"], true);
}

#[test]
fn a_server_that_stops_reading_its_input_holds_up_neither_the_call_nor_the_session() {
    // More than a pipe holds, so writing the second call to the deaf server cannot finish.
    let pad = "p".repeat(300 * 1024);
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__deaf__deaf", json!({})),
            call("mcp__deaf__ok", json!({"pad": pad})),
            say("after"),
        ]}))
        .spawn();
    add(&mut g, "deaf", misbehaving(&[], 1.0));
    state_event(&mut g, "deaf", "ready");
    g.ok(json!({"type": "prompt", "message": "go"}));
    // Each call ends at its timeout; the session answers commands all along.
    g.client
        .collect_until(
            |f| f["payload"]["event"]["type"] == "tool_execution_start",
            TIMEOUT,
        )
        .expect("the first call starts");
    g.ok(json!({"type": "get_state"}));
    let started = Instant::now();
    let events = g.run_events();
    let ends = results(&events);
    assert_eq!(ends.len(), 2, "{:?}", crate::support::types(&events));
    for end in &ends {
        assert!(text_of(end).contains("did not answer"), "{end}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the calls took {:?}",
        started.elapsed()
    );
    g.ok(json!({"type": "get_state"}));
}

#[test]
fn a_misbehaving_server_is_contained_and_reported() {
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__bad__garbage", json!({})),
            call("mcp__bad__flood", json!({})),
            call("mcp__bad__hang", json!({})),
            call("mcp__bad__crash", json!({})),
            call("mcp__bad__ok", json!({})),
            say("after crash"),
            call("mcp__bad__ok", json!({})),
            say("restarted"),
        ]}))
        .spawn();
    add(&mut g, "dead", misbehaving(&["die-at-start"], 5.0));
    let failed = state_event(&mut g, "dead", "failed");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("missing API key"),
        "the reason carries its stderr: {failed}"
    );
    add(&mut g, "bad", misbehaving(&[], 1.0));
    state_event(&mut g, "bad", "ready");

    g.ok(json!({"type": "prompt", "message": "misbehave"}));
    let ends = results(&g.run_events());
    assert_eq!(ends.len(), 5);
    assert_eq!(text_of(&ends[0]), "after garbage");
    assert_eq!(text_of(&ends[1]), "after flood");
    assert!(text_of(&ends[2]).contains("did not answer"), "{}", ends[2]);
    assert_eq!(ends[3]["isError"], true);
    assert!(
        text_of(&ends[3]).contains("crashed on purpose"),
        "{}",
        ends[3]
    );
    // Straight after the crash the server waits out its back-off.
    assert!(
        text_of(&ends[4]).contains("restarted on a call"),
        "{}",
        ends[4]
    );
    let state = g.ok(json!({"type": "get_state"}));
    let bad = state["mcpServers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "bad")
        .unwrap()
        .clone();
    assert_eq!(bad["state"], "failed", "{state}");

    // After the back-off, the next call restarts it.
    std::thread::sleep(Duration::from_millis(1200));
    g.ok(json!({"type": "prompt", "message": "again"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "fine", "{}", ends[0]);
}

#[test]
fn a_fifty_megabyte_result_is_cut_off_while_it_is_read_and_the_session_goes_on() {
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__bad__large", json!({})),
            call("mcp__bad__big", json!({})),
            call("mcp__good__ok", json!({})),
            say("went on"),
        ]}))
        .spawn();
    add(&mut g, "bad", misbehaving(&[], 20.0));
    state_event(&mut g, "bad", "ready");
    add(&mut g, "good", misbehaving(&[], 5.0));
    state_event(&mut g, "good", "ready");
    let pid = g.client.pid();
    let peak = || crate::support::procfs::status_kib(pid, "VmHWM").unwrap() as f64 / 1024.0;
    let before = peak();
    g.ok(json!({"type": "prompt", "message": "big results"}));
    let events = g.run_events();
    let ends = results(&events);
    assert_eq!(ends.len(), 3, "{:?}", crate::support::types(&events));
    // 1 MB of text is capped like the shell tool's output.
    let large = text_of(&ends[0]);
    assert_eq!(ends[0]["isError"], false);
    assert!(large.len() < 51 * 1024, "{} bytes kept", large.len());
    assert!(
        large.ends_with("[output truncated to 50 KB]"),
        "{large:.80}"
    );
    // 50 MB in one message: the connection ends at the 16 MB cap, with the reason.
    assert_eq!(ends[1]["isError"], true);
    assert!(text_of(&ends[1]).contains("over 16 MB"), "{}", ends[1]);
    let grew = peak() - before;
    // The cap stops the read: holding the whole line alone would take 50 MB.
    assert!(grew < 40.0, "gjc's peak memory grew by {grew:.1} MB");
    // The other server and the session go on.
    assert_eq!(text_of(&ends[2]), "fine", "{}", ends[2]);
    let state = g.ok(json!({"type": "get_state"}));
    let states: Vec<&Value> = state["mcpServers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["state"])
        .collect();
    assert_eq!(states, [&json!("failed"), &json!("ready")], "{state}");
}
