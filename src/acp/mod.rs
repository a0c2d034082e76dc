//! `--mode acp`: the Agent Client Protocol (JSON-RPC 2.0, one message per line on stdio) as a
//! second front end beside RPC mode. The session, its tools, providers, session files and the
//! host broker are the ones RPC mode runs; only the threads that own stdin and stdout differ:
//!
//! - `gjc-acp-in` (`reader.rs`) reads and sorts lines, as `gjc-stdin` does in RPC mode;
//! - `gjc-acp` (`front.rs`) replaces `gjc-stdout`: it reads the same output lane, turns client
//!   requests into session commands and session events into `session/update` notifications,
//!   and serves the host broker's callbacks through the editor (`callbacks.rs`, and
//!   `terminal.rs` for the bash tool's commands when the editor offers terminals), and asks
//!   the editor whether a project with hooks may run them (`trust.rs`).
//!
//! Wire types come from the protocol's own schema crate (`agent-client-protocol-schema`).

pub mod callbacks;
pub mod commands;
pub mod front;
mod live;
mod mcp;
mod prompt;
pub mod reader;
pub mod sessions;
mod settings;
mod terminal;
mod trust;
mod turns;
pub mod updates;
pub mod usage;
pub mod wire;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::host::HostRequest;
use crate::lanes::ControlFrame;
use crate::output::OutRx;

/// Messages read ahead of the front end; past this the reader waits (backpressure on stdin).
const INBOX: usize = 256;

/// What the front end is connected to.
pub struct Connections {
    pub frames: OutRx,
    /// Starts the actor of each session the client opens (`None`: a front end that opens
    /// none, in unit tests).
    pub sessions: Option<crate::sessions::SessionHost>,
    /// The number of each session whose actor has returned.
    pub ended: Receiver<u64>,
    /// Signals, parent death, a closed stdout: every session shuts down.
    pub shutdowns: Receiver<ControlFrame>,
    pub host: Sender<HostRequest>,
    pub models: front::Models,
    pub projects: sessions::Projects,
    /// The sandbox policy of the default and plan modes (`--sandbox`, else `workspace-write`).
    pub sandbox: crate::protocol::sandbox::SandboxMode,
}

/// Starts the reader (never joined, as in RPC mode: a read blocked on a live stdin cannot be
/// interrupted) and returns the body of the front end thread, which the caller runs as the
/// writer. The body returns the error that ended stdout, if any.
pub fn start(c: Connections, max_line: usize) -> impl FnOnce() -> std::io::Result<()> + Send {
    let (to_front, inbox) = bounded(INBOX);
    let running = reader::Running::default();
    let cancel = reader::Cancel {
        running: running.clone(),
    };
    let reader = std::thread::Builder::new()
        .name("gjc-acp-in".into())
        .spawn(move || reader::run(std::io::stdin().lock(), to_front, max_line, cancel));
    if let Err(e) = reader {
        log::error!("cannot start the ACP reader: {e}");
    }
    move || {
        let (mut front, frames) = front::Front::new(std::io::stdout().lock(), c);
        front.running = running;
        front.run(inbox, frames)
    }
}
