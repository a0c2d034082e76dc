//! MCP servers as tools, against real servers over stdio: the reference "everything" server from
//! npm (installed in tests/mcp with `npm ci` by the first test that needs it; a failed install
//! fails) and a misbehaving server of our own (tests/mcp/misbehaving.js).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

pub(crate) fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// The reference server's entry point. The first test that needs it installs it with `npm ci`
/// (pinned by tests/mcp/package-lock.json, from the package registry), so `cargo test` is enough
/// on a fresh machine with Node; a failed install fails the test, never skips it.
pub(crate) fn everything_entry() -> PathBuf {
    static INSTALL: Mutex<()> = Mutex::new(());
    let entry =
        fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if !entry.is_file() {
        npm_ci();
    }
    assert!(
        entry.is_file(),
        "{} is missing after `npm ci` in tests/mcp",
        entry.display()
    );
    entry
}

/// `npm ci` in tests/mcp, bounded: a registry that does not answer fails the test in time.
fn npm_ci() {
    let mut child = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(fixtures())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run npm (the MCP tests need Node 20 with npm): {e}"));
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`npm ci` in tests/mcp took over 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "`npm ci` in tests/mcp failed: {status}");
}

pub(crate) fn everything() -> Value {
    json!({"command": "node", "args": [everything_entry(), "stdio"]})
}

