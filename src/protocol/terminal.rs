//! A shell command run in the front end's own terminal (an editor's, over ACP `terminal/*`)
//! instead of gjc's process groups. Not part of the RPC wire: only a front end that offers
//! terminals (`ToolPolicy::host_terminal`) is ever sent these, through the output lane like any
//! other callback; its answer goes back to the host broker as `HostRequest::TerminalDone`.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum TerminalFrame {
    /// Run a command for a `bash` tool call.
    Run(TerminalRun),
    /// The caller gave up (abort, shutdown): the terminal `target_id` started is killed and
    /// released, and no answer is expected.
    Cancel { target_id: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TerminalRun {
    /// The host broker's id for the call.
    pub id: String,
    /// The tool call the terminal belongs to (the editor shows it there).
    pub tool_call_id: String,
    pub command: String,
    /// Words run before the shell: gjc itself as the sandbox launcher (`gjc --sandbox-exec SPEC
    /// --`), which confines itself and then execs the shell; empty without a sandbox.
    pub launcher: Vec<String>,
    pub cwd: PathBuf,
    /// The bash tool's `timeout`: past it the command is killed and its output kept.
    pub timeout: Option<Duration>,
    /// How much output the terminal keeps (its tail).
    pub output_limit: u64,
}

/// How the command ended, as the terminal saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TerminalExit {
    /// The output's tail (at most `output_limit` bytes).
    pub output: String,
    /// The terminal dropped the start of the output.
    pub truncated: bool,
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
    /// Killed at the run's `timeout`.
    pub timed_out: bool,
}
