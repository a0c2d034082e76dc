//! `before_prompt` hooks: the payload, the context they add (carried by the next model request),
//! each failure mode (reported, the prompt still runs), and abort while one runs (instant, the
//! hook killed, nothing sent to the model), with `get_state` answered meanwhile.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::hooks::{hook_pid, hooks_file, logged, say, script, slow_script, wait_gone};
use crate::support::fake_provider::openai_text;
use crate::support::{gjc, types, FakeProvider, Gjc, Reply, TIMEOUT};

/// A project folder whose `.gjc/hooks.json` is written by `setup(folder, log)`; gjc trusts it
/// (`--trust-project`), so its hooks load.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(setup: impl FnOnce(&Path, &Path) -> Value) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let hooks = setup(dir.path(), &dir.path().join("log.jsonl"));
        hooks_file(&dir.path().join(".gjc").join("hooks.json"), hooks);
        Project { dir }
    }

    fn cwd(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("log.jsonl")
    }

    fn with_fake(&self, fake: &FakeProvider) -> Gjc {
        let cwd = self.cwd();
        gjc()
            .provider(&fake.base_url)
            .args(&["--provider", "fake-openai", "--model", "m", "--cwd", &cwd])
            .args(&["--trust-project"])
            .spawn()
    }

    fn scripted(&self, turns: Value) -> Gjc {
        gjc()
            .script(json!({ "turns": turns }))
            .args(&["--cwd", &self.cwd(), "--trust-project"])
            .spawn()
    }
}

fn prompt_hook(command: &Path, timeout_ms: u64) -> Value {
    json!({"event": "before_prompt", "command": command, "timeoutMs": timeout_ms})
}

/// The frames up to `agent_end`, top-level ones (`extension_error`) as they are, events as
/// their inner event.
fn run_frames(g: &mut Gjc) -> Vec<Value> {
    g.client
        .collect_until(
            |f| f["type"] == "event" && f["payload"]["event_type"] == "agent_end",
            TIMEOUT,
        )
        .expect("agent_end")
        .into_iter()
        .filter(|f| f["type"] != "response")
        .map(|f| {
            if f["type"] == "event" {
                f["payload"]["event"].clone()
            } else {
                f
            }
        })
        .collect()
}

#[test]
fn before_prompt_adds_context_that_the_next_request_carries() {
    let project = Project::new(|dir, log| {
        let add = script(
            dir,
            "context.sh",
            log,
            r#"echo '{"addContext":"The build is red on main.","ignored":true}'"#,
        );
        json!([prompt_hook(&add, 5000)])
    });
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_text(&["Looking."])));
    fake.push(Reply::sse(openai_text(&["Again."])));
    let mut g = project.with_fake(&fake);
    g.ok(json!({"type": "prompt", "message": "why is CI failing?"}));
    let events = g.run_events();
    let kinds = types(&events);
    assert_eq!(
        &kinds[..6],
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end"
        ],
        "{kinds:?}"
    );
    assert_eq!(
        events[3]["message"]["content"][0]["text"],
        "why is CI failing?"
    );
    let context = &events[5]["message"];
    assert_eq!(context["role"], "user");
    assert_eq!(context["attribution"], "agent");
    assert_eq!(
        context["content"][0]["text"],
        "<system-reminder>\nThe build is red on main.\n</system-reminder>"
    );

    let payloads = logged(&project.log());
    assert_eq!(payloads.len(), 1);
    let p = &payloads[0];
    assert_eq!(p["event"], "before_prompt");
    assert_eq!(p["command"], "prompt");
    assert_eq!(p["message"], "why is CI failing?");
    assert_eq!(p["imageCount"], 0);
    assert_eq!(p["cwd"], project.cwd());
    let session = g.ok(json!({"type": "get_state"}))["sessionId"].clone();
    assert_eq!(p["sessionId"], session);

    let request = fake.request(TIMEOUT);
    let sent = request.body["messages"].as_array().unwrap();
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "user"], "{sent:?}");
    assert!(sent[2]["content"]
        .to_string()
        .contains("The build is red on main."));
    // Stored in the session: the context stays for later requests.
    let stored = g.messages();
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[1]["attribution"], "agent");

    // A queued message continuing the idle session does not fire it.
    g.ok(json!({"type": "follow_up", "message": "and now?"}));
    assert_eq!(g.event("agent_end")["outcome"], "completed");
    assert_eq!(logged(&project.log()).len(), 1, "follow_up fired the hook");
    let second = fake.request(TIMEOUT);
    assert!(second
        .body
        .to_string()
        .contains("The build is red on main."));
}

