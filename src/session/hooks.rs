//! The session's side of hooks (`crate::hooks`): loading them at start, and the observer events
//! it fires. It never waits for a hook, except at shutdown for `session_end` (bounded).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::SessionLoop;

/// The longest shutdown waits for `session_end` hooks.
const SESSION_END_WAIT: Duration = Duration::from_secs(5);

impl SessionLoop {
    /// Loads the hooks files and fires `session_start`.
    pub(super) fn start_hooks(&mut self) {
        let hooks = crate::hooks::install(
            &crate::cli::agent_dir(),
            &self.state.cwd,
            self.bash.clone(),
            self.ch.out.clone(),
        );
        hooks.notify(
            "session_start",
            self.hook_payload("session_start", json!({})),
        );
    }

    /// Lets the observer hooks still running finish, then fires `session_end` and waits for it;
    /// all within [`SESSION_END_WAIT`], before the shell actor stops.
    pub(super) fn end_hooks(&mut self) {
        let Some(hooks) = crate::hooks::installed() else {
            return;
        };
        let deadline = Instant::now() + SESSION_END_WAIT;
        hooks.wait_running(deadline);
        hooks.notify("session_end", self.hook_payload("session_end", json!({})));
        hooks.wait_running(deadline);
        hooks.release();
    }

    /// Fires `before_compact` (`reason`: `manual`, `threshold` or `overflow`).
    pub(super) fn before_compact_hooks(&mut self, reason: &str) {
        if let Some(hooks) = crate::hooks::installed() {
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
