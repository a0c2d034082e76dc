//! Command-line arguments (clap). RPC mode is the only mode; every other input arrives as frames.

use std::path::PathBuf;

use clap::Parser;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "gjc",
    // Keep the protocol version here in step with `protocol::PROTOCOL_VERSION` (a unit test checks).
    version = concat!(env!("CARGO_PKG_VERSION"), " (protocol 2)"),
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

    /// Thinking level: inherit (the default, as if not given), off, minimal, low, medium, high,
    /// xhigh or max (the highest the model has); clamped to the model.
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

    /// An id the host uses for this session; becomes the session id and part of the session file
    /// name: 1 to 128 letters, digits, '.', '_', ':' or '-'.
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

    /// Print the protocol's JSON Schemas and exit: every file keyed by name (the default), or
    /// one of commands, responses, events, frames (the text of docs/schema/NAME.json).
    #[arg(
        long,
        value_name = "NAME",
        num_args = 0..=1,
        default_missing_value = "all",
        value_parser = ["all", "commands", "responses", "events", "frames"]
    )]
    pub print_schema: Option<String>,

    /// Positional arguments are not used in RPC mode; `@file` arguments are refused.
    #[arg(hide = true)]
    pub rest: Vec<String>,
}

/// The thinking levels `--thinking` takes: `inherit` and `max` besides the model's own.
pub const THINKING_ARGS: [&str; 8] = [
    "inherit", "off", "minimal", "low", "medium", "high", "xhigh", "max",
];

impl Args {
    /// Checks what clap cannot express, before anything starts, and resolves `--thinking`
    /// aliases. The error is one line for stderr; the exit code is 2.
    pub fn validate(mut self) -> Result<Args, String> {
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
        self.thinking = resolve_thinking(self.thinking.as_deref())?;
        if self.no_tools && self.tools.is_some() {
            return Err("--no-tools and --tools contradict each other: give one of them".into());
        }
        if let Some(id) = &self.provider_session_id {
            check_session_id(id)?;
        }
        if let Some(script) = &self.script {
            crate::provider::scripted::Script::load(script)
                .map_err(|e| format!("--script: {e}"))?;
        }
        Ok(self)
    }
}

/// `inherit` is the same as no `--thinking`; `max` is the highest level, which the model clamps.
fn resolve_thinking(level: Option<&str>) -> Result<Option<String>, String> {
    match level {
        None | Some("inherit") => Ok(None),
        Some("max") => Ok(Some("xhigh".into())),
        Some(l) if THINKING_ARGS.contains(&l) => Ok(Some(l.into())),
        Some(l) => Err(format!(
            "invalid --thinking level {l:?}: expected one of {}",
            THINKING_ARGS.join(", ")
        )),
    }
}

/// The session id names the session file, so it must stay one harmless file-name component.
fn check_session_id(id: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if id.is_empty() || id.len() > 128 || !id.chars().all(allowed) {
        return Err(format!(
            "invalid --provider-session-id {id:?}: use 1 to 128 letters, digits, '.', '_', ':' or '-'"
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        let argv = ["gjc", "--mode", "rpc"].iter().chain(args);
        Args::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .validate()
    }

    #[test]
    fn thinking_levels_resolve_or_are_refused() {
        for level in ["off", "minimal", "low", "medium", "high", "xhigh"] {
            let args = parse(&["--thinking", level]).unwrap();
            assert_eq!(args.thinking.as_deref(), Some(level));
        }
        assert_eq!(parse(&["--thinking", "inherit"]).unwrap().thinking, None);
        assert_eq!(
            parse(&["--thinking", "max"]).unwrap().thinking.as_deref(),
            Some("xhigh")
        );
        let err = parse(&["--thinking", "bogus"]).unwrap_err();
        assert!(err.contains("invalid --thinking level \"bogus\""), "{err}");
    }

    #[test]
    fn session_ids_stay_one_file_name_component() {
        for id in ["abc", "0192f0c4-3b1e-7c55-9a3e-5d2b1f4e8a01", "ed:conv.7_x"] {
            assert!(parse(&["--provider-session-id", id]).is_ok(), "{id}");
        }
        let long = "a".repeat(129);
        for id in ["", "../../x", "a/b", "a\\b", "a b", "\u{7}", long.as_str()] {
            assert!(parse(&["--provider-session-id", id]).is_err(), "{id:?}");
        }
    }

    #[test]
    fn published_client_flags_are_accepted() {
        let args = parse(&[
            "--no-title",
            "--no-skills",
            "--no-rules",
            "--no-session",
            "--session-dir",
            "/tmp/s",
            "--append-system-prompt",
            "be brief",
            "--thinking",
            "medium",
        ])
        .unwrap();
        assert!(args.no_title && args.no_skills && args.no_rules && args.no_session);
        assert!(parse(&["--no-tools", "--tools", "read"]).is_err());
        assert!(parse(&["--script", "/nonexistent/script.json"])
            .unwrap_err()
            .starts_with("--script: cannot read script"));
    }
}

#[cfg(test)]
mod version_tests {
    use clap::CommandFactory;

    #[test]
    fn version_names_the_protocol_version() {
        let version = super::Args::command().render_version();
        let expected = format!("(protocol {})", crate::protocol::PROTOCOL_VERSION);
        assert!(version.contains(&expected), "{version}");
    }
}
