//! Test support: the real binary (`gjc.rs`) and a loopback model provider (`fake_provider.rs`).
#![allow(dead_code)]

pub mod contract;
pub mod fake_provider;
pub mod gjc;
pub mod procfs;
pub mod schemas;

pub use fake_provider::{Chunk, FakeProvider, Reply};
pub use gjc::{gjc, types, Gjc, TIMEOUT};
