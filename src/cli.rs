//! Command-line arguments (clap): the start-up choices; `--mode` picks the front end (RPC or ACP),
//! and every other input arrives on stdin.

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
Logs go to stderr (RUST_LOG=debug for more). See docs/protocol.md for the wire format.",
    after_long_help = AFTER_LONG_HELP
)]
pub struct Args {
    /// Protocol mode: `rpc` (gjc's JSON-lines protocol) or `acp` (the Agent Client Protocol,
    /// JSON-RPC 2.0, for editors; docs/acp.md).
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

    /// Trust the working directory's project to run programs (its .gjc/hooks.json) and remember
    /// that in <agent dir>/trusted-projects.json. Without it an untrusted project's hooks are
    /// skipped and reported.
    #[arg(long)]
    pub trust_project: bool,

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
    /// name: 1 to 128 letters, digits, '.', '_', ':' or '-', not starting with '.'.
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

    /// Never remind the model of open todo tasks when it stops (same as GJC_TODO_REMINDERS=0).
    #[arg(long)]
    pub no_todo_reminders: bool,

    /// The kernel sandbox commands run in: read-only, workspace-write or danger-full-access
    /// (default: danger-full-access in RPC mode, workspace-write in ACP mode; docs/sandbox.md).
    #[arg(long, value_name = "POLICY", value_parser = ["read-only", "workspace-write", "danger-full-access"])]
    pub sandbox: Option<String>,

    /// Let sandboxed commands use the network.
    #[arg(long)]
    pub sandbox_network: bool,

