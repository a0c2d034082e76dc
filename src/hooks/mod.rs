//! Hooks: executables the user configures in `<agent dir>/hooks.json` and
//! `<project>/.gjc/hooks.json`, run on lifecycle events with the event as JSON on stdin.
//!
//! Every hook runs through `gjc-bash` (its own process group, the parent-death signal, the
//! timeout and the group kill of every shell command), never on the session, stdin or stdout
//! threads: tool hooks inside the `gjc-tool` worker of their call (`tool.rs`), the others on a
//! short-lived `gjc-hook` thread (`before_prompt` too, the session waiting for its answer as an
//! event, `prompt.rs`). The hooks are loaded when the session starts (again when it moves to another project, or its
//! project's trust changes; a project's own file only when it is trusted) and owned by it (passed
//! to the tool workers that need them), not held in a global. A hook that fails is reported as a top-level `extension_error`
//! frame and the work goes on as if it had allowed it, except `before_tool_call`, which fails
//! closed (docs/hooks.md).

pub mod exec;
pub mod prompt;
pub mod tool;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver};
use serde::Deserialize;
use serde_json::Value;

use crate::exec::BashHandle;
use crate::output::OutTx;
use crate::protocol::outbound::FlatFrame;
use crate::protocol::Outbound;

/// The default and the largest time a hook may run.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// A hooks file larger than this is refused (it is a short list of commands).
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The events a hook can be configured for.
pub const EVENTS: &[&str] = &[
    "session_start",
    "session_end",
    "before_prompt",
    "before_tool_call",
    "after_tool_call",
    "before_compact",
];

/// One configured hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub event: String,
    pub command: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
    /// Tool hooks only: the tool names it applies to (`None`: every tool).
    pub tools: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    hooks: Vec<HookSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct HookSpec {
    event: String,
    command: String,
    #[serde(default)]
    args: Vec<String>,
    timeout_ms: Option<u64>,
    tools: Option<Vec<String>>,
}

/// The hooks of this process, and where to report their failures.
pub struct Hooks {
    pub hooks: Vec<Hook>,
    pub bash: BashHandle,
    /// Where `extension_error` frames go; given up at shutdown (`release`) so the stdout writer
    /// sees its last sender leave and finishes.
    out: Mutex<Option<OutTx>>,
    pub cwd: PathBuf,
    /// Observer hooks still running, each told done through its receiver; shutdown waits for
    /// them so that none is killed half-way and `session_end` comes last.
    running: Mutex<Vec<Receiver<()>>>,
    /// The kernel sandbox hook commands start in: the session's, set whenever it changes.
    launch: Mutex<crate::sandbox::Launch>,
}

/// Loads the hooks files (at session start); a file that cannot be used is reported as an
/// `extension_error` with event `load` and skipped whole. The project's file runs programs the
/// user did not write, so it is read only when the project is trusted (`crate::trust`); else
/// it is reported, naming how to trust it, and skipped. The agent dir's file is the user's own.
pub fn load(
    agent_dir: &Path,
    cwd: &Path,
    project_trusted: bool,
    bash: BashHandle,
    out: OutTx,
) -> Arc<Hooks> {
    let mut hooks = Vec::new();
    let mut files = vec![agent_dir.join("hooks.json")];
    if project_trusted {
        files.push(project_file(cwd));
    } else if has_project_file(cwd) {
        let file = project_file(cwd).display().to_string();
        report(&out, &file, "load", &untrusted(cwd));
    }
    for file in files {
        match load_file(&file, cwd) {
            Ok(found) => hooks.extend(found),
            Err(e) => report(&out, &file.display().to_string(), "load", &e),
        }
    }
    Arc::new(Hooks {
        hooks,
        bash,
        out: Mutex::new(Some(out)),
        cwd: cwd.to_path_buf(),
        running: Mutex::new(Vec::new()),
        launch: Mutex::new(crate::sandbox::Launch::Unconfined),
    })
}

/// The project's hooks file: `<cwd>/.gjc/hooks.json`.
pub fn project_file(cwd: &Path) -> PathBuf {
    cwd.join(".gjc").join("hooks.json")
}

/// Whether the project has a hooks file: anything at that path (a link too) counts, so that an
/// untrusted project's file is reported however it was made.
pub fn has_project_file(cwd: &Path) -> bool {
    std::fs::symlink_metadata(project_file(cwd)).is_ok()
}

/// Why an untrusted project's hooks are skipped, and how to trust it.
fn untrusted(cwd: &Path) -> String {
    format!(
        "not loaded: the project {} is not trusted to run programs; trust it with \
         `gjc --trust-project`, the `trust_project` command, or the editor's prompt (ACP)",
        cwd.display()
    )
}

/// A missing file is no hooks; anything else wrong with it (a FIFO, a device, more than
/// [`MAX_CONFIG_BYTES`]) is an error naming the problem.
pub fn load_file(path: &Path, cwd: &Path) -> Result<Vec<Hook>, String> {
    use crate::fs::bounded::{self, Links};
    let text = match bounded::read_to_string(path, MAX_CONFIG_BYTES, Links::Follow) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    parse(&text, cwd)
}

