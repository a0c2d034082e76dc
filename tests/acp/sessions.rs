//! ACP session management against the fake provider: a session in another folder, and
//! `session/list`, `session/resume`, `session/close`, `session/delete`.

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{
    CloseSessionResponse, DeleteSessionResponse, ListSessionsResponse, ResumeSessionResponse,
};

use super::*;
use crate::support::fake_provider::{openai_text, openai_tool_call, sse_events};
use crate::support::gjc::write_models_json;
use crate::support::{Chunk, FakeProvider, Reply};

fn fake_in(home: tempfile::TempDir, fake: &FakeProvider) -> Acp {
    let agent = home.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    write_models_json(&agent, &fake.base_url);
    spawn_with(home, &["--provider", "fake-openai", "--model", "m"])
}

fn fake_acp(fake: &FakeProvider) -> Acp {
    fake_in(tempfile::tempdir().unwrap(), fake)
}

/// A folder beside the project, canonical as gjc reports it.
fn folder(g: &Acp, name: &str) -> PathBuf {
    let dir = g.home.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// `session/new` in `cwd`: the session id, and what came with and right after the answer.
fn open_in(g: &mut Acp, cwd: &Path) -> (String, Vec<Value>) {
    let id = g.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let (response, mut seen) = g.response(id);
    assert!(response.get("error").is_none(), "{response}");
    seen.extend(g.until(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update"));
    let session: NewSessionResponse = serde_json::from_value(response["result"].clone()).unwrap();
    (session.session_id.0.to_string(), seen)
}

fn allow_all(g: &mut Acp, session: &str) {
    let set = g.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "permissions", "value": "allow_all"}),
    );
    g.result(set);
}

/// One prompt answered by one text reply.
fn exchange(g: &mut Acp, fake: &FakeProvider, session: &str, text: &str, reply: &str) {
    fake.push(Reply::sse(openai_text(&[reply])));
    let id = g.prompt(session, text);
    assert_eq!(g.stop_reason(id).0, "end_turn");
    fake.request(TIMEOUT);
}

