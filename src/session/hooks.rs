//! The session's side of hooks (`crate::hooks`): loading them at start (the session owns them
//! from then on), the observer events it fires, and the `before_prompt` wait. It never blocks on
//! a hook, except at shutdown for `session_end` (bounded): a prompt waiting for its hooks is a
//! phase of the run, ended by an event like any other.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::run::Phase;
use super::SessionLoop;
use crate::hooks::prompt::{self, PromptHookDone};
use crate::protocol::message::UserMessage;

/// The longest shutdown waits for `session_end` hooks.
const SESSION_END_WAIT: Duration = Duration::from_secs(5);

impl SessionLoop {
    /// Loads the hooks files and fires `session_start`.
    pub(super) fn start_hooks(&mut self) {
        self.flush_out();
        let hooks = self.load_hooks();
        // Without hooks no ruleset is prepared: an idle live session holds no descriptor.
        if !hooks.is_empty() {
            hooks.set_launch(self.sandbox_launch());
        }
        hooks.notify(
            "session_start",
            self.hook_payload("session_start", json!({})),
        );
        self.hooks = Some(hooks);
    }

    /// A successor's hooks (`swap.rs`): its project's, loaded as at start but without
    /// `session_start`, which the process's hooks see once.
    pub(super) fn continue_hooks(&mut self) {
        let hooks = self.load_hooks();
        if !hooks.is_empty() {
            hooks.set_launch(self.sandbox_launch());
        }
        self.hooks = Some(hooks);
    }

    /// Loads the hooks of the session's project, its own only if it is trusted (`crate::trust`).
    fn load_hooks(&mut self) -> std::sync::Arc<crate::hooks::Hooks> {
        let agent_dir = self.state.project.agent_dir.clone();
        self.state.project_trusted =
            crate::trust::TrustStore::new(&agent_dir).is_trusted(&self.state.cwd);
        crate::hooks::load(
            &agent_dir,
            &self.state.cwd,
            self.state.project_trusted,
            self.bash.clone(),
            self.outbox.lane(),
        )
    }

    /// The session moved to another project, or its project's trust changed: the hooks loaded
    /// now replace the old ones from now on.
    /// `session_start` and `session_end` stay once per process. Hooks of the old project still
    /// running finish unreported, so their frames cannot outlive the output lane.
    pub(super) fn reload_hooks(&mut self) {
        let Some(old) = self.hooks.take() else {
            return;
        };
        old.release();
        let hooks = self.load_hooks();
        if !hooks.is_empty() {
            hooks.set_launch(self.sandbox_launch());
        }
        self.hooks = Some(hooks);
    }

    /// Starts the run of an accepted `prompt` / `abort_and_prompt`. With `before_prompt` hooks
    /// the run opens (`agent_start`) and waits for them in its `BeforePrompt` phase; its first
    /// turn starts when they are done (`on_prompt_hooks`).
    pub(super) fn start_prompt_run(&mut self, prompt: Vec<UserMessage>, command: &str) {
        // Hooks start in the sandbox of the moment (a stage or mode may have changed it).
        if self.hooks.as_ref().is_some_and(|h| !h.is_empty()) {
            self.sandbox_launch();
        }
        let Some(hooks) = self.hooks.clone().filter(|h| h.has(prompt::EVENT)) else {
            return self.start_run(prompt);
        };
        let generation = self.open_run();
        let (text, images) = prompt::describe(&prompt);
        let extra = json!({ "command": command, "message": text, "imageCount": images });
        let payload = self.hook_payload(prompt::EVENT, extra);
        let done = self.side.prompt_hook_reporter();
        self.flush_out();
        match prompt::start(&hooks, payload, generation, done) {
            Ok(pending) => {
                if let Some(run) = &mut self.run {
                    run.enter(Phase::BeforePrompt {
                        prompt,
                        hooks: pending,
                    });
                }
            }
            Err(e) => {
                // As if the hooks had allowed the prompt and added nothing.
                log::error!("{e}");
                self.first_turn(prompt);
            }
        }
    }

    /// The `before_prompt` hooks of the current run are done: its first turn starts, with the
    /// context they added after the prompt. Reports for an aborted run are dropped.
    pub(super) fn on_prompt_hooks(&mut self, done: PromptHookDone) {
        let Some(run) = &mut self.run else { return };
        if run.generation != done.generation || !matches!(run.phase(), Phase::BeforePrompt { .. }) {
            return;
        }
        let Phase::BeforePrompt { mut prompt, .. } = run.leave() else {
            return;
        };
        prompt.extend(done.contexts.iter().map(|c| prompt::context_message(c)));
        self.first_turn(prompt);
    }

    /// Lets the observer hooks still running finish, then fires `session_end` and waits for it;
    /// all within [`SESSION_END_WAIT`], before the shell actor stops.
    pub(super) fn end_hooks(&mut self) {
        let Some(hooks) = self.hooks.clone() else {
            return;
        };
        self.flush_out();
        let deadline = Instant::now() + SESSION_END_WAIT;
        hooks.wait_running(deadline);
        hooks.notify("session_end", self.hook_payload("session_end", json!({})));
        hooks.wait_running(deadline);
        hooks.release();
    }

    /// Fires `before_compact` (`reason`: `manual`, `threshold` or `overflow`).
    pub(super) fn before_compact_hooks(&mut self, reason: &str) {
        if let Some(hooks) = self.hooks.clone() {
            self.flush_out();
            let extra = json!({ "reason": reason });
            hooks.notify("before_compact", self.hook_payload("before_compact", extra));
        }
    }

    /// Every payload names its event, the session and the working folder.
    fn hook_payload(&self, event: &str, extra: Value) -> Value {
        let mut payload = json!({
            "event": event,
            "sessionId": self.state.id,
            "cwd": self.state.cwd,
        });
        if let (Value::Object(p), Value::Object(e)) = (&mut payload, extra) {
            p.extend(e);
        }
        payload
    }
}
