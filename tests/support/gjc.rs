//! `Gjc`: the real binary under test, spawned with a temporary HOME, agent dir and project
//! folder, with models.json pointing every API at a fake provider when one is given.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::contract::Contract;
use gjc::client::RpcClient;
use serde_json::{json, Value};

pub const TIMEOUT: Duration = Duration::from_secs(20);

pub struct Gjc {
    pub client: RpcClient,
    pub home: tempfile::TempDir,
    pub project: PathBuf,
    /// Every frame read is checked against the client contract and the published JSON Schemas;
    /// violations fail the test.
    pub contract: Arc<Contract>,
}

impl Drop for Gjc {
    fn drop(&mut self) {
        let violations = self.contract.violations();
        if !violations.is_empty() && !std::thread::panicking() {
            panic!(
                "frames that break the client contract:\n{}",
                violations.join("\n")
            );
        }
    }
}

pub struct GjcBuilder {
    user: Option<(u32, u32)>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    base_url: Option<String>,
    script: Option<Value>,
    stderr_file: Option<PathBuf>,
}

pub fn gjc() -> GjcBuilder {
    GjcBuilder {
        user: None,
        args: Vec::new(),
        envs: Vec::new(),
        base_url: None,
        script: None,
        stderr_file: None,
    }
}

impl GjcBuilder {
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.envs.push((k.into(), v.into()));
        self
    }

    /// Registers providers `fake-anthropic`, `fake-openai`, `fake-responses`, `fake-google` at this
    /// base URL, each with a model `m` (reasoning) and key `test-key`.
    pub fn provider(mut self, base_url: &str) -> Self {
        self.base_url = Some(base_url.to_string());
        self
    }

    /// Runs gjc as an unprivileged user when the tests run as root, so that file modes apply to
    /// it; its folders are opened up for that user.
    pub fn unprivileged(mut self) -> Self {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            self.user = Some((65534, 65534));
        }
        self
    }

    /// Appends gjc's stderr (its log) to this file instead of forwarding it, for tests that check
    /// what was logged. gjc is started by a shell script that `exec`s it, so its pid is the
    /// client's.
    pub fn stderr_file(mut self, path: &Path) -> Self {
        self.stderr_file = Some(path.to_path_buf());
        self
    }

    /// Uses the scripted provider with this script.
    pub fn script(mut self, script: Value) -> Self {
        self.script = Some(script);
        self
    }

    pub fn spawn(self) -> Gjc {
        let home = tempfile::tempdir().unwrap();
        let agent = home.path().join("agent");
        let project = home.path().join("project");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let program = env!("CARGO_BIN_EXE_gjc");
        let mut builder = match &self.stderr_file {
            None => RpcClient::builder(program).forward_stderr("[gjc] "),
            Some(file) => RpcClient::builder(logged_wrapper())
                .env("GJC_TEST_STDERR", file)
                .stderr(gjc::client::StderrTo::Discard),
        };
        builder = builder
            .env("HOME", home.path())
            .env("GJC_CODING_AGENT_DIR", &agent)
            .env("RUST_LOG", "warn")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("GEMINI_API_KEY")
            .env_remove("GOOGLE_API_KEY")
            .current_dir(&project)
            // Tests write floods before reading; backpressure is measured in gjc, not here.
            .unbounded_read_ahead();
        if let Some(base) = &self.base_url {
            write_models_json(&agent, base);
        }
        if let Some(script) = &self.script {
            let path = home.path().join("script.json");
            std::fs::write(&path, script.to_string()).unwrap();
            builder = builder
                .args(["--provider", "scripted", "--script"])
                .arg(&path);
        }
        for (k, v) in &self.envs {
            builder = builder.env(k, v);
        }
        builder = builder.args(&self.args);
        if let Some((uid, gid)) = self.user {
            for dir in [home.path(), &agent, &project] {
                std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
                    .unwrap();
            }
            builder = builder.user(uid, gid);
        }
        let contract = Arc::new(Contract::default());
        let checker = contract.clone();
        builder = builder.inspect(Arc::new(move |line: &str| checker.check_output(line)));
        let mut client = builder.spawn().expect("spawn gjc");
        let ready = client.recv(TIMEOUT).expect("ready frame");
        assert_eq!(
            ready.value["type"], "ready",
            "the first frame must be ready"
        );
        assert_eq!(ready.value["protocol_version"], 2);
        Gjc {
            client,
            home,
            project,
            contract,
        }
    }
}

