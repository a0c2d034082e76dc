//! gjc: a coding agent driven over newline-delimited JSON on stdio (`gjc --mode rpc`) or the Agent
//! Client Protocol (`gjc --mode acp`).
//!
//! The process is a set of named OS threads that talk only through crossbeam channels. Two front
//! ends sit over one session host (`sessions`), which runs each live session as an actor on a
//! `gjc-session` thread of its own: RPC mode one, ACP mode one per `session/new` (and per
//! `session/load` or `session/resume` of a session that is not live). `new_session`,
//! `switch_session` and `branch` replace a session's actor on that thread, behind the same lanes
//! (`session::swap`). The settings (`settings::Settings`) are resolved once at start and passed
//! down to each part as it is built.
//!
//! ```text
//!           RPC (--mode rpc)                            ACP (--mode acp)
//! stdin ─► gjc-stdin ─┬─ host replies ─► gjc-host   stdin ─► gjc-acp-in ─► gjc-acp ─► stdout
//!                     │ control; commands                        │              │ commands,
//!                     │ (through gjc-stdin-queue                 │ cancel       │ control
//!                     │ when the lane is full)                   │ (control)    │
//!                     ▼                                          ▼              ▼
//! ┌──── session host (src/sessions): starts, routes to and reaps session actors ────┐
//! │  RPC: one gjc-session                       ACP: gjc-session  gjc-session  …    │
//! └────────┬──────────────────────────────────────────────────┬─────────────────────┘
//!          │ frames tagged with the session's number          │
//!          ▼                                                  ▼
//! output lane ─► gjc-stdout ─► stdout              output lane ─► gjc-acp (above) ─► stdout
//!
//! Each gjc-session hands work to, and hears back from:
//!   gjc-provider  a kept worker per model request ── ProviderMsg   (waits as gjc-idle)
//!   gjc-tool      a kept worker per tool call ── ToolMsg           (waits as gjc-idle)
//!   gjc-bash      one per process: every shell command, tagged with its session ── BashEvent
//!   gjc-host      one per process: host callbacks, tagged with their session ─► output lane
//!   gjc-hook      short-lived: observer and before_prompt hooks
//!   gjc-load      scoped: one range of a session file being loaded
//!   gjc-list      one list_sessions listing         gjc-discover  one model discovery
//!   gjc-mcp-*     its MCP servers: -start, -read, -stderr, -list (-spawn: one per process)
//! And for the process: gjc-signal (signals, parent death; or gjc-parent, a pid poll) ─► shutdown
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
pub mod lanes;
#[cfg(feature = "agent")]
pub mod lines;
#[cfg(feature = "agent")]
pub mod loader;
#[cfg(feature = "agent")]
pub mod mcp;
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
pub mod sched;
#[cfg(feature = "agent")]
pub mod secrets;
#[cfg(feature = "agent")]
pub mod session;
#[cfg(feature = "agent")]
pub mod sessions;
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
