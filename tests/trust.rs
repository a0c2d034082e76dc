//! A project's own hooks (`.gjc/hooks.json`) run only once the project is trusted: skipped and
//! reported until then, loaded at once by `trust_project`, trusted from the start with
//! `--trust-project`, remembered in the agent dir for later processes, and a trust store that
//! is not a plain private file trusts nothing without stopping gjc.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::hooks::{hooks_file, logged, say, script};
use crate::support::{gjc, Gjc, TIMEOUT};

/// An agent dir and a project whose `.gjc/hooks.json` records `session_start` and
/// `before_prompt` in `log`.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(dir.path().join("agent")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let log = dir.path().join("log.jsonl");
        let record = script(&project, "record.sh", &log, "exit 0");
        hooks_file(
            &project.join(".gjc").join("hooks.json"),
            json!([
                {"event": "session_start", "command": record},
                {"event": "before_prompt", "command": record}
            ]),
        );
        Setup { dir }
    }

    fn agent(&self) -> PathBuf {
        self.dir.path().join("agent")
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project").canonicalize().unwrap()
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("log.jsonl")
    }

    fn store(&self) -> PathBuf {
        self.agent().join("trusted-projects.json")
    }

    /// gjc in the project with this agent dir (shared by every process of the test).
    fn spawn(&self, extra: &[&str]) -> Gjc {
        let project = self.project();
        let mut args = vec!["--cwd", project.to_str().unwrap()];
        args.extend_from_slice(extra);
        gjc()
            .env("GJC_CODING_AGENT_DIR", self.agent().to_str().unwrap())
            .script(json!({"turns": [say("one"), say("two"), say("three")]}))
            .args(&args)
            .spawn()
    }

    /// The events the hooks logged.
    fn events(&self) -> Vec<String> {
        logged(&self.log())
            .iter()
            .map(|e| e["event"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Waits (bounded) until the hooks logged `n` events.
    fn wait_events(&self, n: usize) {
        let deadline = Instant::now() + TIMEOUT;
        while self.events().len() < n {
            assert!(
                Instant::now() < deadline,
                "hooks logged {:?}",
                self.events()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The `extension_error` saying the project's hooks were skipped.
fn skipped(g: &mut Gjc, project: &Path) -> Value {
    let err = g
        .client
        .wait_for(|f| f["type"] == "extension_error", TIMEOUT)
        .expect("extension_error frame");
    assert_eq!(err["event"], "load", "{err}");
    let file = project.join(".gjc").join("hooks.json");
    assert_eq!(err["extensionPath"], file.display().to_string(), "{err}");
    let error = err["error"].as_str().unwrap();
    assert!(error.contains("not trusted"), "{err}");
    assert!(
        error.contains("--trust-project") && error.contains("trust_project"),
        "says how to trust it: {err}"
    );
    err
}

fn trusted(g: &mut Gjc) -> bool {
    g.ok(json!({"type": "get_state"}))["projectTrusted"]
        .as_bool()
        .expect("get_state.projectTrusted")
}

/// A prompt that runs to its end (its `before_prompt` hooks, if loaded, ran before the reply).
fn prompt(g: &mut Gjc) {
    g.ok(json!({"type": "prompt", "message": "go"}));
    assert_eq!(g.event("agent_end")["outcome"], "completed");
}

#[test]
fn a_projects_hooks_are_skipped_until_trusted() {
    let s = Setup::new();
    let mut g = s.spawn(&[]);
    skipped(&mut g, &s.project());
    assert!(!trusted(&mut g));
    prompt(&mut g);
    assert!(
        !s.log().exists(),
        "an untrusted project's hooks ran: {:?}",
        s.events()
    );

    // A folder that is not one is refused, and changes nothing.
    let bad = g.request(json!({"type": "trust_project", "cwd": "relative/dir"}));
    assert_eq!(bad["success"], false, "{bad}");
    assert!(bad["error"].as_str().unwrap().contains("absolute"), "{bad}");
    assert!(!s.store().exists());

    let data = g.ok(json!({"type": "trust_project"}));
    assert_eq!(
        data,
        json!({"cwd": s.project().display().to_string(), "trusted": true})
    );
    assert!(trusted(&mut g));
    prompt(&mut g);
    // Loaded at once for the events that follow; `session_start` stays once per process.
    assert_eq!(s.events(), ["before_prompt"]);

    // Revoked: dropped at once, reported again, and remembered.
    let data = g.ok(json!({"type": "trust_project", "trusted": false}));
    assert_eq!(data["trusted"], false);
    skipped(&mut g, &s.project());
    assert!(!trusted(&mut g));
    prompt(&mut g);
    assert_eq!(s.events(), ["before_prompt"]);
    assert!(g.close_and_wait().is_some());
    let mut again = s.spawn(&[]);
    skipped(&mut again, &s.project());
    assert!(!trusted(&mut again));
}

#[test]
fn trust_project_flag_trusts_and_is_remembered_across_processes() {
    let s = Setup::new();
    let mut g = s.spawn(&["--trust-project"]);
    s.wait_events(1);
    assert_eq!(s.events(), ["session_start"]);
    assert!(trusted(&mut g));
    assert!(g.close_and_wait().is_some());

    let meta = std::fs::symlink_metadata(s.store()).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "private");
    let stored: Value = serde_json::from_slice(&std::fs::read(s.store()).unwrap()).unwrap();
    assert_eq!(
        stored["trusted"],
        json!([s.project().display().to_string()])
    );

    // A later process with the same agent dir, without the flag.
    let mut g = s.spawn(&[]);
    s.wait_events(2);
    assert!(trusted(&mut g));
    prompt(&mut g);
    assert_eq!(
        s.events(),
        ["session_start", "session_start", "before_prompt"]
    );
}

/// A trust store that names the project but is not a plain private file trusts nothing: the
/// hooks are skipped, gjc answers at once (a FIFO would block a reader that waits for a writer,
/// `/dev/zero` one that reads to the end), and trusting replaces the store with a regular file.
#[test]
fn a_hostile_trust_store_trusts_nothing_and_gjc_stays_up() {
    for hostile in ["fifo", "symlink to /dev/zero", "garbage JSON"] {
        let s = Setup::new();
        let store = s.store();
        let project = s.project().display().to_string();
        match hostile {
            "fifo" => {
                let c = std::ffi::CString::new(store.to_str().unwrap()).unwrap();
                // SAFETY: a valid C string.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
            "symlink to /dev/zero" => std::os::unix::fs::symlink("/dev/zero", &store).unwrap(),
            _ => std::fs::write(
                &store,
                format!(r#"{{"version":1,"trusted":["{project}"]}} and then garbage"#),
            )
            .unwrap(),
        }
        let mut g = s.spawn(&[]);
        skipped(&mut g, &s.project());
        let asked = Instant::now();
        assert!(!trusted(&mut g), "{hostile}");
        assert!(asked.elapsed() < Duration::from_secs(5), "{hostile}");
        prompt(&mut g);
        assert!(!s.log().exists(), "{hostile}: the hooks ran");

        g.ok(json!({"type": "trust_project"}));
        assert!(trusted(&mut g), "{hostile}");
        prompt(&mut g);
        assert_eq!(s.events(), ["before_prompt"], "{hostile}");
        assert!(std::fs::symlink_metadata(&store).unwrap().is_file());
    }
}

/// A decision that cannot be written (here the lock file's place is taken by a folder) is a
/// failure saying why: `trust_project` fails and trusts nothing, `--trust-project` stops
/// start-up with one line on stderr and nothing on stdout.
#[test]
fn a_decision_that_cannot_be_kept_is_a_clear_failure() {
    let s = Setup::new();
    std::fs::create_dir(s.agent().join("trusted-projects.json.lock")).unwrap();
    let mut g = s.spawn(&[]);
    skipped(&mut g, &s.project());
    let failed = g.request(json!({"type": "trust_project"}));
    assert_eq!(failed["success"], false, "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("trusted-projects.json.lock"),
        "{failed}"
    );
    assert!(!trusted(&mut g));
    prompt(&mut g);
    assert!(!s.log().exists(), "the hooks ran");
    assert!(g.close_and_wait().is_some());

    let project = s.project();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gjc"))
        .args(["--mode", "rpc", "--trust-project", "--cwd"])
        .arg(&project)
        .env("GJC_CODING_AGENT_DIR", s.agent())
        .env("HOME", s.dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("gjc: --trust-project: ") && stderr.contains("lock"),
        "{stderr}"
    );
}
