//! The unattended control plane: what an external agent declared it may do (actor, budget,
//! scopes, action classes), and the checks the session consults before anything runs on its
//! behalf. It never drives the session; the session asks it.

pub mod classify;
mod lex;

pub use classify::{classify_bash, is_read_only, ActionClass};
