//! The `GJC_*` environment variables (and `HOME`) as one typed value, resolved once at start.
//!
//! `entry::main` reads the environment into a [`Settings`] before anything runs and hands it to
//! `app::Startup`, which passes it down: the session through its blueprint, the shared threads
//! (output lane, bash thread, host broker) and the front ends the fields they use when they are
//! built. There is no process-wide getter: one place parses every variable, so a value means the
//! same everywhere, and tests build a `Settings` with [`Settings::from_vars`] instead of setting
//! variables on the whole test process. A bad value falls back to the default with a warning in the log; nothing
//! here ends the process. (The client library's `GJC_BIN`, in `src/client/`, is read by hosts
//! that build without the agent, so it stays there.)

use std::path::PathBuf;
use std::time::Duration;

/// Size limits for one stream. The largest legitimate SSE line is one JSON event carrying a whole
/// block at once (a Gemini inline image, a tool call's arguments sent in one piece): a few MiB at
/// most. 16 MiB leaves ample room for those, yet caps what a broken or hostile server can make gjc
/// hold; an event may join several `data:` lines, so it gets twice that.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SseLimits {
    pub line: usize,
    pub event: usize,
}

impl Default for SseLimits {
    fn default() -> SseLimits {
        SseLimits {
            line: 16 << 20,
            event: 32 << 20,
        }
    }
}

/// The output backlog at which the lane counts as backed up (`crate::output::HIGH`), unless
/// `GJC_OUTPUT_BACKLOG_BYTES` says otherwise.
pub const OUTPUT_BACKLOG_BYTES: usize = 256 << 10;

/// The longest provider-requested wait honoured (`crate::provider::failure`), unless
/// `GJC_RETRY_AFTER_MAX_MS` says otherwise.
pub const RETRY_AFTER_CAP_MS: u64 = 60_000;

/// How the context is made to fit when it is full (`GJC_COMPACTION_STRATEGY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactionStrategy {
    /// Summarise in place (the default, and what any other value means).
    ContextFull,
    /// Continue in a new session from a handoff summary.
    Handoff,
}

/// Every setting gjc takes from its environment.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `GJC_CODING_AGENT_DIR`, else `$HOME/.gjc/agent`.
    pub agent_dir: PathBuf,
    /// `HOME`, when set: `~` in paths, and the folder name of sessions of a cwd under it.
    pub home: Option<PathBuf>,
    /// `GJC_MAX_LINE_BYTES`: the longest command line read on stdin.
    pub max_line_bytes: usize,
    /// `GJC_SSE_MAX_LINE_BYTES` / `GJC_SSE_MAX_EVENT_BYTES`.
    pub sse: SseLimits,
    /// `GJC_STREAM_IDLE_TIMEOUT_MS`: a stream silent this long has stalled.
    pub stream_idle_timeout: Duration,
    /// `GJC_RETRY_BASE_MS`: the first back-off before retrying a provider.
    pub retry_base: Duration,
    /// `GJC_RETRY_AFTER_MAX_MS`: the longest wait a provider may ask for.
    pub retry_after_max: Duration,
    /// `GJC_COMPACT_KEEP_TOKENS`: tokens kept verbatim after a compaction summary.
    pub compact_keep_tokens: u64,
    /// `GJC_COMPACTION_STRATEGY`.
    pub compaction_strategy: CompactionStrategy,
    /// `GJC_OUTPUT_BACKLOG_BYTES`: unwritten output above which deltas are merged.
    pub output_backlog_bytes: usize,
    /// `GJC_TODO_REMINDERS` (or `--no-todo-reminders`, which makes it 0): reminders per run.
    pub todo_reminders: u32,
    /// `GJC_LANDLOCK_ABI`: the highest Landlock ABI used, below the kernel's.
    pub landlock_abi_cap: Option<u32>,
    /// `GJC_RPC_EMIT_TITLE`: whether `setTitle` requests are emitted.
    pub emit_title: bool,
    /// `GJC_TEST_PANIC` (honoured in debug builds only): the thread that panics, for tests.
    pub test_panic: Option<String>,
    /// `GJC_TEST_ABORT_AFTER_GATE_ACCEPT` (debug builds only): abort after a gate is accepted.
    pub test_abort_after_gate_accept: bool,
}

/// Default of `GJC_STREAM_IDLE_TIMEOUT_MS`.
const STREAM_IDLE_TIMEOUT_MS: u64 = 300_000;
/// Default of `GJC_RETRY_BASE_MS`.
const RETRY_BASE_MS: u64 = 2_000;
/// Default of `GJC_COMPACT_KEEP_TOKENS`.
const COMPACT_KEEP_TOKENS: u64 = 20_000;
/// Reminders of open todo tasks per run, unless `GJC_TODO_REMINDERS` says otherwise.
pub const DEFAULT_REMINDERS: u32 = 3;
/// The most reminders a run can be configured to get: each one costs a model turn.
pub const MAX_REMINDERS: u32 = 10;