pub(crate) fn misbehaving(args: &[&str], tool_timeout: f64) -> Value {
    let mut argv = vec![fixtures().join("misbehaving.js").display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    json!({"command": "node", "args": argv, "toolTimeoutSec": tool_timeout})
}

pub(crate) fn call(name: &str, args: Value) -> Value {
    json!({"content": [{"type": "toolCall", "name": name, "arguments": args}]})
}

pub(crate) fn say(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// Waits for `server` to reach `state` (its `mcp_server_state` event), returning the event.
pub(crate) fn state_event(g: &mut Gjc, server: &str, state: &str) -> Value {
    let frame = g
        .client
        .collect_until(
            |f| {
                let e = &f["payload"]["event"];
                e["type"] == "mcp_server_state" && e["name"] == server && e["state"] == state
            },
            TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("{server} never became {state}: {e:?}"));
    frame.last().unwrap()["payload"]["event"].clone()
}

pub(crate) fn add(g: &mut Gjc, name: &str, config: Value) {
    let reply = g.ok(json!({"type": "add_mcp_server", "name": name, "config": config}));
    assert!(reply["servers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == name));
}

/// The run's tool results, by tool call, in order.
pub(crate) fn results(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .cloned()
        .collect()
}

/// The ends of a run's tool calls, once the first three, made to the reference server, are
/// checked: `echo` gave back `echoed`, `get-tiny-image` a PNG image block, and the long-running
/// operation's progress came as `tool_execution_update`s (its own end is the caller's to check).
pub(crate) fn reference_calls_checked(events: &[Value], calls: usize, echoed: &str) -> Vec<Value> {
    let ends = results(events);
    assert_eq!(ends.len(), calls, "{:?}", crate::support::types(events));
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert!(text_of(&ends[0]).contains(echoed), "{}", ends[0]);
    let image = &ends[1]["result"]["content"];
    assert!(
        image
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "image" && c["mimeType"] == "image/png"),
        "{image}"
    );
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update")
        .collect();
    assert!(
        !updates.is_empty(),
        "progress becomes tool_execution_update"
    );
    assert!(
        text_of(&json!({"result": updates[0]["partialResult"]})).contains("progress"),
        "{}",
        updates[0]
    );
    ends
}

/// Prompts, aborts once the long-running call reports progress, and checks that the run ended
/// within 5 s with the call failed and the server still `ready`.
pub(crate) fn abort_during_progress(g: &mut Gjc) {
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.client
        .collect_until(
            |f| f["payload"]["event"]["type"] == "tool_execution_update",
            TIMEOUT,
        )
        .expect("progress before the abort");
    let started = Instant::now();
    g.ok(json!({"type": "abort"}));
    let events = g.run_events();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the abort took {:?}",
        started.elapsed()
    );
    let ends = results(&events);
    assert_eq!(ends.last().unwrap()["isError"], true);
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["mcpServers"][0]["state"], "ready", "{state}");
}

pub(crate) fn text_of(result: &Value) -> String {
    result["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

#[test]
fn the_reference_server_lists_calls_reports_progress_and_returns_images() {
    let mut g = gjc()
        .script(json!({"turns": [
            call("mcp__everything__echo", json!({"message": "hello mcp"})),
            call("mcp__everything__get-tiny-image", json!({})),
            call("mcp__everything__trigger-long-running-operation", json!({"duration": 1, "steps": 3})),
            call("mcp__everything__echo", json!({"message": 5})),
            say("done"),
        ]}))
        .spawn();
    add(&mut g, "everything", everything());
    let ready = state_event(&mut g, "everything", "ready");
    assert!(ready["tools"].as_u64().unwrap() >= 5, "{ready}");
    let state = g.ok(json!({"type": "get_state", "include": ["tools"]}));
    assert_eq!(state["mcpServers"][0]["state"], "ready");
    let echo = state["dumpTools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .expect("the echo tool reaches the model");
    assert_eq!(
        echo["parameters"]["properties"]["message"]["type"],
        "string"
    );

    g.ok(json!({"type": "prompt", "message": "use the tools"}));
    let events = g.run_events();
    let ends = reference_calls_checked(&events, 4, "hello mcp");
    assert_eq!(ends[2]["isError"], false, "{}", ends[2]);
    // Arguments are checked against the server's schema before the call.
    assert_eq!(ends[3]["isError"], true);
    assert!(
        text_of(&ends[3]).contains("Invalid arguments"),
        "{}",
        ends[3]
    );
}

fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // A zombie has exited; its parent (gjc, gone) no longer reaps it, init does.
    !stat.is_empty() && !stat.contains(") Z ")
}

/// The living children of `pid` (gjc's servers), from the parent pid in each /proc/<pid>/stat.
fn children(pid: u32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // After the command name (which may hold spaces): the state, then the parent pid.
        let parent = stat.rfind(')').and_then(|i| {
            stat.get(i + 2..)?
                .split_whitespace()
                .nth(1)?
                .parse::<u32>()
                .ok()
        });
        if parent == Some(pid) && alive(child) {
            found.push(child);
        }
    }
    found
}

/// The processes of `pids` still alive after waiting up to `limit` for all to end; those are
/// killed then, so that a failing test leaves no server behind.
fn left_after(pids: &[i32], limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            for pid in &left {
                // SAFETY: kill only sends a signal; these are the test's own servers.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every server of `names` is ready (in any order).
fn await_ready(g: &mut Gjc, names: &[&str]) {
    let mut waiting: Vec<&str> = names.to_vec();
    let deadline = Instant::now() + TIMEOUT;
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = g
            .client
            .recv(left)
            .unwrap_or_else(|e| panic!("{waiting:?} never became ready: {e:?}"));
        let e = &frame.value["payload"]["event"];
        if e["type"] == "mcp_server_state" && e["state"] == "ready" {
            waiting.retain(|name| e["name"] != *name);
        }
    }
}

#[test]
fn killing_gjc_kills_every_server_even_one_that_outlives_its_stdin() {
    let agent = tempfile::tempdir().unwrap();
    let servers = json!({"everything": everything(), "stubborn": misbehaving(&["stay"], 5.0)});
    std::fs::write(
        agent.path().join("mcp.json"),
        json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap();
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap())
        .script(json!({"turns": []}))
        .spawn();
    await_ready(&mut g, &["everything", "stubborn"]);
    let pid = g.client.pid();
    let servers = children(pid);
    assert_eq!(servers.len(), 2, "{servers:?}");
    // No shutdown runs in gjc: the kernel's parent-death signal is all there is.
    // SAFETY: kill only sends a signal to the process this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    g.client
        .wait_exit(Duration::from_secs(5))
        .expect("gjc is gone");
    let left = left_after(&servers, Duration::from_secs(5));
    assert!(left.is_empty(), "the MCP servers {left:?} outlived gjc");
}

#[test]
fn a_server_slower_than_its_start_up_timeout_joins_after_the_first_request_went_without_it() {
    let agent = tempfile::tempdir().unwrap();
    // Awake 2.5 s after it starts: past the 2 s the first request waits, within the
    // handshake's own deadline (the unanswered probe, then `initialize`, each given 2 s).
    let mut slow = misbehaving(&["slow-start:2500"], 5.0);
    slow["startupTimeoutSec"] = json!(2);
    std::fs::write(
        agent.path().join("mcp.json"),
        json!({"mcpServers": {"slow": slow}}).to_string(),
    )
    .unwrap();
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap())
        .script(json!({"turns": [
            call("mcp__slow__ok", json!({})), say("went on"),
            call("mcp__slow__ok", json!({})), say("joined"),
        ]}))
        .spawn();
    // `ready` came before the server could answer anything.
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["mcpServers"][0]["state"], "starting", "{state}");
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let ends = results(&events);
    assert!(text_of(&ends[0]).contains("not found"), "{}", ends[0]);
    let is_ready =
        |e: &Value| e["type"] == "mcp_server_state" && e["name"] == "slow" && e["state"] == "ready";
    let joined = match events.iter().find(|e| is_ready(e)) {
        Some(e) => e.clone(),
        None => state_event(&mut g, "slow", "ready"),
    };
    assert_eq!(joined["tools"], 9, "{joined}");
    g.ok(json!({"type": "prompt", "message": "again"}));
    let ends = results(&g.run_events());
    assert_eq!(text_of(&ends[0]), "fine", "{}", ends[0]);
}

#[test]
fn servers_from_mcp_json_start_with_the_session_and_none_outlives_gjc() {
    let agent = tempfile::tempdir().unwrap();
    let mut bad = misbehaving(&[], 5.0);
    bad["env"] = json!({"TEST_TOKEN": "${GJC_TEST_MCP_TOKEN:-fallback}"});
    // One server that stays when its stdin ends: gjc's SIGTERM must end it.
    let stubborn = misbehaving(&["stay"], 5.0);
    std::fs::write(
        agent.path().join("mcp.json"),
        json!({"mcpServers": {"bad": bad, "everything": everything(), "stubborn": stubborn}})
            .to_string(),
    )
    .unwrap();
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap())
        .script(json!({"turns": [call("mcp__bad__pid", json!({})), say("ok")]}))
        .spawn();
    // The first model request waits for servers still starting.
    g.ok(json!({"type": "prompt", "message": "pid"}));
    let ends = results(&g.run_events());
    let pid: i32 = text_of(&ends[0])
        .parse()
        .unwrap_or_else(|_| panic!("{}", ends[0]));
    let state = g.ok(json!({"type": "get_state"}));
    let names: Vec<&str> = state["mcpServers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bad", "everything", "stubborn"]);
    let servers = children(g.client.pid());
    assert_eq!(servers.len(), 3, "{servers:?}");
    assert!(servers.contains(&pid), "{servers:?}");
    g.close_and_wait().expect("gjc exits at stdin EOF");
    let left = left_after(&servers, Duration::from_secs(5));
    assert!(left.is_empty(), "the MCP servers {left:?} outlived gjc");
}

