//! `before_prompt`: hooks that run after a prompt is accepted and before its run asks the model.
//!
//! They run one after another on a `gjc-hook` thread, which reports what they added as one
//! [`PromptHookDone`] on a channel the session selects over; the session itself never waits. An
//! answer `{"addContext": "…"}` adds that text as a reminder message after the prompt; every
//! other key is ignored. A failing hook is reported (`extension_error`) and counts as one that
//! added nothing, and abort stops the hooks (their process groups are killed) without reporting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;
use serde_json::Value;

use super::{exec, Hooks};
use crate::exec::{BashHandle, JobOwner};
use crate::protocol::message::{Content, UserMessage};

pub const EVENT: &str = "before_prompt";

/// What the `before_prompt` hooks of one run added, in configuration order.
#[derive(Debug)]
pub struct PromptHookDone {
    /// The run the prompt started.
    pub generation: u64,
    pub contexts: Vec<String>,
}

/// The hooks of a prompt that is waiting for them; dropping it does not stop them, `cancel` does.
pub struct PendingPrompt {
    cancel: Arc<AtomicBool>,
    owner: JobOwner,
}

impl PendingPrompt {
    /// Kills the running hook's process group and skips the hooks not started yet; the thread
    /// then ends without reporting.
    pub fn cancel(&self, bash: &BashHandle) {
        self.cancel.store(true, Ordering::SeqCst);
        bash.abort(self.owner.clone());
    }
}

/// Starts the `before_prompt` hooks of run `generation` with `payload`; `done` gets their result
/// unless they are cancelled first. An error means no thread could be started (nothing runs).
pub fn start(
    hooks: &Arc<Hooks>,
    payload: Value,
    generation: u64,
    done: Sender<PromptHookDone>,
) -> Result<PendingPrompt, String> {
    let cancel = Arc::new(AtomicBool::new(false));
    let owner = JobOwner::Tool(format!("hook:{EVENT}:{generation}"));
    let pending = PendingPrompt {
        cancel: cancel.clone(),
        owner: owner.clone(),
    };
    let hooks = hooks.clone();
    std::thread::Builder::new()
        .name("gjc-hook".into())
        .spawn(move || {
            let mut contexts = Vec::new();
            for hook in hooks.for_event(EVENT, None) {
                let answer = exec::run_cancellable(&hooks, hook, &payload, owner.clone(), &cancel);
                if cancel.load(Ordering::SeqCst) {
                    return;
                }
                match answer.and_then(|a| added_context(a.as_ref())) {
                    Ok(Some(text)) => contexts.push(text),
                    Ok(None) => {}
                    Err(e) => hooks.report(hook, &e),
                }
            }
            let _ = done.send(PromptHookDone {
                generation,
                contexts,
            });
        })
        .map(|_| pending)
        .map_err(|e| format!("cannot start a hook thread: {e}"))
}

/// The context a hook's answer adds: `addContext` when it is a non-blank string.
fn added_context(answer: Option<&Value>) -> Result<Option<String>, String> {
    match answer.and_then(|a| a.get("addContext")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err("addContext must be a string".into()),
    }
}

/// The payload's view of the prompt: its text and how many images it carries (not their data).
pub fn describe(prompt: &[UserMessage]) -> (String, usize) {
    let mut text = String::new();
    let mut images = 0;
    for c in prompt.iter().flat_map(|m| &m.content) {
        match c {
            Content::Text { text: t, .. } => text.push_str(t),
            Content::Image { .. } => images += 1,
            _ => {}
        }
    }
    (text, images)
}

/// The message that carries a hook's context to the model: a reminder attributed to gjc, so
/// neither the model nor a host takes it for something the user typed.
pub fn context_message(text: &str) -> UserMessage {
    UserMessage {
        content: vec![Content::text(format!(
            "<system-reminder>\n{}\n</system-reminder>",
            text.trim_end()
        ))],
        attribution: Some("agent".into()),
        timestamp: crate::ids::now_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_add_context_only() {
        assert_eq!(added_context(None), Ok(None));
        assert_eq!(added_context(Some(&json!({"other": 1}))), Ok(None));
        assert_eq!(added_context(Some(&json!({"addContext": "  "}))), Ok(None));
        assert_eq!(
            added_context(Some(&json!({"addContext": "branch: main"}))),
            Ok(Some("branch: main".into()))
        );
        assert!(added_context(Some(&json!({"addContext": 3}))).is_err());
    }

    #[test]
    fn describes_text_and_image_count() {
        let m = UserMessage::new("look", &[]);
        assert_eq!(describe(&[m]), ("look".into(), 0));
        let c = context_message("ctx\n");
        assert_eq!(
            c.content[0],
            Content::text("<system-reminder>\nctx\n</system-reminder>")
        );
        assert_eq!(c.attribution.as_deref(), Some("agent"));
    }
}
