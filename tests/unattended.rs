//! Unattended mode: the declaration and its refusals, the command preflight (scopes, action
//! classes, bash classification), budgets that count the model's own work and stop a run at
//! once, and the audit trail.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::fake_provider::sse_events;
use crate::support::{gjc, Chunk, FakeProvider, Gjc, Reply, TIMEOUT};

fn declaration(scopes: Value, allow: Value, budget: Value) -> Value {
    json!({"type": "negotiate_unattended", "declaration": {
        "actor": "ci/runner", "budget": budget, "scopes": scopes, "action_allowlist": allow}})
}

fn budget(tokens: f64, tool_calls: f64, wall_ms: f64) -> Value {
    json!({"max_tokens": tokens, "max_tool_calls": tool_calls, "max_wall_time_ms": wall_ms, "max_cost_usd": 5})
}

/// Reads and prompts allowed; bash only when read-only.
fn reader(budget: Value) -> Value {
    declaration(
        json!(["prompt", "message:read", "bash"]),
        json!(["command.message_read", "bash.readonly"]),
        budget,
    )
}

fn bash_call(command: &str) -> Value {
    json!({"type": "toolCall", "name": "bash", "arguments": {"command": command}})
}

fn turn(blocks: Value) -> Value {
    json!({"content": blocks})
}

fn say(text: &str) -> Value {
    turn(json!([{"type": "text", "text": text}]))
}

/// `(code, error text, error_details)` of a failed response.
fn refusal(r: &Value) -> (String, String, Value) {
    assert_eq!(r["success"], false, "expected a refusal: {r}");
    let text = r["error"].as_str().expect("error is a string").to_string();
    let code = text.split(':').next().unwrap_or("").to_string();
    (code, text, r["error_details"].clone())
}

fn tool_ends(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect()
}

fn agent_end(events: &[Value]) -> Value {
    let ends: Vec<&Value> = events.iter().filter(|e| e["type"] == "agent_end").collect();
    assert_eq!(ends.len(), 1);
    ends[0].clone()
}

/// The audit trail file(s) under the agent dir.
pub(crate) fn audit_files(g: &Gjc) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![g.home.path().join("agent")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().contains("audit/unattended/") {
                found.push(p);
            }
        }
    }
    found
}

pub(crate) fn audit_records(path: &Path) -> Vec<Value> {
    ::gjc::control::audit::records(path).expect("a readable audit trail")
}

fn event_names(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect()
}

#[test]
fn declarations_are_validated_in_order_with_typed_codes() {
    let mut g = gjc().script(json!({"turns": []})).spawn();
    let cases = [
        (
            json!({"type": "negotiate_unattended"}),
            "invalid_unattended_declaration: declaration is required",
        ),
        (
            json!({"type": "negotiate_unattended", "declaration": {"actor": " ", "scopes": [], "action_allowlist": []}}),
            "invalid_unattended_declaration: declaration.actor is required",
        ),
        (
            json!({"type": "negotiate_unattended", "declaration": {"actor": "a", "scopes": "bash", "action_allowlist": []}}),
            "invalid_unattended_declaration: declaration.scopes must be string[]",
        ),
        (
            declaration(json!(["bash", "root"]), json!([]), budget(1.0, 1.0, 1.0)),
            "invalid_unattended_declaration: declaration.scopes contains unknown scope(s): root",
        ),
        (
            declaration(json!([]), json!(["bash.anything"]), budget(1.0, 1.0, 1.0)),
            "invalid_unattended_declaration: declaration.action_allowlist contains unknown action class(es): bash.anything",
        ),
        (
            declaration(json!([]), json!([]), json!(null)),
            "incomplete_budget: budget declaration is required for unattended mode",
        ),
        (
            declaration(
                json!([]),
                json!([]),
                json!({"max_tokens": 1, "max_tool_calls": 0, "max_wall_time_ms": 1, "max_cost_usd": 1}),
            ),
            "incomplete_budget: budget.max_tool_calls must be a positive finite number",
        ),
    ];
    for (command, want) in cases {
        let r = g.request(command);
        let (code, text, details) = refusal(&r);
        assert_eq!(text, want);
        assert_eq!(details["code"], code.as_str());
    }
    // Still attended: nothing was negotiated.
    let state = g.ok(json!({"type": "get_state"}));
    assert!(state.get("unattended").is_none());

    let session = state["sessionId"].as_str().unwrap().to_string();
    let data = g.ok(declaration(
        json!(["bash", "message:read", "bash"]),
        json!(["bash.readonly", "command.message_read"]),
        json!({"max_tokens": 1000, "max_tool_calls": 1.5, "max_wall_time_ms": 60000, "max_cost_usd": 0.25}),
    ));
    assert_eq!(data["run_id"], session.as_str());
    assert_eq!(data["actor"], "ci/runner");
    assert_eq!(data["scopes"], json!(["bash", "message:read", "prompt"]));
    assert_eq!(
        data["action_allowlist"],
        json!(["bash.readonly", "command.message_read", "command.prompt"])
    );
    assert_eq!(
        data["budget"],
        json!({"max_tokens": 1000, "max_tool_calls": 1.5, "max_wall_time_ms": 60000, "max_cost_usd": 0.25})
    );
    assert!(data["accepted_at"].as_str().unwrap().ends_with('Z'));
    let state = g.ok(json!({"type": "get_state"}));
    let status = &state["unattended"];
    assert_eq!(status["actor"], "ci/runner");
    assert_eq!(status["used"]["tool_calls"], 0);
    assert_eq!(status["left"]["tokens"], 1000);
}