/// The session file of `session` under the agent's sessions folder.
fn session_file(g: &Acp, session: &str) -> Option<PathBuf> {
    let suffix = format!("_{session}.jsonl");
    let root = g.home.path().join("agent").join("sessions");
    std::fs::read_dir(root)
        .ok()?
        .flatten()
        .flat_map(|dir| {
            std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|f| f.path())
        .find(|p| p.to_string_lossy().ends_with(&suffix))
}

fn error_code(g: &mut Acp, id: i64) -> (i64, Value) {
    let (response, _) = g.response(id);
    let code = response["error"]["code"].as_i64().unwrap_or_default();
    (code, response["error"]["data"].clone())
}

#[test]
fn a_session_in_another_folder_works_and_is_stored_there() {
    let fake = FakeProvider::start();
    let mut g = fake_acp(&fake);
    let other = folder(&g, "other");
    std::fs::write(other.join("AGENTS.md"), "Other project: indent with tabs.").unwrap();
    let skill = other.join(".gjc/skills/deploy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: deploy\ndescription: Ship it\n---\nSteps.",
    )
    .unwrap();
    std::fs::create_dir_all(other.join(".gjc/rules")).unwrap();
    std::fs::write(
        other.join(".gjc/rules/tabs.md"),
        "---\nalwaysApply: true\n---\nTabs, never spaces.",
    )
    .unwrap();
    let hook = other.join("hook.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncat >/dev/null\necho '{\"addContext\": \"said by the other folder\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        other.join(".gjc/hooks.json"),
        json!({"hooks": [{"event": "before_prompt", "command": "hook.sh"}]}).to_string(),
    )
    .unwrap();
    g.initialize(json!({}));

    for (cwd, wanted) in [
        ("relative/dir", "absolute"),
        ("/no/such/folder", "/no/such"),
    ] {
        let id = g.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let (code, data) = error_code(&mut g, id);
        assert_eq!(code, -32602, "{cwd}: {data}");
        assert!(data.as_str().unwrap().contains(wanted), "{data}");
    }

    let (session, seen) = open_in(&mut g, &other);
    let commands = updates(&seen)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "available_commands_update")
        .unwrap();
    assert!(
        commands["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "deploy"),
        "the folder's skills are offered: {commands}"
    );
    // The folder's hooks run once the editor trusts it, which gjc asks right after.
    let seen = g.until(|m| m["method"] == "session/request_permission");
    let ask = seen.last().unwrap();
    g.answer(
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}}),
    );
    allow_all(&mut g, &session);
    let calls = [
        ("c1", "bash", json!({"command": "pwd"})),
        (
            "c2",
            "write",
            json!({"path": "made.txt", "content": "here\n"}),
        ),
    ];
    for (id, tool, args) in calls {
        fake.push(Reply::sse(openai_tool_call(id, tool, &args)));
    }
    fake.push(Reply::sse(openai_text(&["done"])));
    let id = g.prompt(&session, "where are you?");
    let (reason, before) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");

    let first = fake.request(TIMEOUT);
    let system = first.body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("Other project: indent with tabs."),
        "{system}"
    );
    assert!(
        system.contains(&format!("Current working directory: {}", other.display())),
        "{system}"
    );
    assert!(system.contains("Tabs, never spaces."), "{system}");
    assert!(
        first.body["messages"]
            .to_string()
            .contains("said by the other folder"),
        "the folder's before_prompt hook ran: {}",
        first.body["messages"]
    );
    let ups = updates(&before);
    let pwd = ups
        .iter()
        .find(|u| u["toolCallId"] == "c1" && u["status"] == "completed")
        .expect("pwd completed");
    assert_eq!(first_text(pwd).trim(), other.display().to_string());
    let write = ups
        .iter()
        .find(|u| u["toolCallId"] == "c2" && u["sessionUpdate"] == "tool_call")
        .expect("write announced");
    assert_eq!(
        write["locations"][0]["path"],
        other.join("made.txt").display().to_string()
    );
    assert_eq!(
        std::fs::read_to_string(other.join("made.txt")).unwrap(),
        "here\n"
    );
    assert!(!g.project.join("made.txt").exists());

    let file = session_file(&g, &session).expect("session file");
    let dir = file
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy();
    assert!(
        dir.ends_with("-other") || dir.ends_with("-other--"),
        "stored in the folder of its cwd: {}",
        file.display()
    );
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["cwd"], other.display().to_string());
}

