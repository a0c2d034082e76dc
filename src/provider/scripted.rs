//! The scripted provider: replays a JSON script of assistant turns with no network, so hosts can
//! test their integrations deterministically (`--provider scripted --script FILE`). Each model
//! request plays the next turn. The format is documented in docs/scripted-provider.md.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use super::builder::MessageBuilder;
use super::catalog::price;
use super::{CancelFlag, EventSink, ProviderEvent, ProviderFailure, ProviderRequest};
use crate::fs::bounded::{self, Links, ReadError};
use crate::protocol::message::{AgentMessage, AssistantMessage, StopReason, Usage};

#[derive(Debug)]
pub struct Script {
    turns: Vec<Turn>,
    next: AtomicUsize,
    source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    #[serde(default)]
    pub content: Vec<ScriptBlock>,
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// With `stopReason: "error"`: the provider's message, and whether it is worth a retry.
    #[serde(default)]
    pub error_message: Option<String>,
    #[serde(default)]
    pub transient: bool,
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
    /// Pause before each delta, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Characters per text/thinking delta (default 16).
    #[serde(default)]
    pub chunk_chars: Option<usize>,
    /// After the content, wait until aborted (to test abort and stall handling).
    #[serde(default)]
    pub stall: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ScriptBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
    },
    ToolCall {
        #[serde(default)]
        id: Option<String>,
        name: String,
        #[serde(default)]
        arguments: Value,
    },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
}

#[derive(Deserialize)]
struct ScriptFile {
    turns: Vec<Turn>,
}

/// A script larger than this is refused: it is read whole, at start.
const MAX_SCRIPT_BYTES: u64 = 256 << 20;

/// Why a script could not be used.
#[derive(Debug)]
pub enum ScriptError {
    /// The file could not be read (missing, not a regular file, too large).
    Read {
        path: std::path::PathBuf,
        source: ReadError,
    },
    /// The text is not a script (`source` names where it came from).
    Invalid {
        source: String,
        error: serde_json::Error,
    },
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptError::Read { path, source } => {
                write!(f, "cannot read script {}: {source}", path.display())
            }
            ScriptError::Invalid { source, error } => write!(f, "invalid script {source}: {error}"),
        }
    }
}

impl std::error::Error for ScriptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ScriptError::Read { source, .. } => Some(source),
            ScriptError::Invalid { error, .. } => Some(error),
        }
    }
}