#[test]
fn a_startup_model_that_cannot_meter_usage_is_refused() {
    // A model whose server sends no usage while streaming cannot be held to a budget.
    let agent = tempfile::tempdir().unwrap();
    let models = json!({"providers": {"local": {"baseUrl": "http://127.0.0.1:9/v1",
        "api": "openai-completions", "apiKey": "local-key",
        "compat": {"supportsUsageInStreaming": false}, "models": [{"id": "m"}]}}});
    std::fs::write(agent.path().join("models.json"), models.to_string()).unwrap();
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap())
        .args(&["--provider", "local", "--model", "m"])
        .spawn();
    let r = g.request(reader(budget(10.0, 10.0, 1000.0)));
    let (code, text, _) = refusal(&r);
    assert_eq!(code, "unsupported_budget_metric");
    assert_eq!(
        text,
        "unsupported_budget_metric: unattended mode requires an explicit provider token/cost accounting capability"
    );
    // A bad budget is still reported before the capability.
    let r = g.request(reader(json!({"max_tokens": 1})));
    assert_eq!(refusal(&r).0, "incomplete_budget");
}

#[test]
fn denied_commands_have_no_side_effect() {
    let mut g = gjc().script(json!({"turns": []})).spawn();
    g.ok(declaration(
        json!(["bash", "session"]),
        json!(["bash.readonly"]),
        budget(1000.0, 50.0, 60_000.0),
    ));
    // A scope not declared.
    let r = g.request(json!({"type": "get_state"}));
    let (code, _, d) = refusal(&r);
    assert_eq!(code, "scope_denied");
    assert_eq!(d["scope"], "message:read");
    assert_eq!(d["pre_side_effect"], true);
    assert!(d["run_id"].is_string());
    assert!(d.get("command").is_none());
    // Scope declared, action class not.
    let r = g.request(json!({"type": "set_session_name", "name": "x"}));
    let (code, _, d) = refusal(&r);
    assert_eq!(code, "action_denied");
    assert_eq!(d["action"], "command.session");
    // A read-only command runs.
    let out = g.ok(json!({"type": "bash", "command": "echo hi && ls"}));
    assert_eq!(out["exitCode"], 0);
    // A mutating one is refused by its class and never runs.
    let target = g.project.join("made.txt");
    let r = g.request(json!({"type": "bash", "command": "echo x > made.txt"}));
    let (code, text, d) = refusal(&r);
    assert_eq!(code, "action_denied", "{text}");
    assert_eq!(d["action"], "file.write");
    assert_eq!(d["command"], "echo x > made.txt");
    assert_eq!(d["pre_side_effect"], true);
    let r = g.request(json!({"type": "bash", "command": "rm -rf . ; ls"}));
    assert_eq!(refusal(&r).2["action"], "file.delete");
    let r = g.request(json!({"type": "bash", "command": "unknown-tool --go"}));
    assert_eq!(refusal(&r).2["action"], "bash.mutating");
    assert!(!target.exists());
    // Prompts are the mandatory floor: scope and class were appended.
    // (The script has no turns; the run fails but it was allowed to start.)
    g.ok(json!({"type": "prompt", "message": "go"}));
    let end = agent_end(&g.run_events());
    assert_eq!(end["outcome"], "error");

    // The audit trail: under the agent dir, private, each denial recorded, repeats too.
    let r = g.request(json!({"type": "get_state"}));
    assert_eq!(refusal(&r).0, "scope_denied");
    let files = audit_files(&g);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(!files[0].starts_with(&g.project));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let records = audit_records(&files[0]);
    assert_eq!(
        event_names(&records),
        [
            "unattended_negotiated",
            "scope_denied",
            "action_denied",
            "action_denied",
            "action_denied",
            "action_denied",
            "scope_denied"
        ],
        "the second get_state denial is another attempt, recorded as such"
    );
    let negotiated = &records[0];
    assert_eq!(negotiated["outcome"], "accepted");
    assert_eq!(negotiated["actor"], "ci/runner");
    assert_eq!(negotiated["schema_version"], 1);
    assert_eq!(negotiated["category"], "unattended_lifecycle");
    assert_eq!(negotiated["budget"]["max_tool_calls"], 50.0);
    let scope_denied = &records[1];
    assert_eq!(scope_denied["outcome"], "denied");
    assert_eq!(scope_denied["scope"], "message:read");
    assert!(scope_denied["dedupe_key"]
        .as_str()
        .unwrap()
        .starts_with("scope_denied:run:"));
    assert_eq!(records[2]["action"], "command.session");
    assert_eq!(records[3]["action"], "file.write");
    assert_eq!(records[3]["error"]["command"], "echo x > made.txt");
    for r in &records {
        assert!(r["event_id"].as_str().unwrap().starts_with("ae_"));
        assert!(r["timestamp"].as_str().unwrap().ends_with('Z'));
    }
}

