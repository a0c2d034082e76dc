//! gjc: a coding agent driven over newline-delimited JSON on stdio (`gjc --mode rpc`).
//!
//! The process is a set of named OS threads that talk only through crossbeam channels:
//!
//! ```text
//! stdin ─► gjc-stdin ─┬─ control (abort, abort_bash, abort_retry) ─┐
//!                     ├─ commands (everything else, in order) ─────┼─► gjc-session ─► out ─► gjc-stdout ─► stdout
//!                     └─ host replies ─► gjc-host ──────────────────┼────────────────────┘
//!  gjc-provider (a kept thread per model request) ── ProviderMsg ─┤
//!  gjc-tool (a kept thread per tool call) ── ToolMsg ─────────────┤
//!  gjc-bash (owns child processes) ── BashEvent ──────────────────┘
//! ```
//!
//! `docs/architecture.md` describes owners, channels and shutdown; `docs/protocol.md` the wire.
//!
//! Features: `agent` (the default) is the whole program. `client` alone builds only
//! [`protocol`] and [`client`], for Rust hosts that drive a `gjc` binary:
//! `gjc = { version = "0.1", default-features = false, features = ["client"] }`.
#![deny(clippy::print_stdout)]

// The agent's safety promises are kept by Linux (Landlock, seccomp, openat2); elsewhere it would
// have to run commands unconfined, so it does not build there. The client builds on any Unix.
#[cfg(all(feature = "agent", not(target_os = "linux")))]
compile_error!(
    "the gjc agent runs on Linux only (its sandbox is Landlock and seccomp); \
     hosts on other Unix-like systems depend on the `client` feature alone"
);

#[cfg(feature = "agent")]
pub mod acp;
#[cfg(feature = "agent")]
pub mod app;
#[cfg(feature = "agent")]
pub mod cli;
pub mod client;
#[cfg(feature = "agent")]
pub mod control;
#[cfg(feature = "agent")]
pub mod entry;
#[cfg(feature = "agent")]
pub mod exec;
#[cfg(feature = "agent")]
pub mod export_html;
#[cfg(feature = "agent")]
pub mod fs;
#[cfg(feature = "agent")]
pub mod gates;
#[cfg(feature = "agent")]
pub mod hooks;
#[cfg(feature = "agent")]
pub mod host;
pub mod ids;
#[cfg(feature = "agent")]
pub mod memory;
#[cfg(feature = "agent")]
pub mod output;
#[cfg(feature = "agent")]
pub mod park;
#[cfg(feature = "agent")]
pub mod prompt;
pub mod protocol;
#[cfg(feature = "agent")]
pub mod provider;
#[cfg(feature = "agent")]
pub mod registry;
#[cfg(feature = "agent")]
pub mod room;
#[cfg(feature = "agent")]
pub mod rules;
#[cfg(all(feature = "agent", target_os = "linux"))]
pub mod sandbox;
#[cfg(feature = "agent")]
pub mod secrets;
#[cfg(feature = "agent")]
pub mod session;
#[cfg(feature = "agent")]
pub mod settings;
#[cfg(feature = "agent")]
pub mod tools;
#[cfg(feature = "agent")]
pub mod transport;
#[cfg(feature = "agent")]
pub mod trust;
#[cfg(feature = "agent")]
pub mod workers;
#[cfg(feature = "agent")]
pub mod workflow;
