//! The session host: starts, routes to and stops session actors. Each live session is a
//! `SessionLoop` on its own `gjc-session` thread owning everything of one conversation (cwd and
//! project context, model, history, tools, todos, hooks and rules, gates, sandbox policy). What
//! the sessions share is process-wide and handed to each as a handle: the output lane (frames
//! tagged with the session's number), the bash thread (commands tagged the same way), the host
//! broker (callbacks tagged too) and the provider connection pool.
//!
//! Both front ends drive sessions through it: RPC starts one, ACP one per `session/new`,
//! `session/load` or `session/resume`. A front end talks to a session through its [`Live`]
//! handle (the session's own control and command lanes); the host learns of a session's end on
//! the channel [`SessionHost::new`] returns, which carries the session's number.

pub mod blueprint;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

use crate::exec::BashHandle;
use crate::host::HostHandle;
use crate::lanes::{CommandFrame, ControlFrame, COMMAND_QUEUE, CONTROL_QUEUE};
use crate::output::OutTx;
use crate::protocol::host_reply::HostReply;
use crate::session::swap::{Handover, Parts, Successor};
use crate::session::{Channels, SessionLoop};
pub use blueprint::Blueprint;

/// The handles of one live session, for the front end that drives it.
pub struct Live {
    pub id: String,
    /// The tag of its frames on the output lane.
    pub number: u64,
    pub cwd: PathBuf,
    control: Sender<ControlFrame>,
    /// `None` once the front end has no more commands for it (`input_closed`).
    commands: Option<Sender<CommandFrame>>,
}

impl Live {
    /// Queues a command in order; false at once when the session's lane is full or it ended.
    pub fn command(&self, frame: CommandFrame) -> bool {
        self.commands
            .as_ref()
            .is_some_and(|lane| lane.try_send(frame).is_ok())
    }

    /// The front end's input has ended: the session answers the commands already queued, then
    /// returns. Its command lane is let go here, as the session drains it until it disconnects.
    pub fn input_closed(&mut self) {
        self.control(ControlFrame::InputClosed);
        self.commands = None;
    }

    /// A frame on the control lane, ahead of every queued command.
    pub fn control(&self, frame: ControlFrame) {
        let _ = self.control.send(frame);
    }

    /// The ordered command lane and the control lane, for RPC's reader (which waits for room in it). The caller
    /// takes it over: the session sees its input end when every holder has let it go.
    pub fn into_lanes(mut self) -> (Sender<CommandFrame>, Sender<ControlFrame>) {
        let commands = self.commands.take().expect("a new session's command lane");
        (commands, self.control)
    }

    /// The control lane, for a reader that cancels a run itself.
    pub fn control_lane(&self) -> Sender<ControlFrame> {
        self.control.clone()
    }

    /// Ends the session: its run is aborted and its actor returns.
    pub fn close(&self) {
        self.control(ControlFrame::Shutdown("session closed"));
    }
}

/// A session just started, with the lanes only RPC's reader uses besides the [`Live`] handle.
pub struct Started {
    pub live: Live,
    /// Told when the session takes a command (the RPC reader waits for room with it).
    pub room: crate::room::Room,
    /// Host tool answers for the session (RPC's `host_tool_*` replies).
    pub host_answers: Sender<HostReply>,
}

pub struct SessionHost {
    /// Shared with the session threads, which start a session's successor from it.
    blueprint: Arc<Blueprint>,
    bash: BashHandle,
    host: HostHandle,
    out: OutTx,
    /// The last session number given (0 is the process's own frames).
    next: u64,
    /// The last actor number given: a session's first actor has the session's number, each
    /// successor a new one above every session's, so that ending an actor's commands and
    /// callbacks (tagged with it) never touches its successor's.
    actors: Arc<AtomicU64>,
    ended: Sender<u64>,
    threads: HashMap<u64, JoinHandle<()>>,
}

impl SessionHost {
    /// A host starting sessions from `blueprint` over the shared threads; the receiver gets the
    /// number of each session whose actor has returned.
    pub fn new(
        blueprint: Blueprint,
        bash: BashHandle,
        host: HostHandle,
        out: OutTx,
    ) -> (SessionHost, Receiver<u64>) {
        let (ended, ends) = unbounded();
        let host = SessionHost {
            blueprint: Arc::new(blueprint),
            bash,
            host,
            out,
            next: 0,
            actors: Arc::new(AtomicU64::new(ACTORS_FROM)),
            ended,
            threads: HashMap::new(),
        };
        (host, ends)
    }

    pub fn blueprint(&self) -> &Blueprint {
        &self.blueprint
    }

    /// Sessions whose actor has not been reaped (`reap`) yet.
    pub fn running(&self) -> usize {
        self.threads.len()
    }