#[test]
fn charged_commands_use_tool_call_units_and_renegotiation_starts_over() {
    let mut g = gjc().script(json!({"turns": []})).spawn();
    g.ok(reader(budget(1000.0, 2.0, 60_000.0)));
    g.ok(json!({"type": "bash", "command": "true"}));
    // The unit is taken before the class check: a denied bash still uses it.
    let r = g.request(json!({"type": "bash", "command": "touch x"}));
    assert_eq!(refusal(&r).0, "action_denied");
    let r = g.request(json!({"type": "bash", "command": "true"}));
    let (code, _, d) = refusal(&r);
    assert_eq!(code, "budget_exceeded");
    assert_eq!(d["metric"], "tool_calls");
    assert_eq!(d["limit"], 2);
    assert_eq!(d["observed"], 3);
    assert_eq!(d["phase"], "bash preflight");
    assert_eq!(d["abort_status"], "aborting");
    // Reads still work after a breach; charged work is refused until renegotiation.
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["unattended"]["used"]["tool_calls"], 2);
    assert_eq!(state["unattended"]["left"]["tool_calls"], 0);
    assert_eq!(state["unattended"]["exceeded"]["metric"], "tool_calls");
    let r = g.request(json!({"type": "prompt", "message": "more"}));
    let (code, _, d) = refusal(&r);
    assert_eq!(code, "budget_exceeded");
    assert_eq!(d["phase"], "prompt preflight");
    let r = g.request(json!({"type": "steer", "message": "more"}));
    assert_eq!(refusal(&r).0, "budget_exceeded");

    g.ok(reader(budget(1000.0, 3.0, 60_000.0)));
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["unattended"]["used"]["tool_calls"], 0);
    assert!(state["unattended"].get("exceeded").is_none());
    assert_eq!(state["unattended"]["budget"]["max_tool_calls"], 3.0);
    g.ok(json!({"type": "bash", "command": "true"}));
}