impl Default for Settings {
    /// The settings of an empty environment (every default; no home).
    fn default() -> Settings {
        Settings::from_vars(|_| None)
    }
}

impl Settings {
    /// The settings of this process's environment.
    pub fn from_env() -> Settings {
        Settings::from_vars(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// The settings `var` gives (a variable's value, `None` when unset). Every variable gjc reads
    /// is named here, in a `var("NAME")` call (the `--help` test finds them by that).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Settings {
        let home = var("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let agent_dir = match var("GJC_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => home
                .clone()
                .unwrap_or_else(|| PathBuf::from("/"))
                .join(".gjc")
                .join("agent"),
        };
        let sse = SseLimits::default();
        Settings {
            agent_dir,
            home,
            max_line_bytes: positive(
                "GJC_MAX_LINE_BYTES",
                var("GJC_MAX_LINE_BYTES"),
                crate::protocol::MAX_LINE_BYTES,
            ),
            sse: SseLimits {
                line: positive(
                    "GJC_SSE_MAX_LINE_BYTES",
                    var("GJC_SSE_MAX_LINE_BYTES"),
                    sse.line,
                ),
                event: positive(
                    "GJC_SSE_MAX_EVENT_BYTES",
                    var("GJC_SSE_MAX_EVENT_BYTES"),
                    sse.event,
                ),
            },
            stream_idle_timeout: millis(
                "GJC_STREAM_IDLE_TIMEOUT_MS",
                var("GJC_STREAM_IDLE_TIMEOUT_MS"),
                STREAM_IDLE_TIMEOUT_MS,
            ),
            retry_base: millis("GJC_RETRY_BASE_MS", var("GJC_RETRY_BASE_MS"), RETRY_BASE_MS),
            retry_after_max: millis(
                "GJC_RETRY_AFTER_MAX_MS",
                var("GJC_RETRY_AFTER_MAX_MS"),
                RETRY_AFTER_CAP_MS,
            ),
            compact_keep_tokens: number(
                "GJC_COMPACT_KEEP_TOKENS",
                var("GJC_COMPACT_KEEP_TOKENS"),
                COMPACT_KEEP_TOKENS,
            ),
            compaction_strategy: match var("GJC_COMPACTION_STRATEGY").as_deref() {
                Some("handoff") => CompactionStrategy::Handoff,
                _ => CompactionStrategy::ContextFull,
            },
            output_backlog_bytes: positive(
                "GJC_OUTPUT_BACKLOG_BYTES",
                var("GJC_OUTPUT_BACKLOG_BYTES"),
                OUTPUT_BACKLOG_BYTES,
            ),
            todo_reminders: parse_reminders(var("GJC_TODO_REMINDERS").as_deref()).unwrap_or_else(
                |e| {
                    log::warn!("{e}; using {DEFAULT_REMINDERS}");
                    DEFAULT_REMINDERS
                },
            ),
            landlock_abi_cap: optional_number("GJC_LANDLOCK_ABI", var("GJC_LANDLOCK_ABI")),
            emit_title: var("GJC_RPC_EMIT_TITLE").is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            }),
            test_panic: var("GJC_TEST_PANIC"),
            test_abort_after_gate_accept: var("GJC_TEST_ABORT_AFTER_GATE_ACCEPT").is_some(),
        }
    }
}

/// A number, or `None` when unset; a value that is not one is reported and ignored.
fn optional_number<T: std::str::FromStr>(name: &str, value: Option<String>) -> Option<T> {
    let value = value?;
    match value.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => {
            log::warn!("{name}={value:?} is not a number; ignored");
            None
        }
    }
}

fn number<T: std::str::FromStr>(name: &str, value: Option<String>, default: T) -> T {
    optional_number(name, value).unwrap_or(default)
}

/// A size that must be above 0 (0 would refuse every line).
fn positive(name: &str, value: Option<String>, default: usize) -> usize {
    match optional_number::<usize>(name, value) {
        Some(0) => {
            log::warn!("{name}=0 is not a size; using {default}");
            default
        }
        n => n.unwrap_or(default),
    }
}

fn millis(name: &str, value: Option<String>, default_ms: u64) -> Duration {
    Duration::from_millis(number(name, value, default_ms))
}

/// `GJC_TODO_REMINDERS`: `0`/`off`/`false`/`no` turns them off, `on`/`true`/`yes` is the default
/// count, a number sets the count (capped at [`MAX_REMINDERS`]).
fn parse_reminders(setting: Option<&str>) -> Result<u32, String> {
    let Some(v) = setting.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_REMINDERS);
    };
    match v.to_ascii_lowercase().as_str() {
        "off" | "false" | "no" => Ok(0),
        "on" | "true" | "yes" => Ok(DEFAULT_REMINDERS),
        n => n
            .parse::<u32>()
            .map(|n| n.min(MAX_REMINDERS))
            .map_err(|_| format!("GJC_TODO_REMINDERS={v:?} is not a number, on or off")),
    }
}

#[cfg(test)]
mod tests;
