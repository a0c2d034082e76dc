//! The live sessions of an ACP connection: one [`Conversation`] each (the front end's state of
//! that session: its prompt turn, tool calls shown, modes, model, statistics), keyed by session
//! id, and the session host that runs their actors.
//!
//! The front end works on one conversation at a time, `Front::c`: before it handles a request
//! naming a session, or a frame a session queued, it brings that session's conversation there
//! (`focus`), so the handlers written for one session serve each of many.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::mem;
use std::path::PathBuf;

use super::front::{Front, Shown, Turn};
use crate::lanes::ControlFrame;
use crate::sessions::Live;

/// The front end's state of one live session.
pub struct Conversation {
    /// The session's actor; `None` for the empty stand-in while no session is focused.
    pub(super) live: Option<Live>,
    /// The session id as the client knows it (empty for the stand-in).
    pub(super) session: String,
    pub(super) cwd: PathBuf,
    /// The skills offered as slash commands (the project's and the user's).
    pub(super) skills: Vec<crate::prompt::Skill>,
    pub(super) turn: Option<Turn>,
    pub(super) shown: HashMap<String, Shown>,
    /// Tools the user allowed for the rest of the session ("allow always").
    pub(super) always: HashSet<String>,
    pub(super) mode: &'static str,
    pub(super) permissions: &'static str,
    pub(super) model: Option<String>,
    /// Context use, cost and title, sent after each turn.
    pub(super) stats: super::usage::SessionStats,
    /// When it started, in milliseconds since the epoch: its place in `session/list` until its
    /// file exists.
    pub(super) started_ms: u64,
    /// The MCP servers the editor gave for this session (`mcp.rs`).
    pub(super) editor_mcp: Vec<String>,
}

impl Conversation {
    pub(super) fn new(
        live: Option<Live>,
        session: String,
        cwd: PathBuf,
        model: Option<String>,
        windows: HashMap<String, u64>,
    ) -> Conversation {
        Conversation {
            live,
            session,
            cwd,
            skills: Vec::new(),
            turn: None,
            shown: HashMap::new(),
            always: HashSet::new(),
            mode: "default",
            permissions: "ask",
            model,
            stats: super::usage::SessionStats::new(windows),
            started_ms: crate::ids::now_ms(),
            editor_mcp: Vec::new(),
        }
    }
}

impl<W: Write> Front<W> {
    /// Brings the conversation of `session` to `self.c`; false when it is not live.
    pub(super) fn focus(&mut self, session: &str) -> bool {
        if self.c.live.is_some() && self.c.session == session {
            return true;
        }
        let Some(next) = self.parked.remove(session) else {
            return false;
        };
        let previous = mem::replace(&mut self.c, next);
        self.park(previous);
        true
    }

    /// Brings the conversation whose actor queued frames tagged `number`; false when that
    /// session has been closed (its late frames belong to nobody).
    pub(super) fn focus_number(&mut self, number: u64) -> bool {
        match self.numbers.get(&number).cloned() {
            Some(session) => self.focus(&session),
            None => false,
        }
    }

    fn park(&mut self, conversation: Conversation) {
        if conversation.live.is_some() {
            self.parked
                .insert(conversation.session.clone(), conversation);
        }
    }

    /// The live sessions as `session/list` shows them, for those not written to a file yet.
    pub(super) fn live_listed(&self) -> Vec<crate::session::store::Stored> {
        let focused = Some(&self.c).filter(|c| c.live.is_some());
        focused
            .into_iter()
            .chain(self.parked.values())
            .map(|c| crate::session::store::Stored {
                id: c.session.clone(),
                path: PathBuf::new(),
                cwd: Some(c.cwd.to_string_lossy().into_owned()),
                title: c.stats.title.clone(),
                modified_ms: c.started_ms,
            })
            .collect()
    }

    /// Whether `session` is live on this connection.
    pub(super) fn is_live(&self, session: &str) -> bool {
        (self.c.live.is_some() && self.c.session == session) || self.parked.contains_key(session)
    }

    /// Starts a session actor working in `cwd` and focuses its new conversation, shown to the
    /// client as `shown_as` (a stored session's id, once the actor has switched to it).
    pub(super) fn start_session(
        &mut self,
        cwd: PathBuf,
        shown_as: Option<String>,
    ) -> Result<(), String> {
        let Some(sessions) = self.sessions.as_mut() else {
            return Err("gjc is shutting down".into());
        };
        let live = sessions
            .start(None, cwd.clone())
            .map_err(|e| e.to_string())?
            .live;
        let session = shown_as.unwrap_or_else(|| live.id.clone());
        self.numbers.insert(live.number, session.clone());
        let mut conversation = Conversation::new(
            Some(live),
            session,
            cwd.clone(),
            self.default_model.clone(),
            self.windows.clone(),
        );
        if self.projects.skills {
            conversation.skills = crate::prompt::find_skills(&self.projects.agent_dir, &cwd);
        }
        let previous = mem::replace(&mut self.c, conversation);
        self.park(previous);
        self.send_policy();
        Ok(())
    }

    /// Ends the focused session's actor and forgets its conversation; its late frames are
    /// dropped.
    pub(super) fn end_focused(&mut self) {
        let ended = mem::replace(
            &mut self.c,
            Conversation::new(None, String::new(), PathBuf::new(), None, HashMap::new()),
        );
        if let Some(live) = ended.live {
            self.numbers.remove(&live.number);
            live.close();
        }
    }

    /// A session's actor has returned: its thread is joined, its conversation forgotten. Once
    /// stdin has closed and the last one has ended, the front end lets the lane close.
    pub(super) fn session_ended(&mut self, number: u64) {
        if let Some(sessions) = self.sessions.as_mut() {
            sessions.reap(number);
        }
        if let Some(session) = self.numbers.remove(&number) {
            if self.focus(&session) {
                let _ = mem::replace(
                    &mut self.c,
                    Conversation::new(None, String::new(), PathBuf::new(), None, HashMap::new()),
                );
            }
        }
        self.finish_if_done();
    }

    /// Every live session is told stdin has closed: it answers what it was sent, then returns.
    pub(super) fn input_closed_all(&mut self) {
        let focused = self.c.live.iter_mut();
        for live in focused.chain(self.parked.values_mut().filter_map(|c| c.live.as_mut())) {
            live.input_closed();
        }
    }

    /// Every live session gets `frame` (a signal).
    pub(super) fn tell_all(&mut self, frame: impl Fn() -> ControlFrame) {
        let focused = self.c.live.iter();
        for live in focused.chain(self.parked.values().filter_map(|c| c.live.as_ref())) {
            live.control(frame());
        }
    }

    /// After stdin closed: with no session running, the host goes (it holds the output lane
    /// open) and the broker stops, so the lane closes once drained and the front end returns.
    pub(super) fn finish_if_done(&mut self) {
        let running = self.sessions.as_ref().map_or(0, |s| s.running());
        if self.closing && running == 0 && self.sessions.is_some() {
            self.sessions = None;
            let _ = self.host.send(crate::host::HostRequest::Shutdown {
                reason: "RPC client disconnected".into(),
            });
        }
    }
}
