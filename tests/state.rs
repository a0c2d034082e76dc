//! Commands that need no model: get_state, todos, modes, thinking levels, names, typed
//! not-supported errors.

use serde_json::json;

use crate::support::gjc;

#[test]
fn get_state_has_every_seed_field() {
    let mut g = gjc().spawn();
    let s = g.ok(json!({"type": "get_state"}));
    for field in [
        "model",
        "thinkingLevel",
        "isStreaming",
        "isCompacting",
        "steeringMode",
        "followUpMode",
        "interruptMode",
        "sessionId",
        "autoCompactionEnabled",
        "messageCount",
        "queuedMessageCount",
        "todoPhases",
        "contextUsage",
    ] {
        assert!(s.get(field).is_some(), "missing {field}: {s}");
    }
    assert_eq!(s["steeringMode"], "one-at-a-time");
    assert_eq!(s["followUpMode"], "one-at-a-time");
    assert_eq!(s["interruptMode"], "immediate");
    assert_eq!(s["isStreaming"], false);
    assert!(
        s.get("systemPrompt").is_none() && s.get("dumpTools").is_none(),
        "large fields only on request"
    );
    let s = g.ok(json!({"type": "get_state", "include": ["tools", "systemPrompt"]}));
    let tools: Vec<&str> = s["dumpTools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "read",
            "bash",
            "edit",
            "write",
            "grep",
            "find",
            "ls",
            "todo_write"
        ]
    );
    assert_eq!(s["dumpTools"][0]["parameters"]["type"], "object");
    let prompt = s["systemPrompt"][0].as_str().unwrap();
    assert!(
        prompt.contains("Current working directory") && prompt.contains("- read:"),
        "{prompt}"
    );
    let s = g.ok(json!({"type": "get_state", "include": ["dumpTools"]}));
    assert!(s["dumpTools"].is_array());
}

#[test]
fn tools_flag_and_system_prompt_flags() {
    let mut g = gjc()
        .args(&[
            "--tools",
            "read,ls",
            "--system-prompt",
            "CUSTOM",
            "--append-system-prompt",
            "EXTRA",
        ])
        .spawn();
    let s = g.ok(json!({"type": "get_state", "include": ["tools", "systemPrompt"]}));
    assert_eq!(s["dumpTools"].as_array().unwrap().len(), 2);
    let p = s["systemPrompt"][0].as_str().unwrap();
    assert!(p.starts_with("CUSTOM\n\nEXTRA"), "{p}");
}

#[test]
fn set_todos_validates_normalizes_and_shows_in_state() {
    let mut g = gjc().spawn();
    let d = g.ok(
        json!({"type": "set_todos", "phases": [{"id": "phase-1", "name": "Evaluation", "tasks": [
        {"id": "task-1", "content": "Map the read tool surface", "status": "in_progress"},
        {"content": " Exercise edit operations ", "status": "pending"}]}]}),
    );
    assert_eq!(
        d["todoPhases"][0]["tasks"][1]["content"],
        "Exercise edit operations"
    );
    assert_eq!(d["todoPhases"][0]["tasks"][0]["id"], "task-1");
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["todoPhases"], d["todoPhases"]);
    let r = g.request(json!({"type": "set_todos", "phases": [{"name": "x", "tasks": [{"content": "a", "status": "done"}]}]}));
    assert_eq!(r["success"], false);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("status must be one of"),
        "{r}"
    );
}

#[test]
fn queue_modes_validate_exact_values() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "set_steering_mode", "mode": "all"}));
    g.ok(json!({"type": "set_follow_up_mode", "mode": "all"}));
    g.ok(json!({"type": "set_interrupt_mode", "mode": "wait"}));
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(
        (
            s["steeringMode"].as_str(),
            s["followUpMode"].as_str(),
            s["interruptMode"].as_str()
        ),
        (Some("all"), Some("all"), Some("wait"))
    );
    let r = g.request(json!({"type": "set_steering_mode", "mode": "All"}));
    assert_eq!(r["error"], "Invalid steering mode: All");
    let r = g.request(json!({"type": "set_follow_up_mode", "mode": "x"}));
    assert_eq!(r["error"], "Invalid follow-up mode: x");
    let r = g.request(json!({"type": "set_interrupt_mode", "mode": "now"}));
    assert_eq!(r["error"], "Invalid interrupt mode: now");
}

