//! Rule files: `alwaysApply` rules in the system prompt, and conditional rules that stop the
//! model's stream when its text, thinking or tool-call arguments match, then send the request
//! again with the rule as a reminder, once per session (across a reload).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::fake_provider::openai_text;
use crate::support::{gjc, types, FakeProvider, Gjc, Reply, TIMEOUT};

/// A project folder holding `.gjc/rules/<name>.md` for each `(name, file text)`.
fn project_with_rules(rules: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let rules_dir = dir.path().join(".gjc/rules");
    std::fs::create_dir_all(&rules_dir).unwrap();
    for (name, text) in rules {
        std::fs::write(rules_dir.join(format!("{name}.md")), text).unwrap();
    }
    dir
}

const NO_UNWRAP: &str =
    "---\ndescription: No unwrap\ncondition: 'unwrap\\(\\)'\n---\nUse `?` instead of unwrap().";

fn scripted(project: &Path, turns: Value, extra: &[&str]) -> Gjc {
    let cwd = project.display().to_string();
    let mut args = vec!["--cwd", cwd.as_str()];
    args.extend_from_slice(extra);
    gjc().script(json!({ "turns": turns })).args(&args).spawn()
}

fn text_turn(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "chunkChars": 4})
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn fired_names(events: &[Value]) -> Vec<Vec<String>> {
    of_type(events, "ttsr_triggered")
        .iter()
        .map(|e| {
            e["rules"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn session_file(g: &mut Gjc) -> PathBuf {
    PathBuf::from(
        g.ok(json!({"type": "get_state"}))["sessionFile"]
            .as_str()
            .expect("sessionFile"),
    )
}

fn injections(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "ttsr_injection")
        .collect()
}

fn is_reminder(m: &Value) -> bool {
    m["role"] == "user"
        && m["attribution"] == "agent"
        && m["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("<system-reminder>"))
}

#[test]
fn a_text_match_stops_the_stream_and_the_request_is_sent_again_with_the_reminder() {
    let project = project_with_rules(&[("no-unwrap", NO_UNWRAP)]);
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_text(&[
        "Let me write x.unw",
        "rap() right here",
        " and more after it",
    ])));
    fake.push(Reply::sse(openai_text(&["Using ? now."])));
    let cwd = project.path().display().to_string();
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-openai", "--model", "m", "--cwd", &cwd])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    assert_eq!(of_type(&events, "agent_end").len(), 1);
    assert!(
        of_type(&events, "auto_retry_start").is_empty(),
        "not a retry"
    );
    let fired = of_type(&events, "ttsr_triggered");
    assert_eq!(fired.len(), 1);
    let rule = &fired[0]["rules"][0];
    assert_eq!(rule["name"], "no-unwrap");
    assert_eq!(rule["content"], "Use `?` instead of unwrap().");
    assert_eq!(rule["condition"], "unwrap\\(\\)");
    assert_eq!(rule["_source"]["level"], "project");
    assert!(rule["path"].as_str().unwrap().ends_with("no-unwrap.md"));
    // The stopped message was closed for the host, without the matching delta.
    let ends = of_type(&events, "message_end");
    let stopped = ends
        .iter()
        .find(|e| e["message"]["stopReason"] == "aborted")
        .expect("the stopped message ends");
    assert_eq!(
        stopped["message"]["content"][0]["text"],
        "Let me write x.unw"
    );
    assert_eq!(
        types(&events).iter().filter(|t| *t == "turn_start").count(),
        1,
        "the same turn goes on"
    );

    let _first = fake.request(TIMEOUT);
    let second = fake.request(TIMEOUT);
    let sent = second.body["messages"].as_array().unwrap();
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "user"], "{sent:?}");
    let reminder = sent[2]["content"].to_string();
    assert!(reminder.contains("system-reminder") && reminder.contains("Use `?` instead"));
    assert!(
        !second.body.to_string().contains("Let me write"),
        "the discarded output is not sent"
    );

    let messages = g.messages();
    assert_eq!(messages.len(), 3);
    assert!(is_reminder(&messages[1]), "{}", messages[1]);
    assert_eq!(messages[2]["content"][0]["text"], "Using ? now.");
    let entries = injections(&session_file(&mut g));
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["injectedRules"], json!(["no-unwrap"]));
}

#[test]
fn a_thinking_rule_fires_on_thinking_and_a_text_rule_does_not() {
    let project = project_with_rules(&[
        (
            "careful",
            "---\ncondition: unsafe\nscope: thinking\n---\nNo unsafe code.",
        ),
        (
            "text-only",
            "---\ncondition: unsafe\nscope: text\n---\nNever.",
        ),
    ]);
    let turns = json!([
        {"content": [{"type": "thinking", "thinking": "I could use unsafe here"}, {"type": "text", "text": "never reached"}], "chunkChars": 5},
        text_turn("done safely"),
    ]);
    let mut g = scripted(project.path(), turns, &[]);
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    assert_eq!(fired_names(&events), vec![vec!["careful".to_string()]]);
    let texts: Vec<String> = g
        .messages()
        .iter()
        .map(|m| m["content"].to_string())
        .collect();
    assert!(!texts.iter().any(|t| t.contains("never reached")));
    assert!(texts.last().unwrap().contains("done safely"));
}