#[test]
fn unattended_runs_call_mcp_tools_only_when_their_action_class_is_allowed() {
    let mut g = gjc()
        .script(json!({"turns": [call("mcp__bad__ok", json!({})), say("refused")]}))
        .spawn();
    add(&mut g, "bad", misbehaving(&[], 5.0));
    state_event(&mut g, "bad", "ready");
    g.ok(json!({"type": "negotiate_unattended", "declaration": {
        "actor": "ci/runner", "scopes": ["prompt", "message:read"],
        "action_allowlist": ["command.prompt", "command.message_read", "bash.readonly"],
        "budget": {"max_tokens": 100000, "max_tool_calls": 10, "max_wall_time_ms": 60000, "max_cost_usd": 5}}}));
    g.ok(json!({"type": "prompt", "message": "call it"}));
    let events = g.run_events();
    let ends = results(&events);
    assert_eq!(ends[0]["isError"], true);
    assert!(text_of(&ends[0]).contains("mcp_tool.invoke"), "{}", ends[0]);
    let end = events.last().unwrap();
    assert_eq!(end["deniedActions"][0]["tool"], "mcp__bad__ok", "{end}");
    // The audit trail has the denial, under the MCP tool's own action class.
    let files = crate::unattended::audit_files(&g);
    assert_eq!(files.len(), 1, "{files:?}");
    let records = crate::unattended::audit_records(&files[0]);
    let denied: Vec<_> = records
        .iter()
        .filter(|r| r["event"] == "action_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{records:?}");
    assert_eq!(denied[0]["action"], "mcp_tool.invoke", "{}", denied[0]);
    assert_eq!(denied[0]["outcome"], "denied");
}

#[test]
fn a_slow_server_delays_neither_ready_nor_the_first_request_past_its_start_up_timeout() {
    let agent = tempfile::tempdir().unwrap();
    let mut slow = misbehaving(&["slow-start"], 5.0);
    slow["startupTimeoutSec"] = json!(1);
    std::fs::write(
        agent.path().join("mcp.json"),
        json!({"mcpServers": {"slow": slow}}).to_string(),
    )
    .unwrap();
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap())
        .script(json!({"turns": [call("mcp__slow__ok", json!({})), say("went on")]}))
        .spawn();
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["mcpServers"][0]["state"], "starting", "{state}");
    let asked = Instant::now();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let ends = results(&g.run_events());
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "waited {:?}",
        asked.elapsed()
    );
    assert!(text_of(&ends[0]).contains("not found"), "{}", ends[0]);
    let failed = state_event(&mut g, "slow", "failed");
    assert!(
        failed["reason"].as_str().unwrap().contains("initialize"),
        "{failed}"
    );
}
