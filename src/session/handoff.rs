//! `handoff`: the current model writes a handoff document in one request (the compaction
//! machinery: its own stream, cancelled by `abort`), the document is saved beside the new
//! session's file, and the session continues in a new session (its `parentSession` the old
//! file, its actor a new one, `swap.rs`) whose context starts with the document. The old
//! session file gets nothing. With the
//! `handoff` strategy (`GJC_COMPACTION_STRATEGY`) a run past the threshold does the same instead
//! of summarising in place (in the same actor, as its run goes on), and falls back to that when
//! the document comes back empty.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::compaction::{transcript_prompt, Origin, NO_CONTENT};
use super::reply::{CommandError, Reply};
use super::run::Phase;
use super::store::Store;
use super::SessionLoop;
use crate::protocol::message::{AgentMessage, UserMessage};
use crate::protocol::reply::{CompactionResult, HandoffResult};
use crate::protocol::{AgentEvent, Data, Response};

const SYSTEM: &str = "You are writing a handoff document. Read the conversation between a user and an AI coding assistant, then write the document a fresh instance of the assistant, with none of this conversation, will read to continue the work. Do not continue the conversation and do not answer questions in it; only write the document.";

const INSTRUCTIONS: &str = "Write the handoff document for the assistant that continues this work in a new session. Use this structure:\n\n## Goal\nWhat the user wants, in their terms.\n\n## State of the work\nWhat is done, what is in progress, what was tried and failed.\n\n## Decisions and constraints\nChoices made and why; requirements the user stated.\n\n## Next steps\nThe concrete next actions, in order.\n\n## References\nExact file paths, function names, commands, error messages and values needed to continue.\n\nBe complete but concise; keep exact paths and identifiers.";

/// Where the document goes in the new session's context.
fn wrap(document: &str) -> String {
    format!("<handoff-context>\n{document}\n</handoff-context>\n\nThe above is a handoff document from a previous session. Use this context to continue the work seamlessly.")
}

/// The document file beside a session file: `<session file stem>.handoff.md`.
fn document_path(session_file: &Path) -> PathBuf {
    session_file.with_extension("handoff.md")
}

impl SessionLoop {
    /// Starts writing the document; the response comes from `finish_handoff` or the abort.
    pub(super) fn handoff(&mut self, id: Option<Value>, custom: Option<&str>) -> Reply {
        match self.start_handoff(id.clone(), custom) {
            Ok(()) => Reply::later(),
            Err(e) => Reply::answer(id, "handoff", Err(e)),
        }
    }

    fn start_handoff(
        &mut self,
        id: Option<Value>,
        custom: Option<&str>,
    ) -> Result<(), CommandError> {
        use CommandError::{Credentials, Io, Refused};
        // The reference refuses while a response streams: the document would miss its end.
        if self.is_busy() {
            return Err(Refused(super::commands::BUSY.into()));
        }
        if self.is_compacting() {
            return Err(Refused("Compaction already in progress".into()));
        }
        let messages = self
            .state
            .messages
            .parsed()
            .map_err(|e| Io(e.to_string()))?;
        if messages.len() < 2 {
            return Err(Refused("Nothing to hand off (no messages yet)".into()));
        }
        let prompt = transcript_prompt(messages, INSTRUCTIONS, custom);
        if self.state.model.is_none() {
            return Err(Credentials("No model selected for handoff".into()));
        }
        let credentials = self.state.credentials().map_err(Credentials)?;
        self.launch_summary(
            credentials,
            SYSTEM,
            prompt,
            (0, 0),
            Origin::Handoff(id),
            "Writing the handoff document",
        );
        Ok(())
    }

    /// The document arrived (or the request failed): on success a new session follows this
    /// one, as after `new_session` (`swap.rs`), and starts with the document, which its actor
    /// writes before it answers. A run the host started meanwhile ends with this actor.
    pub(super) fn finish_handoff(&mut self, id: Option<Value>, outcome: Result<String, String>) {
        match outcome {
            Ok(document) => self.hand_off_to_successor(id, document),
            Err(e) => self.respond(Response::err(id, "handoff", e)),
        }
    }

    /// The successor's first step after a manual handoff: the document as its first entry and
    /// beside its file, then the answer.
    pub(super) fn seed_handoff(&mut self, id: Option<Value>, document: &str) {
        let response = match self.seed_document(document) {
            Ok((saved_path, _)) => {
                match serde_json::value::to_raw_value(&HandoffResult { saved_path }) {
                    Ok(raw) => Response::ok_raw(id, "handoff", Some(Data::Checked(raw))),
                    Err(e) => Response::err(id, "handoff", format!("internal error: {e}")),
                }
            }
            Err(e) => Response::err(id, "handoff", e),
        };
        self.respond(response);
    }

