//! The integration tests: one binary that spawns the real gjc and speaks JSON lines to it.

mod support;

/// Compaction, manual and automatic.
mod compaction;
/// Documentation stays in step with the code.
mod docs;
/// Aborts, retries and provider faults.
mod faults;
/// Framing, bad input, lifecycle and the command line.
mod framing;
/// Spill files, escaped children, the parent watch, keys and crashes.
mod hardening_process;
/// Host tools, host URIs, extension UI and the ask tool.
mod host;
/// Prompts, tool loops, steering and follow-ups.
mod prompt;
/// Recorded provider streams and what is sent back.
mod providers;
/// Sessions on disk.
mod sessions;
/// Commands that need no model.
mod state;