    /// A folder sandboxed commands may write to besides the cwd and their temp dir (repeatable).
    #[arg(long, value_name = "DIR")]
    pub writable_root: Vec<PathBuf>,

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

/// `gjc --help` after the options: what a host author needs beyond the flags.
const AFTER_LONG_HELP: &str = "\
Environment:
  GJC_CODING_AGENT_DIR        The agent dir (default: ~/.gjc/agent).
  HOME                        Finds ~/.gjc, expands ~ in tool paths, names session folders.
  ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY (or GOOGLE_API_KEY), DEEPSEEK_API_KEY,
  GROQ_API_KEY, OPENROUTER_API_KEY, XAI_API_KEY, MISTRAL_API_KEY, TOGETHER_API_KEY,
  FIREWORKS_API_KEY, CEREBRAS_API_KEY
                              Provider keys; models.json may name other variables as apiKey.
                              Removed from the environment of shell commands unless
                              --pass-secrets-to-tools; their values are redacted in output.
  RUST_LOG                    Log filter for stderr (default: warn; debug shows threads,
                              commands, provider requests, retries and tools, never keys or
                              message contents).
  OLLAMA_BASE_URL, LMSTUDIO_BASE_URL, LLAMACPP_BASE_URL, VLLM_BASE_URL
                              Base URLs of local servers (default: their usual 127.0.0.1 port).
  TMPDIR                      Where the private spill folder for long bash outputs goes.
  GJC_RPC_EMIT_TITLE          1, true, yes or on: emit setTitle requests.
  GJC_MAX_LINE_BYTES          Longest command line on stdin (default: 64 MiB).
  GJC_SSE_MAX_LINE_BYTES      Longest line in a provider's event stream (default: 16 MiB).
  GJC_SSE_MAX_EVENT_BYTES     Largest event in a provider's event stream (default: 32 MiB).
  GJC_STREAM_IDLE_TIMEOUT_MS  A stream silent this long has stalled (default: 300000).
  GJC_RETRY_BASE_MS           First back-off before retrying a provider (default: 2000).
  GJC_RETRY_AFTER_MAX_MS      Longest retry-after a provider may ask for (default: 60000).
  GJC_COMPACT_KEEP_TOKENS     Tokens kept verbatim after a compaction summary (default: 20000).
  GJC_COMPACTION_STRATEGY     context-full (summarise in place, default) or handoff (continue in
                              a new session from a handoff document) past the threshold.
  GJC_OUTPUT_BACKLOG_BYTES    Unwritten output above which streamed deltas are merged and new
                              commands wait for the host to read (default: 1 MiB).
  GJC_TODO_REMINDERS          Reminders of open todo tasks per run (default: 3; 0 or off: none).
  GJC_LANDLOCK_ABI            Use at most this Landlock ABI for the sandbox (0: as if the kernel had none).
  GJC_COMMAND_ID              Set by gjc in each shell command's environment (not read from
                              gjc's own): finds the command's escaped descendants.
  GJC_TEST_PANIC              Debug builds only, for tests: the thread named here panics.
  GJC_TEST_ABORT_AFTER_GATE_ACCEPT
                              Debug builds only, for tests: the process aborts right after an
                              accepted gate answer is persisted, before it is applied.

Exit status:
  0    stdin closed, or SIGTERM, SIGINT, SIGHUP or the parent's exit, and gjc shut down cleanly.
  1    a thread could not be started.
  2    a bad command line, or start-up could not proceed (no such --cwd, unknown tool, no model).
  101  a thread crashed (the others are stopped and shell commands killed).

Files (<agent dir> is GJC_CODING_AGENT_DIR or ~/.gjc/agent):
  reads   <agent dir>/models.json             Providers and models beyond the built-in ones.
  reads   <agent dir>/AGENTS.md (or CLAUDE.md), then those from / down to the working dir;
          <agent dir>/skills/*/SKILL.md and <cwd>/.gjc/skills/*/SKILL.md (skipped with
          --no-rules and --no-skills).
  writes  <agent dir>/sessions/<folder for the cwd>/*.jsonl, or --session-dir; none with
          --no-session. Session commands may read other session files there.
  reads   <agent dir>/hooks.json, and <cwd>/.gjc/hooks.json of a trusted project only.
  writes  <agent dir>/trusted-projects.json  The projects trusted (or refused) to run programs:
          --trust-project, the trust_project command, the editor's answer in ACP mode.
  writes  <agent dir>/rpc-sessions/<session id>.json   Which process runs which session;
          removed at exit.
  writes  $TMPDIR/gjc-*/                     Full outputs of truncated bash commands (private,
          0700); removed at exit unless --keep-bash-output.
  Tools read and write files under the working dir as the model asks.

Protocol reference: docs/protocol.md (every command, event and error).";

/// The thinking levels `--thinking` takes: `inherit` and `max` besides the model's own.
pub const THINKING_ARGS: [&str; 8] = [
    "inherit", "off", "minimal", "low", "medium", "high", "xhigh", "max",
];

/// What clap cannot check in the command line. The text is one line for stderr.
#[derive(Debug)]
pub enum ArgsError {
    NoMode,
    UnsupportedMode(String),
    /// An `@file` argument (the interactive front end's, not RPC's).
    AtFile(String),
    /// A positional argument: prompts come as commands.
    Unexpected(String),
    /// A `--thinking` level none of [`THINKING_ARGS`].
    Thinking(String),
    /// `--no-tools` with `--tools`.
    ToolsContradict,
    /// A `--provider-session-id` that cannot name a file.
    SessionId(String),
    /// The `--script` cannot be used.
    Script(crate::provider::scripted::ScriptError),
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgsError::NoMode => f.write_str(
                "--mode rpc or --mode acp is required (gjc is driven over JSON lines on stdio)",
            ),
            ArgsError::UnsupportedMode(m) => {
                write!(f, "unsupported mode {m:?}: --mode rpc or --mode acp")
            }
            ArgsError::AtFile(a) => write!(
                f,
                "@file arguments are not supported in RPC mode ({a}); send file contents in a prompt"
            ),
            ArgsError::Unexpected(a) => write!(
                f,
                "unexpected argument {a:?}: in RPC mode prompts arrive as commands on stdin"
            ),
            ArgsError::Thinking(l) => write!(
                f,
                "invalid --thinking level {l:?}: expected one of {}",
                THINKING_ARGS.join(", ")
            ),
            ArgsError::ToolsContradict => {
                f.write_str("--no-tools and --tools contradict each other: give one of them")
            }
            ArgsError::SessionId(id) => write!(
                f,
                "invalid --provider-session-id {id:?}: use 1 to 128 letters, digits, '.', '_', ':' or '-', not starting with '.'"
            ),
            ArgsError::Script(e) => write!(f, "--script: {e}"),
        }
    }
}

impl std::error::Error for ArgsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ArgsError::Script(e) => Some(e),
            _ => None,
        }
    }
}

