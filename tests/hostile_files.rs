//! Files planted where gjc reads its configuration and context, and ids that would make paths:
//! a FIFO or a link to `/dev/zero` as any config file is reported and skipped while `ready` and
//! `get_state` stay prompt and memory stays near idle; a session header id that is a path is
//! refused; a link planted as the audit trail is refused. Nothing outside the agent dir changes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{gjc, procfs, Gjc, TIMEOUT};

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[derive(Clone, Copy, Debug)]
enum Plant {
    DevZero,
    Fifo,
}

fn plant(path: &Path, how: Plant) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    match how {
        Plant::DevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        Plant::Fifo => mkfifo(path),
    }
}

/// Every configuration or context file gjc reads when it starts, in the agent dir and project.
fn config_files(agent: &Path, project: &Path) -> Vec<PathBuf> {
    vec![
        agent.join("models.json"),
        agent.join("hooks.json"),
        agent.join("AGENTS.md"),
        agent.join("skills/s/SKILL.md"),
        agent.join("rules/r.md"),
        project.join(".gjc/hooks.json"),
        project.join("AGENTS.md"),
        project.join(".gjc/skills/p/SKILL.md"),
        project.join(".gjc/rules/p.md"),
    ]
}

/// gjc's log so far, waiting (bounded) until it holds every one of `wanted`.
fn log_with(log: &Path, wanted: &[String]) -> String {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if wanted.iter().all(|w| text.contains(w.as_str())) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hostile_config_is_reported_and_skipped(how: Plant) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (agent, project) = (root.join("agent"), root.join("project"));
    let files = config_files(&agent, &project);
    for f in &files {
        plant(f, how);
    }
    let log = root.join("stderr.log");
    let started = Instant::now();
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.to_str().unwrap())
        // Trusted, so the project's hooks file is read (and refused for what it is).
        .args(&["--cwd", project.to_str().unwrap(), "--trust-project"])
        .stderr_file(&log)
        .spawn();
    let ready_after = started.elapsed();
    let asked = Instant::now();
    let state = g.ok(json!({"type": "get_state"}));
    let answered = asked.elapsed();
    let peak_kib = procfs::status_kib(g.client.pid(), "VmHWM").unwrap();
    eprintln!(
        "{how:?}: ready after {ready_after:?}, get_state in {answered:?}, peak RSS {peak_kib} KiB"
    );
    assert!(
        ready_after < Duration::from_secs(10),
        "{how:?}: ready after {ready_after:?}"
    );
    assert!(
        answered < Duration::from_secs(2),
        "{how:?}: get_state took {answered:?}"
    );
    assert!(peak_kib < 96 * 1024, "{how:?}: peak RSS {peak_kib} KiB");

    let refused = "not a regular file";
    let models = state["modelsError"].as_str().unwrap_or_default();
    assert!(
        models.contains("models.json") && models.contains(refused),
        "{state}"
    );
    for hooks in [&files[1], &files[5]] {
        let path = hooks.display().to_string();
        let err = g
            .client
            .wait_for(
                |f| f["type"] == "extension_error" && f["extensionPath"] == path.as_str(),
                TIMEOUT,
            )
            .unwrap_or_else(|e| panic!("{how:?}: no extension_error for {path}: {e}"));
        assert_eq!(err["event"], "load");
        assert!(err["error"].as_str().unwrap().contains(refused), "{err}");
    }
    let wanted: Vec<String> = [
        ("context file", &files[2]),
        ("skill file", &files[3]),
        ("rule", &files[4]),
        ("context file", &files[6]),
        ("skill file", &files[7]),
        ("rule", &files[8]),
    ]
    .iter()
    .map(|(what, f)| format!("{what} {}: {refused}", f.display()))
    .collect();
    let text = log_with(&log, &wanted);
    for w in &wanted {
        assert!(
            text.contains(w.as_str()),
            "{how:?}: {w:?} not logged:\n{text}"
        );
    }
    // Still answering, and nothing was taken from the planted files.
    let again = g.ok(json!({"type": "get_state"}));
    assert_eq!(again["sessionId"], state["sessionId"]);
    assert!(g.close_and_wait().is_some());
}

#[test]
fn links_to_dev_zero_as_every_config_file_are_reported_and_skipped() {
    hostile_config_is_reported_and_skipped(Plant::DevZero);
}

#[test]
fn fifos_as_every_config_file_are_reported_and_skipped() {
    hostile_config_is_reported_and_skipped(Plant::Fifo);
}

/// A session file in the session's own folder whose header carries `id`.
fn crafted_session(g: &mut Gjc, n: usize, id: &str) -> PathBuf {
    let current = g.ok(json!({"type": "get_state"}))["sessionFile"]
        .as_str()
        .map(PathBuf::from)
        .expect("sessionFile");
    let dir = current.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("2026-01-01T00-00-0{n}-000Z_crafted{n}.jsonl"));
    let header = json!({"type": "session", "version": 3, "id": id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": g.project.canonicalize().unwrap()});
    std::fs::write(&path, format!("{header}\n")).unwrap();
    path
}

#[test]
fn a_session_header_id_that_is_a_path_is_refused_and_nothing_outside_is_written() {
    let mut g = gjc()
        .script(json!({"turns": [{"content": [{"type": "text", "text": "A plan."}]}]}))
        .spawn();
    let outside = g.home.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim.json"), "keep").unwrap();
    // From the gate store's folder (`<agent>/sessions/<folder>/workflow-gates`), four levels up
    // is the temporary home that holds `outside`.
    let ids = [
        outside.join("victim").display().to_string(),
        "../../../../outside/victim".to_string(),
    ];
    let mut crafted = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let path = crafted_session(&mut g, n, id);
        let r = g.request(json!({"type": "switch_session", "sessionPath": path}));
        assert_eq!(r["success"], false, "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(error.contains("invalid header id"), "{error}");
        crafted.push(path.display().to_string());
    }
    let listed = g.ok(json!({"type": "list_sessions", "all": true}));
    let paths: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["path"].as_str())
        .collect();
    assert!(
        crafted.iter().all(|c| !paths.contains(&c.as_str())),
        "{listed}"
    );
    // A workflow stage writes the gate store of the session gjc still serves, in its folder.
    g.ok(json!({"type": "prompt", "message": "/ralplan add a cache"}));
    g.run_events();
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.json")).unwrap(),
        "keep"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    for c in &crafted {
        assert!(Path::new(c).exists(), "{c} was left alone");
    }
}

fn negotiate() -> Value {
    json!({"type": "negotiate_unattended", "declaration": {"actor": "ci/runner",
        "budget": {"max_tokens": 1000, "max_tool_calls": 10, "max_wall_time_ms": 60000, "max_cost_usd": 5},
        "scopes": ["prompt"], "action_allowlist": []}})
}

#[test]
fn a_link_planted_as_the_audit_trail_is_refused() {
    let mut g = gjc().script(json!({"turns": []})).spawn();
    g.ok(negotiate());
    let trail = crate::unattended::audit_files(&g).remove(0);
    let outside = g.home.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim"), "").unwrap();
    std::fs::remove_file(&trail).unwrap();
    std::os::unix::fs::symlink(outside.join("victim"), &trail).unwrap();
    let r = g.request(negotiate());
    assert_eq!(r["success"], false, "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.starts_with("unattended_audit_unavailable"), "{error}");
    assert!(error.contains("symbolic link"), "{error}");
    assert_eq!(std::fs::read_to_string(outside.join("victim")).unwrap(), "");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
}