#[test]
fn the_models_bash_and_writes_pass_the_same_classifier() {
    let mut g = gjc()
        .script(json!({"turns": [
            turn(json!([
                bash_call("ls"),
                bash_call("rm -rf keep.txt"),
                {"type": "toolCall", "name": "write", "arguments": {"path": "new.txt", "content": "x"}},
            ])),
            say("Could not do it."),
        ]}))
        .spawn();
    std::fs::write(g.project.join("keep.txt"), "keep").unwrap();
    g.ok(reader(budget(100_000.0, 20.0, 60_000.0)));
    g.ok(json!({"type": "prompt", "message": "clean up"}));
    let events = g.run_events();
    let results = tool_ends(&events);
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["isError"], false, "ls is read-only");
    assert_eq!(results[1]["isError"], true);
    let text = results[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("action_denied: "), "{text}");
    assert!(text.contains("file.delete"), "{text}");
    assert_eq!(results[2]["isError"], true);
    assert!(g.project.join("keep.txt").exists());
    assert!(!g.project.join("new.txt").exists());
    let end = agent_end(&events);
    assert_eq!(end["outcome"], "completed");
    let denied = end["deniedActions"].as_array().expect("deniedActions");
    assert_eq!(denied.len(), 2);
    assert_eq!(denied[0]["action"], "file.delete");
    assert_eq!(denied[0]["tool"], "bash");
    assert_eq!(denied[0]["command"], "rm -rf keep.txt");
    assert!(denied[0]["toolCallId"].is_string());
    assert_eq!(denied[1]["action"], "file.write");
    assert_eq!(denied[1]["tool"], "write");
    // Every model tool call used a unit, and so did the prompt.
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["unattended"]["used"]["tool_calls"], 4);
    let records = audit_records(&audit_files(&g)[0]);
    let denied: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "action_denied")
        .collect();
    assert_eq!(denied.len(), 2);
    assert_eq!(denied[0]["action"], "file.delete");
    assert_eq!(denied[0]["error"]["tool"], "bash");
    assert_eq!(
        denied[0]["error"]["toolCallId"],
        end["deniedActions"][0]["toolCallId"]
    );
    assert_eq!(denied[1]["error"]["tool"], "write");
}

#[test]
fn a_tool_call_budget_stops_the_tool_loop() {
    let mut g = gjc()
        .script(json!({"turns": [
            turn(json!([bash_call("echo one"), bash_call("echo two")])),
            turn(json!([bash_call("echo three"), bash_call("echo four")])),
            say("never reached"),
        ]}))
        .spawn();
    // The prompt takes one unit, the first turn's calls two: the third call breaches.
    g.ok(reader(budget(100_000.0, 3.0, 60_000.0)));
    g.ok(json!({"type": "prompt", "message": "count"}));
    let events = g.run_events();
    let ends = tool_ends(&events);
    assert_eq!(ends.len(), 4, "every call gets its result");
    assert_eq!(ends[0]["isError"], false);
    assert_eq!(ends[1]["isError"], false);
    let text = ends[2]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("budget_exceeded: "), "{text}");
    assert_eq!(ends[3]["isError"], true);
    let end = agent_end(&events);
    assert_eq!(end["outcome"], "budget_exceeded");
    assert_eq!(end["stopReason"], "completed");
    assert!(end["errorMessage"]
        .as_str()
        .unwrap()
        .starts_with("budget_exceeded: tool_calls"));
    assert_eq!(end["errorDetails"]["metric"], "tool_calls");
    assert_eq!(end["errorDetails"]["phase"], "tool call");
    assert_eq!(end["errorDetails"]["observed"], 4);
    let r = g.request(json!({"type": "prompt", "message": "again"}));
    assert_eq!(refusal(&r).0, "budget_exceeded");
    let records = audit_records(&audit_files(&g)[0]);
    assert_eq!(
        event_names(&records),
        [
            "unattended_negotiated",
            "budget_exceeded",
            "unattended_aborted",
            "unattended_abort_settled"
        ]
    );
    assert_eq!(records[1]["outcome"], "exceeded");
    assert_eq!(records[1]["error"]["metric"], "tool_calls");
    assert_eq!(records[2]["outcome"], "aborted");
    assert_eq!(records[3]["error"]["status"], "aborted");
}

