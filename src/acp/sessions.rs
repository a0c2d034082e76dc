//! Session management for the ACP front end: `session/new`, `session/load`, `session/resume`,
//! `session/list`, `session/close` and `session/delete`.
//!
//! Every session opened (new, load, resume) is live until it is closed, each an actor of its own
//! (`crate::sessions`) working in the folder the client named (`cwd`), prompting independently
//! of the others. Loading a session that is live serves the live one. Stored sessions are found by reading only their files' header lines
//! (`session::store::find`, `stored_in`), so listing does not grow with the length of the
//! conversations.

use std::cmp::Reverse;
use std::io::Write;
use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{
    CloseSessionRequest, CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse, Error,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, RequestId, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities, SessionId,
    SessionInfo, SessionListCapabilities, SessionResumeCapabilities,
};
use serde_json::{json, Value};

use agent_client_protocol_schema::v1::{McpServer, PromptResponse, StopReason};

use super::front::{busy, Front, Waiting};
use super::updates;
use crate::protocol::message::AgentMessage;
use crate::session::store::{self, Stored};

/// Sessions per `session/list` page.
const PAGE: usize = 50;

/// Where the front end finds stored sessions and a project's skills.
pub struct Projects {
    pub agent_dir: PathBuf,
    /// `<agent dir>/sessions`: one folder per working directory.
    pub sessions_root: PathBuf,
    /// `--session-dir`: the one folder every session file goes to.
    pub fixed_dir: Option<PathBuf>,
    /// False with `--no-session`: nothing is stored, so nothing is listed.
    pub persistent: bool,
    /// Skills are offered as slash commands (not with `--no-skills`).
    pub skills: bool,
    /// `Settings::home`: what `~` in a tool call's path means.
    pub home: Option<PathBuf>,
}

impl Projects {
    fn folders(&self) -> Vec<PathBuf> {
        match (&self.fixed_dir, self.persistent) {
            (_, false) => Vec::new(),
            (Some(dir), true) => vec![dir.clone()],
            (None, true) => store::folders(&self.sessions_root),
        }
    }
}

/// The session capabilities served here.
pub fn capabilities() -> SessionCapabilities {
    SessionCapabilities::new()
        .list(SessionListCapabilities::new())
        .resume(SessionResumeCapabilities::new())
        .close(SessionCloseCapabilities::new())
        .delete(SessionDeleteCapabilities::new())
}

/// A session request waiting for the session's answer to one of its commands.
pub enum Step {
    /// `switch_session` to a stored session, for `session/load` (`replay`) or `session/resume`.
    Switch {
        id: RequestId,
        replay: bool,
        /// The stored session's name, its title.
        title: Option<String>,
    },
    /// `get_messages` of a loaded session, to replay.
    Replay(RequestId),
}

impl Step {
    /// The client's request this step answers.
    pub fn request(&self) -> &RequestId {
        match self {
            Step::Switch { id, .. } | Step::Replay(id) => id,
        }
    }
}

/// The folder of a session request: absolute, existing, a directory, in UTF-8 (the session
/// command carries it as a string); else invalid params saying which.
pub(super) fn project(cwd: &Path) -> Result<PathBuf, Error> {
    let resolved = crate::session::project::resolve_cwd(cwd)
        .map_err(|e| Error::invalid_params().data(e.to_string()))?;
    if resolved.to_str().is_none() {
        return Err(Error::invalid_params().data(format!("cwd {} is not UTF-8", cwd.display())));
    }
    Ok(resolved)
}

