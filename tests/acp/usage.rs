//! After each prompt turn, before its answer, the editor learns how full the context is and what
//! the session has cost (`usage_update`), and its title once it has one (`session_info_update`).

use serde_json::{json, Value};

use super::{spawn_with, updates, Acp};
use crate::support::fake_provider::openai_text;
use crate::support::{FakeProvider, Reply};

/// Runs one prompt and returns the updates of kind `kind` sent before its answer.
fn turn(g: &mut Acp, session: &str, kind: &str) -> Vec<Value> {
    let id = g.prompt(session, "hi");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    updates(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// The session file's header line gets a title, as a name given earlier would have left it.
fn name_stored_session(agent: &std::path::Path, title: &str) {
    let sessions = agent.join("sessions");
    let folder = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let file = std::fs::read_dir(folder.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let text = std::fs::read_to_string(file.path()).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(header).unwrap();
    header["title"] = json!(title);
    std::fs::write(file.path(), format!("{header}\n{rest}")).unwrap();
}

#[test]
fn each_turn_reports_usage_cost_and_title_before_its_answer() {
    let fake = FakeProvider::start();
    for _ in 0..2 {
        fake.push(Reply::sse(openai_text(&["Hello", " there"])));
    }
    let home = tempfile::tempdir().unwrap();
    let agent = home.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    crate::support::gjc::write_models_json(&agent, &fake.base_url);
    let mut g = spawn_with(home, &["--provider", "fake-openai", "--model", "m"]);
    g.initialize(json!({}));
    let session = g.new_session();

    // 10 prompt and 5 completion tokens, priced at 3 and 15 USD per million; no title yet.
    let usage = turn(&mut g, &session, "usage_update");
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(
        (&usage[0]["used"], &usage[0]["size"]),
        (&json!(15), &json!(100000))
    );
    assert_eq!(usage[0]["cost"]["currency"], "USD");
    let first_cost = usage[0]["cost"]["amount"].as_f64().unwrap();
    assert!((first_cost - 0.000105).abs() < 1e-12, "{first_cost}");

    // Loaded with a name: the history's cost counts, and the title is sent after the turn. A
    // live session is served as it is, so the session is closed (its actor gone, the last sign
    // of which is its registry record) before its file is named behind gjc's back.
    let close = g.request("session/close", json!({"sessionId": session}));
    assert_eq!(g.result(close), json!({}));
    let record = agent.join("rpc-sessions").join(format!("{session}.json"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while record.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the closed session stayed registered"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    name_stored_session(&agent, "Named session");
    let id = g.request(
        "session/load",
        json!({"sessionId": session, "cwd": g.project, "mcpServers": []}),
    );
    let (response, _) = g.response(id);
    assert!(response.get("error").is_none(), "{response}");
    let id = g.prompt(&session, "again");
    let (_, before) = g.stop_reason(id);
    let ups = updates(&before);
    let usage: Vec<_> = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    assert_eq!(usage.len(), 1, "{ups:?}");
    let total = usage[0]["cost"]["amount"].as_f64().unwrap();
    assert!((total - 2.0 * first_cost).abs() < 1e-12, "{total}");
    let info: Vec<_> = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "session_info_update")
        .collect();
    assert_eq!(info.len(), 1, "{ups:?}");
    assert_eq!(info[0]["title"], "Named session");
}
