//! The integration tests: one binary that spawns the real gjc and speaks JSON lines to it.

mod support;