/// A session id from the client names files, so it must match the one id pattern
/// ([`crate::ids::is_valid_id`]); else invalid params saying so.
pub(super) fn session_id(wanted: &str) -> Result<(), Error> {
    if crate::ids::is_valid_id(wanted) {
        return Ok(());
    }
    Err(Error::invalid_params().data(crate::ids::invalid_id("sessionId", wanted)))
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

impl<W: Write> Front<W> {
    /// Starts a session actor of its own: sessions live side by side, each prompting on its
    /// own. Starting one is the front end's own work, so a burst of `session/new` is answered in
    /// order while the reader waits (backpressure), never refused.
    pub(super) fn new_session(
        &mut self,
        id: RequestId,
        p: NewSessionRequest,
    ) -> std::io::Result<()> {
        let cwd = match project(&p.cwd) {
            Ok(cwd) => cwd,
            Err(e) => return self.wire.respond::<()>(id, Err(e)),
        };
        if let Err(e) = self.start_session(cwd, None) {
            return self
                .wire
                .respond::<()>(id, Err(Error::internal_error().data(e)));
        }
        let skipped = self.use_mcp_servers(&p.mcp_servers);
        let response = NewSessionResponse::new(self.c.session.clone())
            .modes(self.modes())
            .config_options(self.config_options());
        self.wire.respond(id, Ok(response))?;
        self.tell_skipped(&skipped)?;
        self.opened_updates()
    }

    pub(super) fn load_session(
        &mut self,
        id: RequestId,
        p: LoadSessionRequest,
    ) -> std::io::Result<()> {
        let wanted = p.session_id.0.to_string();
        self.open_stored(id, wanted, &p.cwd, &p.mcp_servers, true)
    }

    pub(super) fn resume_session(
        &mut self,
        id: RequestId,
        p: ResumeSessionRequest,
    ) -> std::io::Result<()> {
        let wanted = p.session_id.0.to_string();
        self.open_stored(id, wanted, &p.cwd, &p.mcp_servers, false)
    }

    /// Opens session `wanted` working in `cwd`. A live one is served as it is (its history
    /// replayed for `session/load`); a stored one gets an actor of its own, which switches to
    /// the stored file. The editor's MCP servers replace the ones it gave that session before.
    fn open_stored(
        &mut self,
        id: RequestId,
        wanted: String,
        cwd: &Path,
        servers: &[McpServer],
        replay: bool,
    ) -> std::io::Result<()> {
        if let Err(e) = session_id(&wanted) {
            return self.wire.respond::<()>(id, Err(e));
        }
        let cwd = match project(cwd) {
            Ok(cwd) => cwd,
            Err(e) => return self.wire.respond::<()>(id, Err(e)),
        };
        if self.focus(&wanted) {
            if self.c.turn.is_some() {
                return self.wire.respond::<()>(id, Err(busy()));
            }
            let skipped = self.use_mcp_servers(servers);
            self.tell_skipped(&skipped)?;
            return self.opened(id, replay);
        }
        let Some(found) = store::find(&self.projects.folders(), &wanted) else {
            return self
                .wire
                .respond::<()>(id, Err(Error::session_not_found(wanted)));
        };
        if let Err(e) = self.start_session(cwd.clone(), Some(wanted)) {
            return self
                .wire
                .respond::<()>(id, Err(Error::internal_error().data(e)));
        }
        let fields = json!({"sessionPath": path_text(&found.path), "cwd": path_text(&cwd)});
        let then = Waiting::Session(Step::Switch {
            id,
            replay,
            title: found.title.clone(),
        });
        self.command("switch_session", fields, then);
        let skipped = self.use_mcp_servers(servers);
        self.tell_skipped(&skipped)
    }

    pub(super) fn list_sessions(
        &mut self,
        id: RequestId,
        p: ListSessionsRequest,
    ) -> std::io::Result<()> {
        let filter = match &p.cwd {
            Some(cwd) if !cwd.is_absolute() => {
                let error = format!("cwd must be an absolute path, not {}", cwd.display());
                return self
                    .wire
                    .respond::<()>(id, Err(Error::invalid_params().data(error)));
            }
            // Headers hold canonical folders; a folder that is gone is compared as written.
            Some(cwd) => Some(path_text(
                &std::fs::canonicalize(cwd).unwrap_or(cwd.clone()),
            )),
            None => None,
        };
        let after = match p.cursor.as_deref().map(Cursor::parse) {
            Some(None) => {
                let error = Error::invalid_params().data("cursor: not one gjc gave");
                return self.wire.respond::<()>(id, Err(error));
            }
            Some(Some(cursor)) => Some(cursor),
            None => None,
        };
        let mut stored = store::stored_in(&self.projects.folders());
        // A live session is listed before its first message has given it a file.
        let unwritten: Vec<Stored> = self
            .live_listed()
            .into_iter()
            .filter(|live| !stored.iter().any(|s| s.id == live.id))
            .collect();
        stored.extend(unwritten);
        let (sessions, next) = page(stored, filter.as_deref(), after.as_ref(), PAGE);
        let sessions = sessions.into_iter().filter_map(info).collect();
        let response = ListSessionsResponse::new(sessions).next_cursor(next.map(|c| c.text()));
        self.wire.respond(id, Ok(response))
    }

    /// Ends that session's actor: its prompt, if one runs, is answered `cancelled` now, and
    /// nothing of it follows. The other sessions go on.
    pub(super) fn close_session(
        &mut self,
        id: RequestId,
        p: CloseSessionRequest,
    ) -> std::io::Result<()> {
        let wanted = p.session_id.0.to_string();
        if !self.focus(&wanted) {
            return self
                .wire
                .respond::<()>(id, Err(Error::session_not_found(wanted)));
        }
        if let Some(turn) = self.c.turn.take() {
            let response = PromptResponse::new(StopReason::Cancelled);
            self.wire.respond(turn.id, Ok(response))?;
        }
        self.end_focused();
        self.wire.respond(id, Ok(CloseSessionResponse::new()))
    }

    /// Removes a stored session's file (and its workflow gates). The open session is refused:
    /// its file is still being written.
    pub(super) fn delete_session(
        &mut self,
        id: RequestId,
        p: DeleteSessionRequest,
    ) -> std::io::Result<()> {
        let wanted = p.session_id.0.to_string();
        if let Err(e) = session_id(&wanted) {
            return self.wire.respond::<()>(id, Err(e));
        }
        if self.is_live(&wanted) {
            let error = Error::invalid_request().data(format!(
                "session {wanted} is open; close it (session/close) before deleting it"
            ));
            return self.wire.respond::<()>(id, Err(error));
        }
        let Some(found) = store::find(&self.projects.folders(), &wanted) else {
            return self
                .wire
                .respond::<()>(id, Err(Error::session_not_found(wanted)));
        };
        if let Err(e) = remove_stored(&found) {
            let error = Error::internal_error()
                .data(format!("cannot delete {}: {e}", found.path.display()));
            return self.wire.respond::<()>(id, Err(error));
        }
        self.wire.respond(id, Ok(DeleteSessionResponse::new()))
    }

    /// Focuses `session`, or `-32002` when it is not live on this connection.
    pub(super) fn not_served(&mut self, session: &SessionId) -> Option<Error> {
        (!self.focus(&session.0)).then(|| Error::session_not_found(session.clone()))
    }

    /// The session's answer to a step of a session request.
    pub(super) fn session_step(&mut self, step: Step, data: &Value) -> std::io::Result<()> {
        match step {
            Step::Switch { id, replay, title } => {
                self.c.stats.title = title;
                self.opened(id, replay)
            }
            Step::Replay(id) => self.replay(id, data),
        }
    }

    /// The focused session is open: `session/load` replays it next, `session/resume` is
    /// answered.
    fn opened(&mut self, id: RequestId, replay: bool) -> std::io::Result<()> {
        if replay {
            self.command(
                "get_messages",
                json!({}),
                Waiting::Session(Step::Replay(id)),
            );
            return Ok(());
        }
        let response = ResumeSessionResponse::new()
            .modes(self.modes())
            .config_options(self.config_options());
        self.wire.respond(id, Ok(response))?;
        self.opened_updates()
    }

    /// Replays the loaded history as updates, then answers `session/load`.
    fn replay(&mut self, id: RequestId, data: &Value) -> std::io::Result<()> {
        if self.wire.is_cancelled(&id) {
            // Answered -32800 already: the client does not want the history.
            return self.wire.respond::<()>(id, Err(Error::request_cancelled()));
        }
        let messages: Vec<AgentMessage> =
            serde_json::from_value(data["messages"].clone()).unwrap_or_default();
        let mut calls = Vec::new();
        let cwd = self.c.cwd.clone();
        let home = self.projects.home.clone();
        let place = updates::Place {
            cwd: &cwd,
            home: home.as_deref(),
        };
        // The whole history counts: what was counted of it before is forgotten.
        let title = self.c.stats.title.take();
        self.c.stats.restart(title);
        self.c.stats.add(&messages);
        for message in &messages {
            for update in updates::replay(message, place, &mut calls) {
                self.update(update)?;
            }
        }
        let response = LoadSessionResponse::new()
            .modes(self.modes())
            .config_options(self.config_options());
        self.wire.respond(id, Ok(response))?;
        self.opened_updates()
    }
}

impl<W: Write> Front<W> {
    /// What follows the answer to a session request: the slash commands, then the question
    /// whether the project may run its hooks, if it has any and nobody decided yet.
    fn opened_updates(&mut self) -> std::io::Result<()> {
        self.available_commands()?;
        self.check_trust()
    }
}

/// Unlinks the session file (one atomic step: the session is listed or it is not), makes that
/// durable, then removes the session's workflow gates beside it.
fn remove_stored(found: &Stored) -> std::io::Result<()> {
    std::fs::remove_file(&found.path)?;
    if let Some(dir) = found.path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
        // Stored sessions carry valid ids (`store::stored` skips the others); checked again
        // here, as nothing outside the folder may be removed.
        let gates = match crate::gates::store::GateStore::path_for(dir, &found.id) {
            Ok(gates) => gates,
            Err(e) => {
                log::warn!("{e}");
                return Ok(());
            }
        };
        if let Err(e) = std::fs::remove_file(&gates) {
            if e.kind() != std::io::ErrorKind::NotFound {
                log::warn!("cannot remove {}: {e}", gates.display());
            }
        }
    }
    Ok(())
}