/// Parses a hooks file; relative commands are resolved against `cwd`.
pub fn parse(text: &str, cwd: &Path) -> Result<Vec<Hook>, String> {
    let file: FileSpec =
        serde_json::from_str(text).map_err(|e| format!("invalid hooks file: {e}"))?;
    file.hooks
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            if !EVENTS.contains(&h.event.as_str()) {
                return Err(format!(
                    "hooks[{i}].event {:?} is not one of {}",
                    h.event,
                    EVENTS.join(", ")
                ));
            }
            if h.command.trim().is_empty() {
                return Err(format!("hooks[{i}].command must not be empty"));
            }
            let timeout_ms = h.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
            if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
                return Err(format!(
                    "hooks[{i}].timeoutMs must be between 1 and {MAX_TIMEOUT_MS}"
                ));
            }
            if h.tools.is_some() && !h.event.ends_with("_tool_call") {
                return Err(format!("hooks[{i}].tools only applies to tool call events"));
            }
            Ok(Hook {
                event: h.event,
                command: cwd.join(h.command),
                args: h.args,
                timeout: Duration::from_millis(timeout_ms),
                tools: h.tools,
            })
        })
        .collect()
}

impl Hooks {
    /// The hooks of `event` in configuration order (agent dir first), for `tool` when given.
    pub fn for_event<'a>(
        &'a self,
        event: &'a str,
        tool: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Hook> + 'a {
        self.hooks.iter().filter(move |h| {
            h.event == event
                && match (&h.tools, tool) {
                    (Some(names), Some(tool)) => names.iter().any(|n| n == tool),
                    _ => true,
                }
        })
    }

    /// No hook at all: nothing will start a command, so no sandbox need be prepared for one.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    pub fn has(&self, event: &str) -> bool {
        self.for_event(event, None).next().is_some()
    }

    /// The `extension_error` frame for a hook that failed.
    pub fn report(&self, hook: &Hook, error: &str) {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = out.as_ref() {
            report(out, &hook.command.display().to_string(), &hook.event, error);
        }
    }

    /// The sandbox hook commands start in from now on.
    pub fn set_launch(&self, launch: crate::sandbox::Launch) {
        *self.launch.lock().unwrap_or_else(|e| e.into_inner()) = launch;
    }

    /// The sandbox of the next hook command.
    pub fn launch(&self) -> crate::sandbox::Launch {
        self.launch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// At shutdown, after `session_end`: no more frames from hooks.
    pub fn release(&self) {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Runs the observer hooks of `event` (their output is ignored) on a `gjc-hook` thread; the
    /// caller goes on at once. The receiver, if hooks run, is told when they are done.
    pub fn notify(self: &Arc<Self>, event: &'static str, payload: Value) -> Option<Receiver<()>> {
        if !self.has(event) {
            return None;
        }
        let hooks = self.clone();
        let (done_tx, done) = bounded(1);
        let started = std::thread::Builder::new()
            .name("gjc-hook".into())
            .spawn(move || {
                let owner = crate::exec::JobOwner::Tool(format!("hook:{event}"));
                for hook in hooks.for_event(event, None) {
                    if let Err(e) = exec::run(&hooks, hook, &payload, owner.clone()) {
                        hooks.report(hook, &e);
                    }
                }
                let _ = done_tx.send(());
            });
        if let Err(e) = started {
            log::error!("cannot start a hook thread: {e}");
            return None;
        }
        if let Ok(mut running) = self.running.lock() {
            running.retain(|r| r.is_empty() && !is_gone(r));
            running.push(done.clone());
        }
        Some(done)
    }

    /// Waits until every observer hook started so far has ended, or `deadline`.
    pub fn wait_running(&self, deadline: Instant) {
        let running = match self.running.lock() {
            Ok(mut r) => std::mem::take(&mut *r),
            Err(_) => return,
        };
        for r in running {
            let _ = r.recv_deadline(deadline);
        }
    }
}

/// A finished hook thread has sent its one message, or dropped its sender.
fn is_gone(r: &Receiver<()>) -> bool {
    matches!(
        r.try_recv(),
        Err(crossbeam_channel::TryRecvError::Disconnected)
    )
}

fn report(out: &OutTx, path: &str, event: &str, error: &str) {
    let _ = out.send(Outbound::Frame(FlatFrame::ExtensionError {
        extension_path: path.to_string(),
        event: event.to_string(),
        error: error.to_string(),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_hooks() {
        let cwd = Path::new("/p");
        let hooks = parse(
            r#"{"hooks":[{"event":"before_tool_call","command":"h/deny.sh","timeoutMs":100,"tools":["bash"],"args":["-x"]},
                {"event":"session_start","command":"/bin/true"}]}"#,
            cwd,
        )
        .unwrap();
        assert_eq!(hooks[0].command, Path::new("/p/h/deny.sh"));
        assert_eq!(hooks[0].timeout, Duration::from_millis(100));
        assert_eq!(hooks[0].args, ["-x"]);
        assert_eq!(hooks[1].timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
        let bad = |t: &str| parse(t, cwd).unwrap_err();
        assert!(bad(r#"{"hooks":[{"event":"on_boot","command":"x"}]}"#).contains("not one of"));
        assert!(
            bad(r#"{"hooks":[{"event":"session_end","command":"x","tools":["a"]}]}"#)
                .contains("tools only applies")
        );
        assert!(
            bad(r#"{"hooks":[{"event":"session_end","command":"x","timeoutMs":0}]}"#)
                .contains("timeoutMs")
        );
        assert!(
            bad(r#"{"hooks":[{"event":"session_end","command":"x","extra":1}]}"#)
                .contains("unknown field")
        );
    }

    #[test]
    fn a_missing_file_is_no_hooks() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            load_file(&dir.path().join("hooks.json"), dir.path()),
            Ok(Vec::new())
        );
    }
}
