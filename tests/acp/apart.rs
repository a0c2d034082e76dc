//! Two live sessions in different project folders keep apart: a project's hooks run for its own
//! session's tool calls only, its rules reach its own model requests only, and one session's
//! todo list (its `plan` updates, its reminders) never reaches the other.

use std::path::{Path, PathBuf};

use super::*;
use crate::hooks::{hooks_file, logged, script};
use crate::support::fake_provider::{openai_text, openai_tool_call, FakeProvider, Reply};

/// A second project folder beside the first one `gjc_with` makes (`home/project`), canonical.
fn other_project(home: &Path) -> PathBuf {
    let other = home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    other.canonicalize().unwrap()
}

fn new_session_in(g: &mut Acp, cwd: &Path) -> String {
    let id = g.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    g.result(id)["sessionId"].as_str().unwrap().to_string()
}

/// One prompt to its end: the messages before its answer.
fn prompt_to_end(g: &mut Acp, session: &str) -> Vec<Value> {
    let id = g.prompt(session, "go");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    before
}

/// The updates among `messages` that belong to `session`.
fn updates_of(messages: &[Value], session: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| m["params"]["update"].clone())
        .collect()
}

/// The text of the tool results `updates` report.
fn tool_results(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .filter(|u| u["status"] == "completed" || u["status"] == "failed")
        .map(|u| u["content"].to_string())
        .collect()
}

/// gjc over the fake provider (`fake-openai`), started in `home/project`.
fn over_fake(home: tempfile::TempDir, fake: &FakeProvider, reminders: &str) -> Acp {
    let agent = home.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    crate::support::gjc::write_models_json(&agent, &fake.base_url);
    let (mut command, project) =
        gjc_with(home.path(), &["--provider", "fake-openai", "--model", "m"]);
    command.env("GJC_TODO_REMINDERS", reminders);
    spawn(command, home, project)
}

#[test]
fn a_project_hook_runs_for_its_own_session_only() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let log = project.join("hook-log.jsonl");
    let guard = script(
        home.path(),
        "guard.sh",
        &log,
        r#"echo '{"decision":"deny","reason":"GUARD-OF-A"}'"#,
    );
    hooks_file(
        &project.join(".gjc").join("hooks.json"),
        json!([{"event": "before_tool_call", "command": guard}]),
    );
    let other = other_project(home.path());
    for dir in [&project, &other] {
        std::fs::write(dir.join("note.txt"), "NOTE-CONTENT\n").unwrap();
    }
    let read = json!({"content": [{"type": "toolCall", "name": "read", "id": "call_r",
        "arguments": {"path": "note.txt"}}]});
    let done = json!({"content": [{"type": "text", "text": "Done."}]});
    let turns = json!({"turns": [read, done, read, done]});
    let script_path = home.path().join("script.json");
    std::fs::write(&script_path, turns.to_string()).unwrap();
    let script_arg = script_path.display().to_string();
    let (command, project) = gjc_with(
        home.path(),
        &[
            "--provider",
            "scripted",
            "--script",
            &script_arg,
            "--trust-project",
        ],
    );
    let mut g = spawn(command, home, project.clone());
    g.initialize(json!({}));
    let a = g.new_session();
    let b = new_session_in(&mut g, &other);
    // B first: a hook set shared by the process would already hold A's hook.
    let seen_b = prompt_to_end(&mut g, &b);
    let seen_a = prompt_to_end(&mut g, &a);
    let results_b = tool_results(&updates_of(&seen_b, &b));
    let results_a = tool_results(&updates_of(&seen_a, &a));
    assert!(results_b.contains("NOTE-CONTENT"), "{seen_b:?}");
    assert!(!results_b.contains("GUARD-OF-A"), "{seen_b:?}");
    assert!(results_a.contains("GUARD-OF-A"), "{seen_a:?}");
    assert!(!results_a.contains("NOTE-CONTENT"), "{seen_a:?}");
    let calls = logged(&log);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["cwd"], json!(project), "{calls:?}");
}