#[test]
fn list_shows_stored_sessions_by_folder_and_in_pages() {
    let fake = FakeProvider::start();
    let mut g = fake_acp(&fake);
    let init = serde_json::to_value(g.initialize(json!({}))).unwrap();
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}})
    );
    let project = g.project.clone();
    let other = folder(&g, "other");
    let (here, _) = open_in(&mut g, &project);
    exchange(&mut g, &fake, &here, "first", "one");
    let (there, _) = open_in(&mut g, &other);
    exchange(&mut g, &fake, &there, "second", "two");

    let list = |g: &mut Acp, params: Value| -> ListSessionsResponse {
        let id = g.request("session/list", params);
        serde_json::from_value(g.result(id)).unwrap()
    };
    let all = list(&mut g, json!({}));
    let ids: Vec<String> = all
        .sessions
        .iter()
        .map(|s| s.session_id.0.to_string())
        .collect();
    // File times are as coarse as the kernel's clock tick, so the two may tie: the order of
    // the pages is checked in the unit tests.
    assert_eq!(ids.len(), 2, "{ids:?}");
    for (id, cwd) in [(&here, &project), (&there, &other)] {
        let info = all.sessions.iter().find(|s| *s.session_id.0 == **id);
        assert_eq!(info.map(|s| &s.cwd), Some(cwd), "{id}");
    }
    assert!(all.sessions.iter().all(|s| s.updated_at.is_some()));
    assert_eq!(all.next_cursor, None);
    let filtered = list(&mut g, json!({"cwd": other}));
    assert_eq!(filtered.sessions.len(), 1);
    assert_eq!(filtered.sessions[0].session_id.0.as_ref(), there);

    let id = g.request("session/list", json!({"cwd": "other"}));
    assert_eq!(error_code(&mut g, id).0, -32602);
    let id = g.request("session/list", json!({"cursor": "not-a-cursor"}));
    assert_eq!(error_code(&mut g, id).0, -32602);

    // Many sessions of one folder come in pages; only their header lines are read.
    let elsewhere = g.home.path().join("agent/sessions/--elsewhere--");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for i in 0..55 {
        let header = json!({"type": "session", "version": 3, "id": format!("s{i:02}"),
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/elsewhere", "title": format!("T{i}")});
        std::fs::write(
            elsewhere.join(format!("2026-01-01T00-00-00-000Z_s{i:02}.jsonl")),
            format!("{header}\n"),
        )
        .unwrap();
    }
    let first = list(&mut g, json!({"cwd": "/elsewhere"}));
    assert_eq!(first.sessions.len(), 50);
    assert!(first.sessions.iter().all(|s| s.title.is_some()));
    let cursor = first.next_cursor.clone().expect("a second page");
    let second = list(&mut g, json!({"cwd": "/elsewhere", "cursor": cursor}));
    assert_eq!(second.sessions.len(), 5);
    assert_eq!(second.next_cursor, None);
    let mut seen: Vec<String> = first
        .sessions
        .iter()
        .chain(&second.sessions)
        .map(|s| s.session_id.0.to_string())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 55, "every session once");
}

#[test]
fn resume_then_prompt_continues_the_history_without_replaying_it() {
    let fake = FakeProvider::start();
    let mut first = fake_acp(&fake);
    first.initialize(json!({}));
    let session = first.new_session();
    exchange(
        &mut first,
        &fake,
        &session,
        "remember the number 7",
        "noted",
    );
    assert!(first.close_and_wait().is_some());
    let home = std::mem::replace(&mut first.home, tempfile::tempdir().unwrap());
    drop(first);

    let mut g = fake_in(home, &fake);
    g.initialize(json!({}));
    let id = g.request(
        "session/resume",
        json!({"sessionId": "no-such-session", "cwd": g.project}),
    );
    let (code, data) = error_code(&mut g, id);
    assert_eq!(
        (code, data),
        (-32002, json!({"sessionId": "no-such-session"}))
    );
    let id = g.request(
        "session/resume",
        json!({"sessionId": session, "cwd": g.project}),
    );
    let (response, before) = g.response(id);
    let resumed: ResumeSessionResponse =
        serde_json::from_value(response["result"].clone()).unwrap();
    assert!(resumed.modes.is_some());
    assert!(
        updates(&before).is_empty(),
        "resume replays nothing: {before:?}"
    );
    fake.push(Reply::sse(openai_text(&["7"])));
    let id = g.prompt(&session, "which number?");
    assert_eq!(g.stop_reason(id).0, "end_turn");
    let request = fake.request(TIMEOUT);
    let contents: Vec<String> = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].to_string())
        .collect();
    let all = contents.join("\n");
    for said in ["remember the number 7", "noted", "which number?"] {
        assert!(all.contains(said), "{said} missing from {all}");
    }
}

