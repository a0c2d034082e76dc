//! A session opened in a project whose `.gjc/hooks.json` nobody decided about asks the editor
//! once (`session/request_permission`); until the answer the hooks are skipped. "Trust" loads
//! them at once and is remembered; "never" leaves them skipped, says so in a notice, and is
//! remembered too, so a later process asks no more.

use std::path::Path;

use super::*;
use crate::hooks::{hooks_file, logged, script};

/// The project under `home` gets a `before_prompt` hook that records into the project's
/// `hook-log.jsonl` (inside the session's sandbox, where hook commands may write).
fn project_with_hook(home: &Path) -> PathBuf {
    let project = home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let log = project.join("hook-log.jsonl");
    let record = script(home, "record.sh", &log, "exit 0");
    hooks_file(
        &project.join(".gjc").join("hooks.json"),
        json!([{"event": "before_prompt", "command": record}]),
    );
    log
}

fn turns() -> Value {
    json!({"turns": [
        {"content": [{"type": "text", "text": "one"}]},
        {"content": [{"type": "text", "text": "two"}]},
        {"content": [{"type": "text", "text": "three"}]}
    ]})
}

/// Initialized (taking notices), with a new session in its own folder: the session id.
fn open(g: &mut Acp) -> String {
    g.initialize(json!({"session": {"notices": {}}}));
    g.new_session()
}

fn ask(g: &mut Acp) -> Value {
    let seen = g.until(|m| m["method"] == "session/request_permission");
    let ask = seen.last().unwrap().clone();
    let params = &ask["params"];
    let options: Vec<&str> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["allow_always", "reject_once", "reject_always"]);
    let project = g.project.display().to_string();
    assert!(
        params["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains(&project),
        "{ask}"
    );
    assert_eq!(
        params["toolCall"]["locations"][0]["path"],
        g.project.join(".gjc/hooks.json").display().to_string()
    );
    ask
}

fn choose(g: &mut Acp, ask: &Value, option: &str) {
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": option}}),
    );
}

/// One prompt to its end; the messages before its answer.
fn prompt_once(g: &mut Acp, session: &str) -> Vec<Value> {
    let id = g.prompt(session, "go");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    before
}

fn events(log: &Path) -> Vec<String> {
    logged(log)
        .iter()
        .map(|e| e["event"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn second_process(g: &mut Acp) -> Acp {
    assert!(g.close_and_wait().is_some());
    let home = std::mem::replace(&mut g.home, tempfile::tempdir().unwrap());
    spawn_in(home, turns())
}

#[test]
fn trusting_in_the_editor_loads_the_hooks_and_is_remembered() {
    let home = tempfile::tempdir().unwrap();
    let log = project_with_hook(home.path());
    let mut g = spawn_in(home, turns());
    let session = open(&mut g);
    let question = ask(&mut g);
    // Until the answer, the hooks are not loaded.
    prompt_once(&mut g, &session);
    assert!(!log.exists(), "the hooks ran before the answer");
    choose(&mut g, &question, "allow_always");
    prompt_once(&mut g, &session);
    assert_eq!(events(&log), ["before_prompt"]);

    let mut g = second_process(&mut g);
    let session = open(&mut g);
    let before = prompt_once(&mut g, &session);
    assert!(
        before
            .iter()
            .all(|m| m["method"] != "session/request_permission"),
        "asked again: {before:?}"
    );
    assert_eq!(events(&log), ["before_prompt", "before_prompt"]);
}

#[test]
fn refusing_in_the_editor_skips_the_hooks_with_a_notice_and_is_remembered() {
    let home = tempfile::tempdir().unwrap();
    let log = project_with_hook(home.path());
    let mut g = spawn_in(home, turns());
    let session = open(&mut g);
    let question = ask(&mut g);
    choose(&mut g, &question, "reject_always");
    let before = prompt_once(&mut g, &session);
    let notice = updates(&before)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "notice")
        .expect("a notice that the hooks are skipped");
    assert!(
        notice["title"].as_str().unwrap().contains("not trusted"),
        "{notice}"
    );
    assert!(!log.exists(), "a refused project's hooks ran");

    // Remembered: the next process does not ask, and says again that they are skipped.
    let mut g = second_process(&mut g);
    let session = open(&mut g);
    let before = prompt_once(&mut g, &session);
    assert!(before
        .iter()
        .all(|m| m["method"] != "session/request_permission"));
    assert!(updates(&before)
        .iter()
        .any(|u| u["sessionUpdate"] == "notice"));
    assert!(!log.exists());
}
