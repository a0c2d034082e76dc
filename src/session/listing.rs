//! `list_sessions`: a summary of every session file in the project's folder (or in all of them).
//! Each summary reads its whole file to count the messages, which for a long session takes a
//! while (about 120 ms for a 127 MB file), so the listing runs on a `gjc-list` thread and the
//! command is answered when it reports, while the commands after it (an `abort` too) are handled
//! as usual. At shutdown a listing still running is waited for, briefly.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::reply::Reply;
use super::SessionLoop;
use crate::protocol::{reply, Response};

/// What a `gjc-list` thread found, for the request it answers.
pub struct Listed {
    id: Option<Value>,
    sessions: Vec<crate::protocol::reply::SessionSummary>,
}

/// How long shutdown waits for a listing still running before it answers it with an error.
const AT_SHUTDOWN: Duration = Duration::from_secs(2);

impl SessionLoop {
    pub(super) fn list_sessions(&mut self, id: Option<Value>, all: bool) -> Reply {
        let root: PathBuf = self.state.sessions_root.clone();
        let dir: PathBuf = self.state.session_dir.clone();
        let done = self.side.listing_reporter();
        let request = id.clone();
        let spawned = std::thread::Builder::new()
            .name("gjc-list".into())
            .spawn(move || {
                let sessions = super::store::list(&root, &dir, all);
                let _ = done.send(Listed {
                    id: request,
                    sessions,
                });
            });
        match spawned {
            Ok(_) => {
                self.side.listing_started();
                Reply::later()
            }
            Err(e) => Reply::now(Response::err(
                id,
                "list_sessions",
                format!("cannot list sessions: {e}"),
            )),
        }
    }

    pub(super) fn on_listed(&mut self, listed: Listed) {
        self.side.listing_done();
        let sessions = reply::Sessions {
            sessions: listed.sessions,
        };
        self.respond(Response::ok(listed.id, "list_sessions", Some(&sessions)));
    }

    /// Every listing still running gets its answer before the session ends: the listing if it
    /// comes soon, else an error.
    pub(super) fn answer_listings(&mut self) {
        let deadline = std::time::Instant::now() + AT_SHUTDOWN;
        while self.side.listings_running() > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.side.next_listing(left) {
                Some(listed) => self.on_listed(listed),
                None => break,
            }
        }
        let running = self.side.listings_running();
        if running > 0 {
            log::warn!("{running} session listings still running at shutdown");
        }
    }
}
