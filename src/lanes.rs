//! The lanes a front end hands a session's work on, below both front ends: the control lane
//! (cancellations, shutdown, end of input), which overtakes everything, and the ordered command
//! lane. RPC's reader and ACP's front end fill them; a session actor takes from its own pair.

use serde_json::Value;

use crate::protocol::{Command, Response};

/// Frames the command lane holds (RPC's reader then falls back to its lookahead).
pub const COMMAND_QUEUE: usize = 1024;
/// Frames the control lane holds. Every cancellation is answered, so a host that sends them
/// without reading stdout would otherwise grow the lane; past this the sender waits.
pub const CONTROL_QUEUE: usize = 64;

/// The control lane: overtakes every queued command.
#[derive(Debug)]
pub enum ControlFrame {
    Command {
        id: Option<Value>,
        command: Command,
    },
    /// A signal, parent death or a closed stdout: shut down as at stdin EOF.
    Shutdown(&'static str),
    /// Stdin reached EOF. Sent at once, even while commands are queued: every command read
    /// before it is still answered, then the session shuts down.
    InputClosed,
}

/// The ordered command lane.
#[derive(Debug)]
pub enum CommandFrame {
    Command {
        id: Option<Value>,
        command: Command,
    },
    /// A line that could not be decoded; answered in its place in the order.
    Invalid(Response),
    /// What tool calls started from now on may do (a front end's modes and permissions).
    Policy(crate::tools::guard::ToolPolicy),
}
