//! Tools whose calls start on no thread of their own and are reported by someone else's thread
//! (an MCP server's tool: its reader thread hears the answer). The tool starts the call and hands
//! back a [`DirectCall`], which the session keeps to time the call out and to abort it.

use std::time::Instant;

use serde_json::Value;

use crate::protocol::message::ToolOutput;

/// What a call started this way reports, from whatever thread hears it.
pub enum DirectStep {
    Progress(ToolOutput),
    Done(ToolOutput),
}

/// Where a call's steps go (to the session, as the call's `ToolMsg`s).
pub type Report = Box<dyn Fn(DirectStep) + Send + Sync>;

pub trait DirectStart {
    /// Starts a call; `report` hears its progress and its end. `None` when it cannot start this
    /// way now (then it runs on a `gjc-tool` thread like any call).
    fn start(&self, args: &Value, call_id: &str, report: Report) -> Option<Box<dyn DirectCall>>;
}

/// A call under way that no thread of its own waits for.
pub trait DirectCall: Send {
    /// When it times out, as it stands; `None` when it keeps no clock.
    fn deadline(&self) -> Option<Instant>;
    /// The result it ends with once past its deadline (it is given up); `None` while it has
    /// time, or when its end is already on its way.
    fn expire(&self, now: Instant) -> Option<ToolOutput>;
    /// Gives it up (the run was aborted).
    fn abort(&self);
}