/// A script that `exec`s gjc with its stderr appended to `$GJC_TEST_STDERR`: written once per
/// test process, and run once before use, so that no later exec meets it still open for
/// writing in a child another test thread forked meanwhile (`ETXTBSY`).
fn logged_wrapper() -> &'static Path {
    static WRAPPER: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    let (_, path) = WRAPPER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gjc-logged");
        let program = env!("CARGO_BIN_EXE_gjc");
        let text = format!("#!/bin/sh\nexec '{program}' \"$@\" 2>>\"$GJC_TEST_STDERR\"\n");
        std::fs::write(&path, text).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&path, mode).unwrap();
        for _ in 0..500 {
            let ran = std::process::Command::new(&path)
                .arg("--version")
                .env("GJC_TEST_STDERR", "/dev/null")
                // `--version` reads nothing, but no test run points gjc at the real home.
                .env("GJC_CODING_AGENT_DIR", dir.path())
                .output();
            match ran {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                ran => {
                    assert!(ran.unwrap().status.success(), "the wrapper runs gjc");
                    break;
                }
            }
        }
        (dir, path)
    });
    path
}

pub fn write_models_json(agent: &Path, base: &str) {
    let model = json!([{"id": "m", "reasoning": true, "contextWindow": 100000, "maxTokens": 4096, "input": ["text", "image"],
        "cost": {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}}]);
    let providers = json!({"providers": {
        "fake-anthropic": {"baseUrl": format!("{base}/v1"), "api": "anthropic-messages", "apiKey": "test-key", "models": model},
        "fake-openai": {"baseUrl": format!("{base}/v1"), "api": "openai-completions", "apiKey": "test-key", "models": model},
        "fake-responses": {"baseUrl": format!("{base}/v1"), "api": "openai-responses", "apiKey": "test-key", "models": model},
        "fake-google": {"baseUrl": format!("{base}/v1beta"), "api": "google-generative-ai", "apiKey": "test-key", "models": model},
        "fake-nokey": {"baseUrl": format!("{base}/v1"), "api": "openai-completions", "apiKey": "FAKE_UNSET_API_KEY", "models": model}
    }});
    std::fs::write(agent.join("models.json"), providers.to_string()).unwrap();
}

impl Gjc {
    pub fn request(&mut self, command: Value) -> Value {
        self.client.request(command, TIMEOUT).expect("response")
    }

    pub fn ok(&mut self, command: Value) -> Value {
        let r = self.request(command.clone());
        assert_eq!(r["success"], true, "command {command} failed: {r}");
        r.get("data").cloned().unwrap_or(Value::Null)
    }

    pub fn event(&mut self, event_type: &str) -> Value {
        self.client
            .wait_event(event_type, TIMEOUT)
            .unwrap_or_else(|e| panic!("no {event_type} event: {e}"))
    }

    /// Every event frame's inner event until (and including) `agent_end`.
    pub fn run_events(&mut self) -> Vec<Value> {
        let frames = self
            .client
            .collect_until(
                |f| f["type"] == "event" && f["payload"]["event_type"] == "agent_end",
                TIMEOUT,
            )
            .expect("agent_end");
        frames
            .into_iter()
            .filter(|f| f["type"] == "event")
            .map(|f| f["payload"]["event"].clone())
            .collect()
    }

    pub fn messages(&mut self) -> Vec<Value> {
        self.ok(json!({"type": "get_messages"}))["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn close_and_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.client.close_stdin();
        self.client.wait_exit(Duration::from_secs(5))
    }
}

/// The event types of a list of inner events.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}
