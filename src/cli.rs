//! Command-line arguments (clap). RPC mode is the only mode; every other input arrives as frames.

use std::path::PathBuf;

use clap::Parser;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "gjc",
    version,
    about = "A coding agent driven over newline-delimited JSON on stdio",
    long_about = "gjc runs as a subprocess of an editor, IDE plugin, orchestrator or CI script. With --mode rpc it \
reads one JSON command per line on stdin and writes responses and events, one JSON object per line, on stdout. \
Logs go to stderr (RUST_LOG=debug for more). See docs/protocol.md for the wire format."
)]
pub struct Args {
    /// Protocol mode; only `rpc` is available.
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,

    /// Model provider (anthropic, openai, google, deepseek, a models.json provider, or scripted).
    #[arg(long)]
    pub provider: Option<String>,

    /// Model id within the provider.
    #[arg(long)]
    pub model: Option<String>,

    /// Thinking level: off, minimal, low, medium, high or xhigh (clamped to the model).
    #[arg(long, value_name = "LEVEL")]
    pub thinking: Option<String>,

    /// The script the scripted provider replays (see docs/scripted-provider.md).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,

    /// Folder for session files.
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,

    /// Keep the session in memory only.
    #[arg(long)]
    pub no_session: bool,

    /// Working directory for tools and context files (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Replace the built-in system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,

    /// Append text to the system prompt.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,

    /// Comma-separated active built-in tools (default: read,bash,edit,write,grep,find,ls,todo_write).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,

    /// Offer the model no built-in tools.
    #[arg(long)]
    pub no_tools: bool,

    /// Do not load skills.
    #[arg(long)]
    pub no_skills: bool,

    /// Do not load AGENTS.md / CLAUDE.md context files.
    #[arg(long)]
    pub no_rules: bool,

    /// Do not generate session titles (always the case in RPC mode; accepted for compatibility).
    #[arg(long)]
    pub no_title: bool,

    /// An id the host uses for this session; becomes the session id.
    #[arg(long, value_name = "ID")]
    pub provider_session_id: Option<String>,

    /// Frame `message_update` events compactly (the delta and ids only) from the start.
    #[arg(long)]
    pub compact_updates: bool,

    /// Keep bash spill files (full outputs of truncated commands) after exit.
    #[arg(long)]
    pub keep_bash_output: bool,

    /// Let shell commands inherit the API-key variables (ANTHROPIC_API_KEY, ..., and any variable
    /// holding a configured key). By default they are removed from the environment of the bash
    /// tool and the `bash` command; key values are replaced by [redacted] in output either way.
    #[arg(long)]
    pub pass_secrets_to_tools: bool,

    /// Positional arguments are not used in RPC mode; `@file` arguments are refused.
    #[arg(hide = true)]
    pub rest: Vec<String>,
}

impl Args {
    /// Checks what clap cannot express; the error is printed to stderr and the exit code is 2.
    pub fn validate(&self) -> Result<(), String> {
        match self.mode.as_deref() {
            Some("rpc") => {}
            Some(other) => {
                return Err(format!(
                    "unsupported mode {other:?}: only --mode rpc is available"
                ))
            }
            None => {
                return Err(
                    "--mode rpc is required (gjc is driven over JSON lines on stdio)".into(),
                )
            }
        }
        if let Some(f) = self.rest.iter().find(|a| a.starts_with('@')) {
            return Err(format!("@file arguments are not supported in RPC mode ({f}); send file contents in a prompt"));
        }
        if let Some(a) = self.rest.first() {
            return Err(format!(
                "unexpected argument {a:?}: in RPC mode prompts arrive as commands on stdin"
            ));
        }
        Ok(())
    }
}

/// The agent dir: `GJC_CODING_AGENT_DIR`, else `~/.gjc/agent`.
pub fn agent_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GJC_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    home.join(".gjc").join("agent")
}