    /// An automatic handoff's new session. Unlike `new_session` and a manual `handoff`
    /// (`swap.rs`) it continues in the same actor: the run goes on in the new session, and the
    /// run (phase, queued messages, retry budget, tool loop) is the actor's core, which a swap
    /// would have to hand over whole. So the session is reset in place; hooks, MCP servers,
    /// gates, the unattended declaration and the host's settings stay the actor's
    /// (docs/architecture.md, "The session host").
    ///
    /// The new session (`parentSession` the old file; queues kept, as the run goes on), its
    /// first entry the wrapped document (`seed_document`). Returns the document's path (none
    /// with `--no-session`) and the entry id of the document message.
    fn continue_in_new_session(
        &mut self,
        document: &str,
    ) -> Result<(Option<String>, String), String> {
        let queued = {
            let q = &mut self.state.queues;
            (
                std::mem::take(&mut q.steering),
                std::mem::take(&mut q.follow_up),
            )
        };
        self.state.store.sync();
        let id = crate::ids::uuid_v7();
        let store = match self.state.store.path() {
            Some(parent) => {
                let parent = parent.display().to_string();
                Store::create(&self.state.session_dir, &id, &self.state.cwd, Some(&parent))
            }
            None => Store::in_memory(&id, &self.state.cwd),
        };
        self.reset(id, store, Default::default(), None);
        (self.state.queues.steering, self.state.queues.follow_up) = queued;
        self.registry_update();
        self.seed_document(document)
    }

    /// The new session's first entry, the wrapped document, written and synced; then the
    /// document file beside the session file.
    fn seed_document(&mut self, document: &str) -> Result<(Option<String>, String), String> {
        // Not `record`: during an automatic handoff this is not a message of the run.
        if self.state.store.is_persistent() && self.state.store.ensure_on_disk().is_ok() {
            self.write_selection();
        }
        let message = AgentMessage::User(UserMessage::new(&wrap(document), &[]));
        let entry = self.state.store.append_message(&message).ok();
        let entry_id = entry.as_ref().map(|e| e.to_string()).unwrap_or_default();
        self.state.messages.push(message, entry);
        if !self.state.store.is_persistent() {
            // `--no-session`: nothing is saved, so there is no path to report.
            return Ok((None, entry_id));
        }
        self.state.store.sync_or_fail().map_err(|e| e.to_string())?;
        self.emit_store_notices();
        let session_file = self
            .state
            .store
            .path()
            .ok_or("the new session has no file")?
            .to_path_buf();
        let path = document_path(&session_file);
        super::store::write::replace_file(&path, |w| w.write_all(document.as_bytes()))
            .map_err(|e| format!("cannot save the handoff document {}: {e}", path.display()))?;
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        Ok((Some(path.display().to_string()), entry_id))
    }

    /// End-of-run maintenance past the threshold: a handoff with the `handoff` strategy,
    /// otherwise (or when that cannot start) a summary in place. False when neither started.
    pub(super) fn start_maintenance(&mut self) -> bool {
        if strategy_is_handoff(&self.state.settings) && self.start_auto_handoff().is_ok() {
            return true;
        }
        self.start_compaction(Origin::Threshold, None).is_ok()
    }

    fn start_auto_handoff(&mut self) -> Result<(), String> {
        if self.is_compacting() {
            return Err("Compaction already in progress".into());
        }
        let tokens_before = self
            .state
            .context_usage()
            .and_then(|u| u.tokens)
            .unwrap_or(0);
        let messages = self.state.messages.parsed().map_err(|e| e.to_string())?;
        if messages.len() < 2 {
            return Err("Nothing to hand off (no messages yet)".into());
        }
        let prompt = transcript_prompt(messages, INSTRUCTIONS, None);
        let credentials = self.state.credentials()?;
        self.emit(AgentEvent::AutoCompactionStart {
            reason: "threshold",
            action: "handoff",
        });
        if let Some(run) = &mut self.run {
            run.enter(Phase::Compacting);
        }
        self.launch_summary(
            credentials,
            SYSTEM,
            prompt,
            (0, tokens_before),
            Origin::AutoHandoff,
            "Writing the handoff document",
        );
        Ok(())
    }

    /// The automatic handoff's end: the run goes on in the new session and ends there. With no
    /// document the context is summarised in place instead (the reference's fallback).
    pub(super) fn finish_auto_handoff(&mut self, outcome: Result<String, String>, before: u64) {
        let result = outcome.and_then(|doc| {
            self.continue_in_new_session(&doc)
                .map(|(_, entry_id)| CompactionResult {
                    summary: doc,
                    first_kept_entry_id: entry_id,
                    tokens_before: before,
                    details: None,
                })
        });
        let empty = matches!(&result, Err(e) if e == NO_CONTENT);
        self.emit_compaction_end("handoff", &result, false, false);
        if empty && self.start_compaction(Origin::Threshold, None).is_ok() {
            return;
        }
        self.end_run_completed();
    }
}

/// `GJC_COMPACTION_STRATEGY`: `handoff`, or `context-full` (the default; anything else too).
fn strategy_is_handoff(settings: &crate::settings::Settings) -> bool {
    settings.compaction_strategy == crate::settings::CompactionStrategy::Handoff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_sits_beside_the_session_file() {
        assert_eq!(
            document_path(Path::new("/s/2026-01-01T00-00-00-000Z_abc.jsonl")),
            Path::new("/s/2026-01-01T00-00-00-000Z_abc.handoff.md")
        );
        let w = wrap("## Goal\nship it");
        assert!(w.starts_with("<handoff-context>\n## Goal\nship it\n</handoff-context>"));
    }
}