impl Args {
    /// Checks what clap cannot express, before anything starts, and resolves `--thinking`
    /// aliases. The error is one line for stderr; the exit code is 2.
    pub fn validate(mut self) -> Result<Args, ArgsError> {
        match self.mode.as_deref() {
            Some("rpc" | "acp") => {}
            Some(other) => return Err(ArgsError::UnsupportedMode(other.to_string())),
            None => return Err(ArgsError::NoMode),
        }
        if let Some(f) = self.rest.iter().find(|a| a.starts_with('@')) {
            return Err(ArgsError::AtFile(f.clone()));
        }
        if let Some(a) = self.rest.first() {
            return Err(ArgsError::Unexpected(a.clone()));
        }
        self.thinking = resolve_thinking(self.thinking.as_deref())?;
        if self.no_tools && self.tools.is_some() {
            return Err(ArgsError::ToolsContradict);
        }
        if let Some(id) = &self.provider_session_id {
            if !crate::ids::is_valid_id(id) {
                return Err(ArgsError::SessionId(id.clone()));
            }
        }
        if let Some(script) = &self.script {
            crate::provider::scripted::Script::load(script).map_err(ArgsError::Script)?;
        }
        Ok(self)
    }
}

/// `inherit` is the same as no `--thinking`; `max` is the highest level, which the model clamps.
fn resolve_thinking(level: Option<&str>) -> Result<Option<String>, ArgsError> {
    match level {
        None | Some("inherit") => Ok(None),
        Some("max") => Ok(Some("xhigh".into())),
        Some(l) if THINKING_ARGS.contains(&l) => Ok(Some(l.into())),
        Some(l) => Err(ArgsError::Thinking(l.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, ArgsError> {
        let argv = ["gjc", "--mode", "rpc"].iter().chain(args);
        Args::try_parse_from(argv).unwrap().validate()
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
        assert!(
            matches!(&err, ArgsError::Thinking(l) if l == "bogus"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("invalid --thinking level \"bogus\""),
            "{err}"
        );
    }

    #[test]
    fn session_ids_stay_one_file_name_component() {
        for id in ["abc", "0192f0c4-3b1e-7c55-9a3e-5d2b1f4e8a01", "ed:conv.7_x"] {
            assert!(parse(&["--provider-session-id", id]).is_ok(), "{id}");
        }
        let long = "a".repeat(129);
        for id in [
            "",
            "..",
            ".x",
            "../../x",
            "a/b",
            "a\\b",
            "a b",
            "\u{7}",
            long.as_str(),
        ] {
            assert!(
                matches!(parse(&["--provider-session-id", id]), Err(ArgsError::SessionId(bad)) if bad == id),
                "{id:?}"
            );
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
        assert!(matches!(
            parse(&["--no-tools", "--tools", "read"]),
            Err(ArgsError::ToolsContradict)
        ));
        let err = parse(&["--script", "/nonexistent/script.json"]).unwrap_err();
        assert!(matches!(err, ArgsError::Script(_)), "{err:?}");
        assert!(err.to_string().starts_with("--script: cannot read script"));
        let no_mode = Args::try_parse_from(["gjc"])
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(matches!(no_mode, ArgsError::NoMode));
    }
}

#[cfg(test)]
mod version_tests {
    use clap::CommandFactory;

    /// Every variable the agent reads by name (`env::var("NAME")`, `env::var_os("NAME")`, and
    /// `var("NAME")` in `settings.rs`) is in `--help`. The client library's `GJC_BIN` (src/client/) is read by hosts, not by gjc.
    #[test]
    fn help_names_every_environment_variable() {
        let read = regex::Regex::new(r#"(?:env::var(?:_os)?|\bvar)\(\s*"([A-Z0-9_]+)""#).unwrap();
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut names = Vec::new();
        for entry in ignore::Walk::new(&src).filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "rs") && !path.starts_with(src.join("client"))
            {
                let text = std::fs::read_to_string(path).unwrap();
                names.extend(read.captures_iter(&text).map(|c| c[1].to_string()));
            }
        }
        assert!(names.len() > 10, "the scan found only {names:?}");
        let help = super::Args::command().render_long_help().to_string();
        for name in names {
            assert!(help.contains(&name), "--help does not mention {name}");
        }
    }

    #[test]
    fn version_names_the_protocol_version() {
        let version = super::Args::command().render_version();
        let expected = format!("(protocol {})", crate::protocol::PROTOCOL_VERSION);
        assert!(version.contains(&expected), "{version}");
    }
}
