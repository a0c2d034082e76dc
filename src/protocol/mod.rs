//! The wire protocol: typed inbound commands and host replies, outbound frames and events, and
//! the message model they carry. This module holds no logic beyond decoding.
//!
//! Conventions (docs/protocol.md has the full rules): one JSON object per line; `id` echoed on
//! every response to a command that carried one; absent optional fields are omitted, and both
//! absent and `null` are accepted inbound; unknown inbound fields are ignored.

pub mod command;
pub mod decode;
pub mod event;
pub mod frame;
pub mod gate;
pub mod host_reply;
pub mod mcp;
pub mod message;
pub mod outbound;
pub mod reply;
pub mod sandbox;
pub mod schema;
pub mod tagged;
pub mod terminal;

pub use command::Command;
pub use decode::{decode_line, Inbound, MAX_LINE_BYTES};
pub use event::AgentEvent;
pub use frame::{Event, EventFrame, Frame, ResponseFrame};
pub use host_reply::HostReply;
pub use outbound::{
    Data, FlatFrame, Outbound, Ready, Response, Show, TypedError, CAPABILITIES, PROTOCOL_VERSION,
};
