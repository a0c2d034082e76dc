//! `handoff`: the current model writes a handoff document in one request (the compaction
//! machinery: its own stream, cancelled by `abort`), the document is saved beside the new
//! session's file, and the session continues in a new session (its `parentSession` the old
//! file) whose context starts with the document. The old session file gets nothing.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::compaction::{transcript_prompt, Origin};
use super::SessionLoop;
use crate::protocol::message::{AgentMessage, UserMessage};
use crate::protocol::reply::HandoffResult;
use crate::protocol::Response;

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
    pub(super) fn handoff(&mut self, id: Option<Value>, custom: Option<&str>) {
        if let Err(e) = self.start_handoff(id.clone(), custom) {
            self.respond(Response::err(id, "handoff", e));
        }
    }

    fn start_handoff(&mut self, id: Option<Value>, custom: Option<&str>) -> Result<(), String> {
        // The reference refuses while a response streams: the document would miss its end.
        if self.is_busy() {
            return Err(super::commands::BUSY.into());
        }
        if self.is_compacting() {
            return Err("Compaction already in progress".into());
        }
        let messages = self.state.messages.parsed()?;
        if messages.len() < 2 {
            return Err("Nothing to hand off (no messages yet)".into());
        }
        let prompt = transcript_prompt(messages, INSTRUCTIONS, custom);
        if self.state.model.is_none() {
            return Err("No model selected for handoff".into());
        }
        let credentials = self.state.credentials()?;
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

    /// The document arrived (or the request failed): on success the new session starts with it.
    pub(super) fn finish_handoff(&mut self, id: Option<Value>, outcome: Result<String, String>) {
        let response = match outcome.and_then(|doc| self.continue_in_new_session(&doc)) {
            Ok(result) => match serde_json::value::to_raw_value(&result) {
                Ok(raw) => {
                    Response::ok_raw(id, "handoff", Some(crate::protocol::Data::Checked(raw)))
                }
                Err(e) => Response::err(id, "handoff", format!("internal error: {e}")),
            },
            Err(e) => Response::err(id, "handoff", e),
        };
        self.respond(response);
    }

    /// The new session (as `new_session` makes it: parent the old file, queues cleared), its
    /// first entry the wrapped document, written and synced; then the document file.
    fn continue_in_new_session(&mut self, document: &str) -> Result<HandoffResult, String> {
        self.new_session(None, None).map_err(|e| e.0)?;
        let message = AgentMessage::User(UserMessage::new(&wrap(document), &[]));
        self.record(message);
        if !self.state.store.is_persistent() {
            // `--no-session`: nothing is saved, so there is no path to report.
            return Ok(HandoffResult { saved_path: None });
        }
        self.state.store.sync_or_fail()?;
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
        Ok(HandoffResult {
            saved_path: Some(path.display().to_string()),
        })
    }
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
