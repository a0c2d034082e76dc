//! MCP servers as tools: our own serde-level protocol handling (no SDK, no async runtime), a
//! JSON-RPC client generic over its transport (stdio or streamable HTTP), the configuration
//! files, the names tools reach the model under and the adapter that makes a server's tool one
//! of the session's tools. The session owns its servers (`crate::session::mcp`).

pub mod call;
pub mod client;
pub mod config;
pub mod handshake;
pub mod http;
mod http_get;
mod http_read;
pub mod names;
mod outgoing;
pub mod server;
pub mod stdio;
pub mod tool;
pub mod transport;
