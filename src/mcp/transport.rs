//! How the client reaches a server. The client only sends messages and closes; what arrives is
//! handed to it by the transport's own readers (stdio: one per process; streamable HTTP: one per
//! POST in flight and one for the GET stream), so the client does not know which transport it speaks over.

use serde_json::Value;

use super::client::Failure;

/// What a transport's reader hands the client.
pub enum Incoming {
    /// One JSON-RPC message.
    Message(Value),
    /// The connection is gone (the process exited, or its output was not MCP): why, in words.
    Closed(String),
    /// The server forgot the connection's session (streamable HTTP): gone like `Closed`, but
    /// nothing crashed, so the next call opens a new session at once, without back-off.
    Expired(String),
    /// One request got no answer (its HTTP exchange failed); the connection goes on.
    Failed { id: Value, failure: Failure },
}

/// Delivers what arrives, from the transport's reader thread.
pub type Deliver = Box<dyn Fn(Incoming) + Send + Sync>;

pub trait Transport: Send + Sync {
    /// Sends one message; an error when the connection is gone.
    fn send(&self, message: &Value) -> Result<(), String>;
    /// Ends the connection and whatever serves it; returns once it is gone (bounded).
    fn close(&self);
}
