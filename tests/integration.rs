//! The integration tests: one binary that spawns the real gjc and speaks JSON lines to it.

mod support;

/// `--mode acp`: the Agent Client Protocol over stdio.
mod acp;
/// The unattended audit trail: one numbered record per event.
mod audit_trail;
/// A host that stops reading stdout.
mod backpressure;
/// Compaction, manual and automatic.
mod compaction;
/// Confined file writes: write and edit stay beneath the write roots.
mod confine;
/// Model requests over kept-alive connections.
mod connections;
/// What the published client requires of every frame.
mod contract;
/// Documentation stays in step with the code.
mod docs;
/// The standing fault suite: every provider fault ends the run once, with balanced messages.
mod fault_suite;
/// Aborts, retries and provider faults.
mod faults;
/// Framing, bad input, lifecycle and the command line.
mod framing;
/// A standing corpus of random, mutated and pathological lines.
mod fuzz;
/// Workflow gates: hashes, answer outcomes, the ask tool's gate, durability.
mod gates;
/// Workflow gates at their edges: answers after an abort, frame order, wide gate numbers.
mod gates_races;
/// `checkpoint_for_handoff`: refusals, the receipt, another process continuing the session.
mod handoff;
/// `handoff`: the document, the new session that continues with it, and the refusals.
mod handoff_document;
/// Hostile input volumes: long lines, floods without reading, EOF behind a full queue.
mod hardening_input;
/// Spill files, escaped children, the parent watch, keys and crashes.
mod hardening_process;
/// Provider limits: SSE sizes, secrets in logs, retry-after.
mod hardening_provider;
/// The session file under stress, context usage after compaction, command-line mistakes.
mod hardening_store;
/// File tools under hostile input: special files, endless lines, stray schemes, symlinks.
mod hardening_tools;
/// Hooks: events and payloads, deny and rewrite, failures, timeouts, abort.
mod hooks;
mod hooks_prompt;
/// Host tools, host URIs, extension UI and the ask tool.
mod host;
/// Planted config files (FIFOs, links to /dev/zero), ids that would be paths, planted links.
mod hostile_files;
/// No test writes to the real home directory.
mod isolation;
/// The source tree's walls: allowed imports, no import circle, files a reader can hold.
mod layout;
/// MCP servers as tools, over stdio, against real servers.
mod mcp;
/// MCP tool calls, and servers that misbehave during one.
mod mcp_calls;
/// MCP servers as tools over streamable HTTP: the reference server and failure paths.
mod mcp_http;
/// The GET stream of streamable HTTP: the server's messages outside a request, resumption.
mod mcp_http_get;
/// MCP tools under hooks, as built-in tools are.
mod mcp_policy;
/// Prompts, tool loops, steering and follow-ups.
mod prompt;
/// Recorded provider streams and what is sent back.
mod providers;
/// Providers by name, local servers, model discovery and models.json errors.
mod providers_by_name;
/// Rule files and rules that stop a matching stream.
mod rules;
/// The kernel sandbox: every command path, hostile paths, network, fail-closed, escalation.
mod sandbox;
/// The published JSON Schemas: current, printed, true of real frames.
mod schema;
/// Sessions on disk.
mod sessions;
/// Commands that need no model.
mod state;
/// How assistant messages end: every started block gets its end update.
mod stream_ends;
/// `new_session`, `switch_session` and `branch` replace the session's actor.
mod swap;
/// Todo reminders when a run would end with open tasks, and the clear of a finished list.
mod todo_reminders;
/// Project trust: a project's hooks are skipped until it is trusted.
mod trust;
/// Unattended mode: declarations, the command preflight, budgets on the model's work, audit.
mod unattended;
/// The workflow stages: /deep-interview, /ralplan, /ultragoal.
mod workflow_stages;
