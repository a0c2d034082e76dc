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

/// A command in the command lane, with the id it came with.
#[derive(Debug)]
pub struct Queued {
    pub id: Option<Value>,
    pub command: Command,
}

impl CommandFrame {
    pub fn command(id: Option<Value>, command: Command) -> CommandFrame {
        CommandFrame::Command(Box::new(Queued { id, command }))
    }
}

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

/// The ordered command lane. Its payloads are boxed: the lane is an array of `COMMAND_QUEUE`
/// slots allocated and initialised when a session starts, so each slot's size is paid a thousand
/// times over in every idle process (248 KB with the command in the slot, 24 KB boxed).
#[derive(Debug)]
pub enum CommandFrame {
    Command(Box<Queued>),
    /// A line that could not be decoded; answered in its place in the order.
    Invalid(Box<Response>),
    /// What tool calls started from now on may do (a front end's modes and permissions).
    Policy(crate::tools::guard::ToolPolicy),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every session allocates and initialises all of its command lane's slots when it starts
    /// (crossbeam's bounded channel is an array), so they must stay small.
    #[test]
    fn the_command_lane_preallocates_little() {
        // A slot is the frame and a stamp.
        let slot = std::mem::size_of::<CommandFrame>() + std::mem::size_of::<usize>();
        assert!(
            slot * COMMAND_QUEUE <= 64 * 1024,
            "{slot} bytes a slot, {} KB a lane",
            slot * COMMAND_QUEUE / 1024
        );
    }
}
