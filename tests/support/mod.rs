//! Test support: the real binary (`gjc.rs`) and a loopback model provider (`fake_provider.rs`).
#![allow(dead_code)]

pub mod contract;
pub mod fake_provider;
pub mod gjc;
pub mod procfs;
pub mod receipt;
pub mod schemas;

pub use fake_provider::{Chunk, FakeProvider, Reply};

/// Gives a command that runs gjc (or a process that starts it) a home and agent dir of its own,
/// removed with the returned folder: no test writes to the real `~/.gjc` (session files,
/// registry records).
pub fn isolate(command: &mut std::process::Command) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("a temporary home");
    command
        .env("HOME", home.path())
        .env("GJC_CODING_AGENT_DIR", home.path().join("agent"));
    home
}
pub use gjc::{gjc, types, Gjc, TIMEOUT};