#[test]
fn a_project_rule_reaches_its_own_session_only() {
    let fake = FakeProvider::start();
    let home = tempfile::tempdir().unwrap();
    let rules = home.path().join("project").join(".gjc").join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("always.md"),
        "---\nalwaysApply: true\n---\nALWAYS-RULE-OF-A\n",
    )
    .unwrap();
    std::fs::write(
        rules.join("zebra.md"),
        "---\ncondition: 'ZEBRA-WORD'\n---\nCONDITIONAL-RULE-OF-A\n",
    )
    .unwrap();
    let other = other_project(home.path());
    let mut g = over_fake(home, &fake, "0");
    g.initialize(json!({}));
    let a = g.new_session();
    let b = new_session_in(&mut g, &other);
    let wait = Duration::from_secs(10);
    // A's reply trips A's conditional rule: its stream is cut, the request sent again with it.
    fake.push(Reply::sse(openai_text(&[
        "Here is ZEBRA-WORD",
        " and more.",
    ])));
    fake.push(Reply::sse(openai_text(&["Understood."])));
    let ask = g.prompt(&a, "go");
    let first_a = fake.request(wait).body.to_string();
    let again_a = fake.request(wait).body.to_string();
    assert_eq!(g.stop_reason(ask).0, "end_turn");
    assert!(first_a.contains("ALWAYS-RULE-OF-A"), "{first_a}");
    assert!(!first_a.contains("CONDITIONAL-RULE-OF-A"), "{first_a}");
    assert!(again_a.contains("CONDITIONAL-RULE-OF-A"), "{again_a}");
    // B's reply holds the same word: nothing of A's rules is in B's request or cuts B's stream.
    fake.push(Reply::sse(openai_text(&["B says ZEBRA-WORD", " too."])));
    let ask = g.prompt(&b, "go");
    let first_b = fake.request(wait).body.to_string();
    let (reason, seen_b) = g.stop_reason(ask);
    assert_eq!(reason, "end_turn");
    assert!(!first_b.contains("RULE-OF-A"), "{first_b}");
    assert!(
        fake.try_request().is_none(),
        "B's stream was cut and sent again"
    );
    assert_eq!(
        text_of(&updates_of(&seen_b, &b), "agent_message_chunk"),
        "B says ZEBRA-WORD too."
    );
}

#[test]
fn one_sessions_todos_plan_and_reminder_stay_its_own() {
    let fake = FakeProvider::start();
    let home = tempfile::tempdir().unwrap();
    let other = other_project(home.path());
    // One reminder per run: A's open task earns A one more request, never B one.
    let mut g = over_fake(home, &fake, "1");
    g.initialize(json!({}));
    let a = g.new_session();
    let b = new_session_in(&mut g, &other);
    let todos = json!({"phases": [{"name": "Work", "tasks": [
        {"content": "TASK-OF-A", "status": "in_progress"}]}]});
    fake.push(Reply::sse(openai_tool_call("call_t", "todo_write", &todos)));
    fake.push(Reply::sse(openai_text(&["Planned."])));
    fake.push(Reply::sse(openai_text(&["Still on it."])));
    let ask = g.prompt(&a, "plan it");
    let wait = Duration::from_secs(10);
    let bodies: Vec<String> = (0..3)
        .map(|_| fake.request(wait).body.to_string())
        .collect();
    let (reason, seen_a) = g.stop_reason(ask);
    assert_eq!(reason, "end_turn");
    let reminder = "You stopped, but your todo list still has open tasks";
    assert!(!bodies[1].contains(reminder), "{}", bodies[1]);
    assert!(bodies[2].contains(reminder), "A's reminder: {}", bodies[2]);
    let plans_a: Vec<Value> = updates_of(&seen_a, &a)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    assert!(!plans_a.is_empty(), "{seen_a:?}");
    assert_eq!(plans_a[0]["entries"][0]["content"], "TASK-OF-A");
    // B's own start-up updates may come meanwhile; none of them carries A's plan.
    let b_meanwhile = updates_of(&seen_a, &b);
    assert!(
        !serde_json::to_string(&b_meanwhile)
            .unwrap()
            .contains("TASK-OF-A"),
        "{b_meanwhile:?}"
    );
    fake.push(Reply::sse(openai_text(&["Hello from B."])));
    let ask = g.prompt(&b, "hi");
    let body_b = fake.request(wait).body.to_string();
    let (reason, seen_b) = g.stop_reason(ask);
    assert_eq!(reason, "end_turn");
    assert!(!body_b.contains("TASK-OF-A"), "{body_b}");
    assert!(!body_b.contains(reminder), "{body_b}");
    assert!(fake.try_request().is_none(), "B was reminded of A's tasks");
    assert!(
        !serde_json::to_string(&seen_b)
            .unwrap()
            .contains("TASK-OF-A"),
        "{seen_b:?}"
    );
    assert!(
        updates_of(&seen_b, &b)
            .iter()
            .all(|u| u["sessionUpdate"] != "plan"),
        "{seen_b:?}"
    );
}