/// A stored session as `session/list` shows it; one without a folder cannot be listed.
fn info(s: Stored) -> Option<SessionInfo> {
    let cwd = s.cwd?;
    Some(
        SessionInfo::new(s.id, cwd)
            .title(s.title)
            .updated_at((s.modified_ms > 0).then(|| crate::ids::iso_from_ms(s.modified_ms))),
    )
}

/// Where a page ends: the last session shown, in the list's order (latest change first, then
/// id). The next page starts after it, so sessions added meanwhile do not shift the pages.
#[derive(Debug, Clone, PartialEq)]
struct Cursor {
    modified_ms: u64,
    id: String,
}

impl Cursor {
    fn parse(text: &str) -> Option<Cursor> {
        let (ms, id) = text.split_once(':')?;
        Some(Cursor {
            modified_ms: ms.parse().ok()?,
            id: id.to_string(),
        })
    }

    fn text(&self) -> String {
        format!("{}:{}", self.modified_ms, self.id)
    }

    fn key(&self) -> (Reverse<u64>, &str) {
        (Reverse(self.modified_ms), &self.id)
    }
}

fn key(s: &Stored) -> (Reverse<u64>, &str) {
    (Reverse(s.modified_ms), &s.id)
}

/// One page of `stored`: those in folder `cwd` (all without), latest change first, after
/// `after`; and the cursor of the next page when more follow.
fn page(
    mut stored: Vec<Stored>,
    cwd: Option<&str>,
    after: Option<&Cursor>,
    size: usize,
) -> (Vec<Stored>, Option<Cursor>) {
    stored.retain(|s| cwd.is_none_or(|c| s.cwd.as_deref() == Some(c)));
    stored.retain(|s| after.is_none_or(|a| key(s) > a.key()));
    stored.sort_by(|a, b| key(a).cmp(&key(b)));
    let more = stored.len() > size;
    stored.truncate(size);
    let next = more.then(|| stored.last()).flatten().map(|s| Cursor {
        modified_ms: s.modified_ms,
        id: s.id.clone(),
    });
    (stored, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(id: &str, cwd: &str, modified_ms: u64) -> Stored {
        Stored {
            id: id.into(),
            path: PathBuf::from(format!("/s/{id}.jsonl")),
            cwd: Some(cwd.into()),
            title: None,
            modified_ms,
        }
    }

    fn ids(page: &[Stored]) -> Vec<&str> {
        page.iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn pages_follow_the_latest_change_and_filter_by_folder() {
        let all = vec![
            stored("a", "/p", 10),
            stored("b", "/q", 30),
            stored("c", "/p", 20),
            stored("d", "/p", 20),
        ];
        let (first, next) = page(all.clone(), None, None, 2);
        assert_eq!(ids(&first), ["b", "c"]);
        let next = next.expect("more follow");
        assert_eq!(Cursor::parse(&next.text()), Some(next.clone()));
        let (second, last) = page(all.clone(), None, Some(&next), 2);
        assert_eq!(ids(&second), ["d", "a"]);
        assert_eq!(last, None);
        let (p, _) = page(all.clone(), Some("/p"), None, 10);
        assert_eq!(ids(&p), ["c", "d", "a"]);
        // A session written since the first page moves to the top, not into the next page.
        let mut changed = all;
        changed.push(stored("e", "/p", 40));
        let (second, _) = page(changed, None, Some(&next), 2);
        assert_eq!(ids(&second), ["d", "a"]);
    }

    #[test]
    fn cursors_gjc_did_not_give_are_refused() {
        assert_eq!(Cursor::parse("nope"), None);
        assert_eq!(Cursor::parse("x:id"), None);
        assert_eq!(
            Cursor::parse("12:a:b"),
            Some(Cursor {
                modified_ms: 12,
                id: "a:b".into()
            })
        );
    }

    #[test]
    fn a_session_without_a_folder_is_not_listed() {
        let mut s = stored("a", "/p", 0);
        assert!(info(s.clone()).unwrap().updated_at.is_none());
        s.cwd = None;
        assert!(info(s).is_none());
    }
}