#[test]
fn close_mid_run_cancels_it_and_forgets_the_session() {
    let fake = FakeProvider::start();
    let mut g = fake_acp(&fake);
    g.initialize(json!({}));
    let session = g.new_session();
    let partial =
        json!({"choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]});
    fake.push(Reply::sse_chunks(vec![
        Chunk::Bytes(sse_events(&[partial], false).into_bytes()),
        Chunk::Stall,
    ]));
    let prompt = g.prompt(&session, "talk");
    g.until(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let close = g.request("session/close", json!({"sessionId": session}));
    let (reason, _) = g.stop_reason(prompt);
    assert_eq!(reason, "cancelled");
    let (response, _) = g.response(close);
    let _: CloseSessionResponse = serde_json::from_value(response["result"].clone())
        .unwrap_or_else(|e| panic!("not a close response ({e}): {response}"));
    let id = g.prompt(&session, "still there?");
    let (code, data) = error_code(&mut g, id);
    assert_eq!((code, data), (-32002, json!({"sessionId": session})));
    let id = g.request("session/close", json!({"sessionId": session}));
    assert_eq!(error_code(&mut g, id).0, -32002);
    let id = g.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    );
    assert_eq!(error_code(&mut g, id).0, -32002);
    // A new session is served after it.
    let next = g.new_session();
    assert_ne!(next, session);
    exchange(&mut g, &fake, &next, "hello", "hi");
}

#[test]
fn delete_removes_the_stored_session_and_a_later_load_is_not_found() {
    let fake = FakeProvider::start();
    let mut g = fake_acp(&fake);
    g.initialize(json!({}));
    let session = g.new_session();
    exchange(&mut g, &fake, &session, "keep this?", "maybe");
    let file = session_file(&g, &session).expect("stored");

    let id = g.request("session/delete", json!({"sessionId": session}));
    let (code, data) = error_code(&mut g, id);
    assert_eq!(code, -32600, "the open session is refused: {data}");
    assert!(data.as_str().unwrap().contains("session/close"), "{data}");
    assert!(file.exists());

    let close = g.request("session/close", json!({"sessionId": session}));
    g.result(close);
    let id = g.request("session/delete", json!({"sessionId": session}));
    let _: DeleteSessionResponse = serde_json::from_value(g.result(id)).unwrap();
    assert!(!file.exists());

    let id = g.request(
        "session/load",
        json!({"sessionId": session, "cwd": g.project, "mcpServers": []}),
    );
    let (code, data) = error_code(&mut g, id);
    assert_eq!((code, data), (-32002, json!({"sessionId": session})));
    let id = g.request("session/delete", json!({"sessionId": session}));
    assert_eq!(error_code(&mut g, id).0, -32002);
    let id = g.request("session/list", json!({}));
    let list: ListSessionsResponse = serde_json::from_value(g.result(id)).unwrap();
    assert!(list.sessions.is_empty(), "{:?}", list.sessions);
}

#[test]
fn ids_that_are_paths_are_refused_and_nothing_outside_the_agent_dir_is_deleted() {
    let mut g = acp(json!({"turns": []}));
    g.initialize(json!({}));
    let outside = g.home.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let dir = g.home.path().join("agent/sessions/--crafted--");
    std::fs::create_dir_all(&dir).unwrap();
    // From `<agent>/sessions/--crafted--/workflow-gates`, four levels up is the home.
    let ids = [
        outside.join("victim").display().to_string(),
        "../../../../outside/victim".to_string(),
    ];
    for (n, id) in ids.iter().enumerate() {
        std::fs::write(outside.join("victim.json"), "keep").unwrap();
        let file = dir.join(format!("2026-01-01T00-00-0{n}-000Z_c{n}.jsonl"));
        let header = json!({"type": "session", "version": 3, "id": id,
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": g.project});
        std::fs::write(&file, format!("{header}\n")).unwrap();
        for method in ["session/delete", "session/load", "session/resume"] {
            let params = match method {
                "session/delete" => json!({"sessionId": id}),
                _ => json!({"sessionId": id, "cwd": g.project, "mcpServers": []}),
            };
            let request = g.request(method, params);
            let (code, data) = error_code(&mut g, request);
            assert_eq!(code, -32602, "{method} {id}: {data}");
            assert!(
                data.as_str().unwrap().contains("invalid sessionId"),
                "{data}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("victim.json")).unwrap(),
            "keep"
        );
        assert!(file.exists(), "{} was left alone", file.display());
    }
    let id = g.request("session/list", json!({}));
    let list: ListSessionsResponse = serde_json::from_value(g.result(id)).unwrap();
    assert!(list.sessions.is_empty(), "{:?}", list.sessions);
}