#[test]
fn a_tool_rule_fires_on_the_arguments_before_the_tool_runs() {
    let project = project_with_rules(&[(
        "no-rm",
        "---\ncondition: 'rm -rf'\nscope: tool\n---\nDo not delete recursively.",
    )]);
    let turns = json!([
        {"content": [{"type": "text", "text": "rm -rf is fine in text"}, {"type": "toolCall", "name": "bash", "arguments": {"command": "rm -rf marker"}}]},
        text_turn("I will not delete it."),
    ]);
    std::fs::create_dir(project.path().join("marker")).unwrap();
    let mut g = scripted(project.path(), turns, &[]);
    g.ok(json!({"type": "prompt", "message": "clean up"}));
    let events = g.run_events();
    assert_eq!(fired_names(&events), vec![vec!["no-rm".to_string()]]);
    assert!(of_type(&events, "tool_execution_start").is_empty());
    assert!(project.path().join("marker").exists(), "the tool never ran");
    let messages = g.messages();
    assert!(!messages.iter().any(|m| m["role"] == "toolResult"));
    assert_eq!(messages.len(), 3);
}

#[test]
fn once_per_session_holds_after_a_reload_and_a_new_session_starts_afresh() {
    let project = project_with_rules(&[("no-unwrap", NO_UNWRAP)]);
    let turns = json!([
        text_turn("x.unwrap() first"),
        text_turn("fixed"),
        text_turn("x.unwrap() again, kept"),
        text_turn("x.unwrap() after reload, kept"),
        text_turn("x.unwrap() in a new session"),
        text_turn("fixed there too"),
    ]);
    let mut g = scripted(project.path(), turns, &[]);
    g.ok(json!({"type": "prompt", "message": "one"}));
    assert_eq!(fired_names(&g.run_events()).len(), 1);
    g.ok(json!({"type": "prompt", "message": "two"}));
    assert!(fired_names(&g.run_events()).is_empty(), "once per session");

    let path = session_file(&mut g);
    g.ok(json!({"type": "switch_session", "sessionPath": path}));
    g.ok(json!({"type": "prompt", "message": "three"}));
    let events = g.run_events();
    assert!(
        fired_names(&events).is_empty(),
        "remembered across the reload"
    );
    let last = g.messages().last().cloned().unwrap();
    assert_eq!(last["content"][0]["text"], "x.unwrap() after reload, kept");

    g.ok(json!({"type": "new_session"}));
    g.ok(json!({"type": "prompt", "message": "four"}));
    assert_eq!(fired_names(&g.run_events()).len(), 1, "a new session");
    assert_eq!(injections(&path).len(), 1);
}

#[test]
fn abort_during_the_request_sent_again_ends_the_run_once() {
    let project = project_with_rules(&[("no-unwrap", NO_UNWRAP)]);
    let turns = json!([
        text_turn("x.unwrap() first"),
        {"content": [{"type": "text", "text": "slow answer"}], "stall": true},
    ]);
    let mut g = scripted(project.path(), turns, &[]);
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("ttsr_triggered");
    g.event("message_update");
    g.ok(json!({"type": "abort"}));
    let events = g.run_events();
    let ends = of_type(&events, "agent_end");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"], "aborted");
    let messages = g.messages();
    assert_eq!(messages.len(), 3);
    assert!(is_reminder(&messages[1]));
    assert_eq!(messages[2]["stopReason"], "aborted");
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["isStreaming"], false);
}

#[test]
fn no_rules_disables_them_and_always_apply_rules_join_the_system_prompt() {
    let project = project_with_rules(&[
        ("no-unwrap", NO_UNWRAP),
        ("tabs", "---\nalwaysApply: true\n---\nIndent with tabs."),
    ]);
    let mut g = scripted(project.path(), json!([text_turn("x.unwrap()")]), &[]);
    let state = g.ok(json!({"type": "get_state", "include": ["systemPrompt"]}));
    assert!(state["systemPrompt"]
        .to_string()
        .contains("Indent with tabs."));
    drop(g);

    let mut g = scripted(
        project.path(),
        json!([text_turn("x.unwrap() kept")]),
        &["--no-rules"],
    );
    let state = g.ok(json!({"type": "get_state", "include": ["systemPrompt"]}));
    assert!(!state["systemPrompt"]
        .to_string()
        .contains("Indent with tabs."));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    assert!(fired_names(&events).is_empty());
    assert_eq!(
        g.messages().last().unwrap()["content"][0]["text"],
        "x.unwrap() kept"
    );
}
