//! How the client reaches a server. The client only sends messages and closes; what arrives is
//! handed to it by the transport's own reader, so another transport (streamable HTTP, where each
//! POST's answer is read on the caller's side) slots in behind the same trait.

use serde_json::Value;

/// What a transport's reader hands the client.
pub enum Incoming {
    /// One JSON-RPC message.
    Message(Value),
    /// The connection is gone (the process exited, or its output was not MCP): why, in words.
    Closed(String),
}

/// Delivers what arrives, from the transport's reader thread.
pub type Deliver = Box<dyn Fn(Incoming) + Send + Sync>;

pub trait Transport: Send + Sync {
    /// Sends one message; an error when the connection is gone.
    fn send(&self, message: &Value) -> Result<(), String>;
    /// Ends the connection and whatever serves it; returns once it is gone (bounded).
    fn close(&self);
}