#[test]
fn a_token_budget_closes_the_stream_mid_reply() {
    let long = "word ".repeat(2000);
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [{"type": "text", "text": long}], "delayMs": 2, "chunkChars": 20},
        ]}))
        .spawn();
    // 10,000 characters would be about 2,500 tokens; the budget allows 100.
    g.ok(reader(budget(100.0, 10.0, 60_000.0)));
    let started = Instant::now();
    g.ok(json!({"type": "prompt", "message": "talk"}));
    let events = g.run_events();
    let updates = events
        .iter()
        .filter(|e| e["type"] == "message_update")
        .count();
    // 100 tokens are about 400 characters: 20 deltas, and at most a few more in flight.
    assert!(
        updates < 60,
        "{updates} updates: the stream was not stopped"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let end = agent_end(&events);
    assert_eq!(end["outcome"], "budget_exceeded");
    assert_eq!(end["errorDetails"]["metric"], "tokens");
    assert_eq!(end["errorDetails"]["phase"], "model stream");
    assert_eq!(end["errorDetails"]["limit"], 100);
    let assistant = end["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the partial reply is kept");
    assert_eq!(assistant["stopReason"], "aborted");
    assert!(assistant["errorMessage"]
        .as_str()
        .unwrap()
        .starts_with("budget_exceeded: tokens"));
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["isStreaming"], false);
    assert_eq!(state["unattended"]["exceeded"]["metric"], "tokens");
    assert!(state["unattended"]["used"]["tokens"].as_f64().unwrap() > 100.0);
}

/// The budget leaves room for a loaded machine to reach the command: the timer, not the
/// preflight, must be what stops the run.
#[test]
fn the_wall_clock_stops_a_running_command() {
    let mut g = gjc()
        .script(json!({"turns": [
            turn(json!([bash_call("sleep 30")])),
            say("never reached"),
        ]}))
        .spawn();
    g.ok(reader(budget(100_000.0, 10.0, 3_000.0)));
    let started = Instant::now();
    g.ok(json!({"type": "prompt", "message": "wait"}));
    let events = g.run_events();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let end = agent_end(&events);
    assert_eq!(end["outcome"], "budget_exceeded");
    assert_eq!(end["errorDetails"]["metric"], "wall_time");
    assert_eq!(end["errorDetails"]["phase"], "timer");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the sleeping call ends");
    assert_eq!(result["isError"], true);
    // Without a run, the timer still fires and later work is refused.
    g.ok(reader(budget(100_000.0, 10.0, 200.0)));
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let state = g.ok(json!({"type": "get_state"}));
        if state["unattended"].get("exceeded").is_some() {
            assert_eq!(state["unattended"]["exceeded"]["metric"], "wall_time");
            break;
        }
        assert!(Instant::now() < deadline, "the wall-time timer never fired");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = g.request(json!({"type": "bash", "command": "true"}));
    assert_eq!(refusal(&r).2["metric"], "wall_time");
}

/// An Anthropic reply that reports `input_tokens` at its start, streams a little text and then
/// sends nothing more.
fn anthropic_start_then_stall(input_tokens: u64) -> Reply {
    let head = sse_events(
        &[
            json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],
                "usage":{"input_tokens":input_tokens,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Thinking about it"}}),
        ],
        true,
    );
    Reply::sse_chunks(vec![Chunk::Bytes(head.into_bytes()), Chunk::Stall])
}

fn anthropic(fake: &FakeProvider) -> Gjc {
    gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-anthropic", "--model", "m"])
        .spawn()
}

#[test]
fn usage_the_provider_reports_mid_stream_counts_at_once() {
    let fake = FakeProvider::start();
    fake.push(anthropic_start_then_stall(5000));
    let mut g = anthropic(&fake);
    // The prompt's input alone is over the token budget: the stream is stopped as soon as the
    // provider says so, long before the stall watchdog.
    g.ok(reader(budget(1000.0, 10.0, 60_000.0)));
    let started = Instant::now();
    g.ok(json!({"type": "prompt", "message": "hello"}));
    let end = agent_end(&g.run_events());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(end["outcome"], "budget_exceeded");
    assert_eq!(end["errorDetails"]["metric"], "tokens");
    assert_eq!(end["errorDetails"]["phase"], "model stream");
    assert!(end["errorDetails"]["observed"].as_f64().unwrap() >= 5000.0);

    // Cost: 20,000 input tokens at $3 per million are $0.06, over a $0.05 budget.
    fake.push(anthropic_start_then_stall(20_000));
    g.ok(declaration(
        json!(["prompt"]),
        json!([]),
        json!({"max_tokens": 1_000_000, "max_tool_calls": 10, "max_wall_time_ms": 60000, "max_cost_usd": 0.05}),
    ));
    g.ok(json!({"type": "prompt", "message": "hello again"}));
    let end = agent_end(&g.run_events());
    assert_eq!(end["outcome"], "budget_exceeded");
    assert_eq!(end["errorDetails"]["metric"], "cost");
    assert_eq!(end["errorDetails"]["limit"], 0.05);
}

