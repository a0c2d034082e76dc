//! gjc: a coding agent driven over newline-delimited JSON on stdio (`gjc --mode rpc`).
//!
//! The process is a set of named OS threads that talk only through crossbeam channels:
//!
//! ```text
//! stdin ─► gjc-stdin ─┬─ control (abort, abort_bash, abort_retry) ─┐
//!                     ├─ commands (everything else, in order) ─────┼─► gjc-session ─► out ─► gjc-stdout ─► stdout
//!                     └─ host replies ─► gjc-host ──────────────────┼────────────────────┘
//!  gjc-provider (one per model request) ── ProviderMsg ───────────┤
//!  gjc-tool (one per tool call) ── ToolMsg ───────────────────────┤
//!  gjc-bash (owns child processes) ── BashEvent ──────────────────┘
//! ```
//!
//! `docs/architecture.md` describes owners, channels and shutdown; `docs/protocol.md` the wire.
#![deny(clippy::print_stdout)]

pub mod acp;
pub mod app;
pub mod cli;
pub mod client;
pub mod control;
pub mod entry;
pub mod exec;
pub mod export_html;
pub mod gates;
pub mod hooks;
pub mod host;
pub mod ids;
pub mod memory;
pub mod output;
pub mod prompt;
pub mod protocol;
pub mod provider;
pub mod registry;
pub mod rules;
pub mod secrets;
pub mod session;
pub mod tools;
pub mod transport;
pub mod workflow;