impl Script {
    /// Reads a script: a regular file (a link to one is fine: the user named it), at most
    /// [`MAX_SCRIPT_BYTES`], so a FIFO or `/dev/zero` given by mistake fails at once.
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let text =
            bounded::read_to_string(path, MAX_SCRIPT_BYTES, Links::Follow).map_err(|source| {
                ScriptError::Read {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        Script::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, source: &str) -> Result<Script, ScriptError> {
        let file: ScriptFile =
            serde_json::from_str(text).map_err(|error| ScriptError::Invalid {
                source: source.to_string(),
                error,
            })?;
        Ok(Script {
            turns: file.turns,
            next: AtomicUsize::new(0),
            source: source.to_string(),
        })
    }

    fn take(&self) -> Result<(usize, Turn), String> {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        self.turns.get(n).cloned().map(|t| (n, t)).ok_or(format!(
            "script exhausted: {} has {} turns and turn {} was requested",
            self.source,
            self.turns.len(),
            n + 1
        ))
    }
}

pub fn run_stream(request: &ProviderRequest, cancel: &CancelFlag, sink: &EventSink) {
    let model = &request.model;
    let mut b = MessageBuilder::new(AssistantMessage::empty(
        model.api.as_str(),
        &model.provider,
        &model.id,
    ));
    let started = Instant::now();
    let Some(script) = &request.scripted else {
        return fail(
            b,
            sink,
            "the scripted provider needs --script FILE".into(),
            false,
        );
    };
    let (n, turn) = match script.take() {
        Ok(t) => t,
        Err(e) => return fail(b, sink, e, false),
    };
    let chunk = turn.chunk_chars.unwrap_or(16).max(1);
    if !sink.send(ProviderEvent::Start) {
        return;
    }
    for (i, block) in turn.content.iter().enumerate() {
        if !play_block(&mut b, block, i, n, chunk, turn.delay_ms, cancel, sink) {
            return aborted(b, sink);
        }
    }
    if turn.stall {
        while !cancel.is_set() {
            std::thread::sleep(Duration::from_millis(2));
        }
        return aborted(b, sink);
    }
    if cancel.is_set() {
        return aborted(b, sink);
    }
    let has_calls = b.message.tool_calls().next().is_some();
    let stop = turn.stop_reason.unwrap_or(if has_calls {
        StopReason::ToolUse
    } else {
        StopReason::Stop
    });
    if stop == StopReason::Error {
        let message = turn
            .error_message
            .clone()
            .unwrap_or_else(|| "scripted error".into());
        return fail(b, sink, message, turn.transient);
    }
    b.message.usage = usage(&turn, request, &b.message);
    price(&mut b.message.usage, &model.cost);
    let mut message = b.finish(stop);
    message.duration = Some(started.elapsed().as_millis() as u64);
    sink.send(ProviderEvent::Done(Box::new(message)));
}

#[allow(clippy::too_many_arguments)]
fn play_block(
    b: &mut MessageBuilder,
    block: &ScriptBlock,
    i: usize,
    turn: usize,
    chunk: usize,
    delay_ms: u64,
    cancel: &CancelFlag,
    sink: &EventSink,
) -> bool {
    let key = format!("s{i}");
    let pieces = |text: &str| -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(chunk).map(|c| c.iter().collect()).collect()
    };
    match block {
        ScriptBlock::Text { text } => {
            b.text_start(&key);
            for piece in pieces(text) {
                if !pause(delay_ms, cancel) {
                    return false;
                }
                b.text_delta(&key, &piece);
                if !flush(b, sink) {
                    return false;
                }
            }
        }
        ScriptBlock::Thinking { thinking } => {
            b.thinking_start(&key);
            for piece in pieces(thinking) {
                if !pause(delay_ms, cancel) {
                    return false;
                }
                b.thinking_delta(&key, &piece);
                if !flush(b, sink) {
                    return false;
                }
            }
        }
        ScriptBlock::ToolCall {
            id,
            name,
            arguments,
        } => {
            if !pause(delay_ms, cancel) {
                return false;
            }
            let id = id.clone().unwrap_or_else(|| format!("call_{turn}_{i}"));
            b.toolcall_start(&key, &id, name);
            let args = if arguments.is_null() {
                "{}".to_string()
            } else {
                arguments.to_string()
            };
            b.toolcall_delta(&key, &args);
        }
    }
    b.end(&key);
    flush(b, sink)
}

fn pause(delay_ms: u64, cancel: &CancelFlag) -> bool {
    if delay_ms > 0 {
        let until = Instant::now() + Duration::from_millis(delay_ms);
        while Instant::now() < until {
            if cancel.is_set() {
                return false;
            }
            std::thread::sleep(
                Duration::from_millis(1).min(until.saturating_duration_since(Instant::now())),
            );
        }
    }
    !cancel.is_set()
}

fn flush(b: &mut MessageBuilder, sink: &EventSink) -> bool {
    b.take_pending()
        .into_iter()
        .all(|ev| sink.send(ProviderEvent::Delta(ev)))
}

/// The script's usage, or an estimate of four characters per token.
fn usage(turn: &Turn, request: &ProviderRequest, message: &AssistantMessage) -> Usage {
    let mut u = Usage::default();
    match &turn.usage {
        Some(s) => {
            u.input = s.input;
            u.output = s.output;
            u.cache_read = s.cache_read;
            u.cache_write = s.cache_write;
        }
        None => {
            let context: usize = request.system_prompt.len()
                + request.messages.iter().map(estimate_chars).sum::<usize>();
            u.input = (context / 4) as u64;
            u.output = (serde_json::to_string(&message.content)
                .map(|s| s.len())
                .unwrap_or(0)
                / 4) as u64;
        }
    }
    u.finish_totals();
    u
}

fn estimate_chars(m: &AgentMessage) -> usize {
    serde_json::to_string(m).map(|s| s.len()).unwrap_or(0)
}

fn fail(b: MessageBuilder, sink: &EventSink, message: String, transient: bool) {
    let message = b.fail(StopReason::Error, message, None);
    sink.send(ProviderEvent::Failed(Box::new(ProviderFailure {
        message,
        transient,
        retry_after: None,
        overflow: false,
    })));
}

fn aborted(b: MessageBuilder, sink: &EventSink) {
    let message = b.fail(StopReason::Aborted, "Request was aborted".into(), None);
    sink.send(ProviderEvent::Failed(Box::new(ProviderFailure {
        message,
        transient: false,
        retry_after: None,
        overflow: false,
    })));
}

/// A tiny helper so tests and examples can build scripts in code.
pub fn text_turn(text: &str) -> Value {
    serde_json::json!({"content": [{"type": "text", "text": text}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device or a folder given as the script is refused for what it is, not read.
    #[test]
    fn only_a_regular_file_is_a_script() {
        let e = Script::load(Path::new("/dev/null")).err().unwrap();
        assert!(
            matches!(
                &e,
                ScriptError::Read {
                    source: ReadError::NotRegular { .. },
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e
            .to_string()
            .starts_with("cannot read script /dev/null: not a regular file"));
        let e = Script::load(Path::new("/nonexistent/s.json"))
            .err()
            .unwrap();
        assert!(matches!(&e, ScriptError::Read { source, .. } if source.is_not_found()));
        let e = Script::parse("{\"turns\": 1}", "inline").err().unwrap();
        assert!(matches!(&e, ScriptError::Invalid { source, .. } if source == "inline"));
        assert!(e.to_string().starts_with("invalid script inline: "), "{e}");
    }
}