fn host_tool() -> Value {
    json!({"name": "slow_host", "description": "Work the host does",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": false}})
}

#[test]
fn a_breach_cancels_host_calls_and_kills_the_hosts_bash() {
    let mut g = gjc()
        .script(json!({"turns": [
            turn(json!([{"type": "toolCall", "name": "slow_host", "arguments": {}}])),
            say("never reached"),
        ]}))
        .spawn();
    g.ok(json!({"type": "set_host_tools", "tools": [host_tool()]}));
    g.ok(reader(budget(100_000.0, 10.0, 800.0)));
    g.ok(json!({"type": "prompt", "message": "ask the host"}));
    let call = g
        .client
        .wait_for(|f| f["type"] == "host_tool_call", TIMEOUT)
        .expect("host_tool_call");
    // The host never answers: the wall clock runs out and the call is cancelled.
    let cancel = g
        .client
        .wait_for(|f| f["type"] == "host_tool_cancel", TIMEOUT)
        .expect("host_tool_cancel");
    assert_eq!(cancel["targetId"], call["id"]);
    let end = agent_end(&g.run_events());
    assert_eq!(end["outcome"], "budget_exceeded");
    assert_eq!(end["errorDetails"]["metric"], "wall_time");

    // The host's own command is killed too, and answered with the breach.
    g.ok(reader(budget(100_000.0, 10.0, 800.0)));
    let started = Instant::now();
    let r = g.request(json!({"type": "bash", "command": "sleep 30"}));
    assert!(started.elapsed() < Duration::from_secs(10));
    let (code, _, d) = refusal(&r);
    assert_eq!(code, "budget_exceeded");
    assert_eq!(d["metric"], "wall_time");
    assert_eq!(d["phase"], "timer");
}

#[test]
fn provider_keys_never_reach_the_audit_trail() {
    let fake = FakeProvider::start();
    let mut g = anthropic(&fake);
    g.ok(reader(budget(1000.0, 10.0, 60_000.0)));
    // `test-key` is the provider key of the test models.
    let r = g.request(json!({"type": "bash", "command": "curl -H 'x-api-key: test-key' -o out http://127.0.0.1:9"}));
    let (code, _, d) = refusal(&r);
    assert_eq!(code, "action_denied");
    let command = d["command"].as_str().unwrap();
    assert!(
        command.contains("[redacted]") && !command.contains("test-key"),
        "{command}"
    );
    let text = std::fs::read_to_string(&audit_files(&g)[0]).unwrap();
    assert!(text.contains("action_denied"));
    assert!(!text.contains("test-key"), "{text}");
}

#[test]
fn a_corrupt_audit_trail_refuses_negotiation_and_keeps_the_old_declaration() {
    let mut g = gjc().script(json!({"turns": []})).spawn();
    g.ok(reader(budget(1000.0, 10.0, 60_000.0)));
    let trail = audit_files(&g).remove(0);
    let mut text = std::fs::read_to_string(&trail).unwrap();
    text.push_str("{not a record\n");
    std::fs::write(&trail, &text).unwrap();
    let r = g.request(reader(budget(5.0, 5.0, 5.0)));
    let (code, message, _) = refusal(&r);
    assert_eq!(code, "unattended_audit_unavailable");
    assert!(message.contains("corrupt at line 2"), "{message}");
    // The trail is left as it was, and the first declaration still holds.
    assert_eq!(std::fs::read_to_string(&trail).unwrap(), text);
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["unattended"]["budget"]["max_tokens"], 1000.0);
}