#[test]
fn each_failing_before_prompt_hook_is_reported_and_the_prompt_still_runs() {
    let project = Project::new(|dir, log| {
        let exits = script(dir, "exits.sh", log, "echo broken >&2; exit 3");
        let junk = script(dir, "junk.sh", log, "echo not json");
        let stuck = script(dir, "stuck.sh", log, "sleep 1000");
        let wrong = script(dir, "wrong.sh", log, r#"echo '{"addContext":7}'"#);
        json!([
            prompt_hook(&exits, 5000),
            prompt_hook(&junk, 5000),
            prompt_hook(&stuck, 300),
            prompt_hook(&wrong, 5000)
        ])
    });
    let started = Instant::now();
    let mut g = project.scripted(json!([say("answered")]));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let frames = run_frames(&mut g);
    let errors: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "extension_error")
        .collect();
    let said: Vec<&str> = errors
        .iter()
        .map(|e| e["error"].as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 4, "{said:?}");
    assert!(errors.iter().all(|e| e["event"] == "before_prompt"));
    assert_eq!(said[0], "exited with status 3: broken");
    assert!(said[1].starts_with("printed invalid JSON"), "{said:?}");
    assert_eq!(said[2], "timed out after 300 ms and was killed");
    assert_eq!(said[3], "addContext must be a string");
    assert!(errors[2]["extensionPath"]
        .as_str()
        .unwrap()
        .ends_with("stuck.sh"));
    // Reported before the turn starts, then the prompt runs as if the hooks had allowed it.
    let first_turn = frames
        .iter()
        .position(|f| f["type"] == "turn_start")
        .unwrap();
    let last_error = frames
        .iter()
        .rposition(|f| f["type"] == "extension_error")
        .unwrap();
    assert!(last_error < first_turn);
    assert_eq!(frames.last().unwrap()["outcome"], "completed");
    let stored = g.messages();
    assert_eq!(stored.len(), 2, "the prompt and the reply, no context");
    assert_eq!(stored[1]["content"][0]["text"], "answered");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn abort_during_a_slow_before_prompt_hook_kills_it_and_nothing_runs() {
    let project = Project::new(|dir, log| json!([prompt_hook(&slow_script(dir, log), 600_000)]));
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_text(&["never"])));
    let mut g = project.with_fake(&fake);
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("agent_start");
    let pidfile = project.dir.path().join("hook.pid");
    let pid = hook_pid(&pidfile);
    let asked = Instant::now();
    let state = g.ok(json!({"type": "get_state"}));
    assert!(asked.elapsed() < Duration::from_secs(2), "get_state waited");
    assert_eq!(state["isStreaming"], true, "the prompt's run is open");
    // Another prompt meanwhile is refused as busy, as during any run.
    let busy = g.request(json!({"type": "prompt", "message": "second"}));
    assert_eq!(busy["success"], false);

    let asked = Instant::now();
    g.ok(json!({"type": "abort"}));
    let end = g.event("agent_end");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "abort waited for the hook"
    );
    assert_eq!(end["outcome"], "aborted");
    assert_eq!(end["messages"], json!([]));
    wait_gone(pid);
    assert!(g.messages().is_empty(), "the prompt never ran");
    assert_eq!(g.ok(json!({"type": "get_state"}))["isStreaming"], false);
    assert!(fake.try_request().is_none(), "no request reached the model");
}
