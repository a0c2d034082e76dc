//! The integration tests: one binary that spawns the real gjc and speaks JSON lines to it.

mod support;

/// Compaction, manual and automatic.
mod compaction;
/// Documentation stays in step with the code.
mod docs;
/// The standing fault suite: every provider fault ends the run once, with balanced messages.
mod fault_suite;
/// Aborts, retries and provider faults.
mod faults;
/// Framing, bad input, lifecycle and the command line.
mod framing;
/// Provider limits: SSE sizes, secrets in logs, retry-after.
mod hardening_provider;
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