    /// Starts a session with id `id` (a new one when `None`) working in `cwd` (canonical).
    pub fn start(&mut self, id: Option<String>, cwd: PathBuf) -> Result<Started, StartError> {
        let id = id.unwrap_or_else(crate::ids::uuid_v7);
        let state = self
            .blueprint
            .session(id.clone(), cwd.clone())
            .map_err(StartError::Tools)?;
        self.next += 1;
        let number = self.next;
        let (out, out_drained) = self.out.for_session(number);
        let (control_tx, control) = bounded(CONTROL_QUEUE);
        let (commands_tx, commands) = bounded(COMMAND_QUEUE);
        let (taken, room) = crate::room::room();
        let (provider_tx, provider) = bounded(PROVIDER_QUEUE);
        let (tool_tx, tool) = unbounded();
        let (bash_tx, bash_events) = unbounded();
        // Unbounded like the broker's lane: an answer is handed on at once, so one behind it
        // (an abort) is never held up.
        let (host_answers_tx, host_answers) = unbounded();
        let channels = Channels {
            control,
            commands,
            taken,
            out: out.clone(),
            out_drained,
            provider_tx,
            provider,
            tool_tx,
            tool,
            bash_tx,
            bash_events,
            host_answers_tx: host_answers_tx.clone(),
            host_answers,
        };
        let session = SessionLoop::new(
            state,
            channels,
            self.bash.for_session(number),
            self.host.for_session(number, out.clone()),
            self.blueprint.compact_updates,
            self.blueprint.registry(&cwd),
            self.blueprint.sandbox(cwd.clone()),
        );
        let ended = self.ended.clone();
        let succession = Succession {
            blueprint: self.blueprint.clone(),
            bash: self.bash.clone(),
            host: self.host.clone(),
            out,
            actors: self.actors.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("gjc-session".into())
            .spawn(move || {
                log::debug!("session {number} started");
                let panic_here = succession.blueprint.settings.test_panic.clone();
                crate::exec::test_panic_point(panic_here.as_deref());
                succession.serve(session);
                log::debug!("session {number} stopped");
                let _ = ended.send(number);
            })
            .map_err(StartError::Thread)?;
        self.threads.insert(number, thread);
        let live = Live {
            id,
            number,
            cwd,
            control: control_tx,
            commands: Some(commands_tx),
        };
        Ok(Started {
            live,
            room,
            host_answers: host_answers_tx,
        })
    }

    /// Joins the thread of session `number`, which has reported its end.
    pub fn reap(&mut self, number: u64) {
        if let Some(thread) = self.threads.remove(&number) {
            if thread.join().is_err() {
                log::debug!("session {number} ended by a panic");
            }
        }
    }
}

/// Why a session could not start.
#[derive(Debug)]
pub enum StartError {
    /// The tool set names a tool that does not exist.
    Tools(crate::tools::RegistryError),
    /// The session's thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Tools(e) => write!(f, "{e}"),
            StartError::Thread(e) => write!(f, "cannot start a session thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Tools(e) => Some(e),
            StartError::Thread(e) => Some(e),
        }
    }
}

/// Model stream events a session may lag behind its provider thread before that thread waits.
/// The lane is an array allocated in full when the session starts, so its slots stay small
/// (`provider::ProviderEvent` boxes the once-a-turn whole message).
const PROVIDER_QUEUE: usize = 256;

/// Successors' actor numbers start here, far above any session's number.
const ACTORS_FROM: u64 = 1 << 40;

/// What a session's thread needs to start the successors of its actor (`session::swap`).
struct Succession {
    blueprint: Arc<Blueprint>,
    bash: BashHandle,
    host: HostHandle,
    /// The session's output lane, tagged with its number: the front end sees one session.
    out: OutTx,
    actors: Arc<AtomicU64>,
}

impl Succession {
    /// Runs `session`, then each successor it hands over to, until one returns for good.
    fn serve(&self, session: SessionLoop) {
        let mut handover = session.run();
        while let Some(next) = handover {
            handover = match self.successor(next) {
                Some((session, successor)) => session.run_after(successor),
                None => None,
            };
        }
    }

    /// The successor's actor, made from the blueprint. `None` (the session ends, as at a
    /// shutdown) only when its tool set cannot be built, which start-up already checked.
    fn successor(&self, mut next: Handover) -> Option<(SessionLoop, Successor)> {
        let actor = self.actors.fetch_add(1, Ordering::Relaxed) + 1;
        let (id, cwd) = (next.successor.id.clone(), next.successor.cwd.clone());
        let opened = self.blueprint.open(id, cwd, next.take_opening());
        let state = match opened {
            Ok(state) => state,
            Err(e) => {
                log::error!("cannot start the next session: {e}");
                return None;
            }
        };
        let parts = Parts {
            bash: self.bash.for_session(actor),
            host: self.host.for_session(actor, self.out.clone()),
            sandbox: self.blueprint.sandbox(state.cwd.clone()),
            state,
        };
        log::debug!("actor {actor} succeeds");
        Some(SessionLoop::succeed(next, parts))
    }
}

#[cfg(test)]
mod tests;