#[test]
fn thinking_levels_are_validated_and_clamped() {
    let mut g = gjc()
        .args(&["--provider", "openai", "--model", "gpt-4.1"])
        .spawn();
    g.ok(json!({"type": "set_thinking_level", "level": "high"}));
    assert_eq!(
        g.ok(json!({"type": "get_state"}))["thinkingLevel"],
        "off",
        "gpt-4.1 has no reasoning"
    );
    assert!(g.ok(json!({"type": "cycle_thinking_level"})).is_null());
    let r = g.request(json!({"type": "set_thinking_level", "level": "ultra"}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid thinking level: ultra (one of inherit, off,"),
        "{r}"
    );

    let mut g = gjc()
        .args(&["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
        .spawn();
    g.ok(json!({"type": "set_thinking_level", "level": "xhigh"}));
    assert_eq!(g.ok(json!({"type": "get_state"}))["thinkingLevel"], "high");
    assert_eq!(g.event("thinking_level_changed")["thinkingLevel"], "high");
    let d = g.ok(json!({"type": "cycle_thinking_level"}));
    assert_eq!(d["level"], "off");
    let d = g.ok(json!({"type": "cycle_thinking_level"}));
    assert_eq!(d["level"], "minimal");
}

#[test]
fn setters_and_session_name() {
    let mut g = gjc().spawn();
    g.ok(json!({"type": "set_auto_compaction", "enabled": false}));
    g.ok(json!({"type": "set_auto_retry", "enabled": false}));
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["autoCompactionEnabled"], false);
    assert_eq!(s["autoRetryEnabled"], false);
    let r = g.request(json!({"type": "set_session_name", "name": "  \t "}));
    assert_eq!(r["error"], "Session name cannot be empty");
    g.ok(json!({"type": "set_session_name", "name": " my\tsession "}));
    assert_eq!(
        g.ok(json!({"type": "get_state"}))["sessionName"],
        "my session"
    );
}

/// An overlong name is refused (it would push the session out of `list_sessions`); one at the
/// cap is kept, and the session stays listed with it.
#[test]
fn session_names_are_capped_and_named_sessions_stay_listed() {
    let turn = json!({"content": [{"type": "text", "text": "done"}]});
    let mut g = gjc().script(json!({ "turns": [turn] })).spawn();
    g.ok(json!({"type": "prompt", "message": "hi"}));
    g.event("agent_end");
    let r = g.request(json!({"type": "set_session_name", "name": "n".repeat(100_000)}));
    assert_eq!(r["success"], false, "{}", r["error"]);
    assert_eq!(
        r["error"],
        "Session name is 100000 characters long; the limit is 256"
    );
    let longest = "é".repeat(256);
    g.ok(json!({"type": "set_session_name", "name": longest}));
    let id = g.ok(json!({"type": "get_state"}))["sessionId"].clone();
    let listed = g.ok(json!({"type": "list_sessions"}));
    let mine: Vec<_> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["id"] == id)
        .collect();
    assert_eq!(mine.len(), 1, "{listed}");
    assert_eq!(mine[0]["name"], longest.as_str());
}

#[test]
fn unavailable_commands_answer_a_typed_error() {
    let mut g = gjc().spawn();
    let r = g.request(json!({"type": "login", "providerId": "x"}));
    assert_eq!(r["success"], false, "{r}");
    // Codes travel as the error text's prefix: clients show only strings faithfully.
    assert!(
        r["error"].as_str().unwrap().starts_with("not_supported: "),
        "{r}"
    );
}

#[test]
fn models_and_missing_keys() {
    let mut g = gjc().spawn();
    let r = g.request(json!({"type": "set_model", "provider": "nope", "modelId": "x"}));
    assert_eq!(r["error"], "Model not found: nope/x");
    let d = g.ok(json!({"type": "get_available_models"}));
    let providers: Vec<&str> = d["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["provider"].as_str().unwrap())
        .collect();
    assert!(
        providers.iter().all(|p| *p == "scripted"),
        "without keys only keyless models are available: {providers:?}"
    );
    let r = g.request(json!({"type": "prompt", "message": "hi"}));
    assert_eq!(r["success"], false);
    assert!(
        r["error"].as_str().unwrap().contains("ANTHROPIC_API_KEY"),
        "{r}"
    );
}
