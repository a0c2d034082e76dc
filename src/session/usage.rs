//! The context's size in tokens as the next request will see it: the usage the provider reported
//! for the newest trusted reply (an anchor), plus an estimate of four characters a token for the
//! messages after it.
//!
//! `get_state` and the auto-compaction check ask for it every turn. Walking back to the anchor is
//! short when replies report usage, but a provider that reports none leaves no anchor and the
//! walk covers the whole history; so the context keeps the figure as a running [`Tally`], updated
//! as messages are appended and dropped whenever its messages change otherwise.

use crate::protocol::message::{AgentMessage, AssistantMessage, Content, StopReason};

/// The newest anchor's reported tokens (if any) and the estimate of the messages after it, for
/// one compaction time (anchors older than the last compaction do not count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    pub compacted_at: Option<u64>,
    pub anchor: Option<u64>,
    pub rest: u64,
}

impl Tally {
    pub fn new(compacted_at: Option<u64>) -> Tally {
        Tally {
            compacted_at,
            anchor: None,
            rest: 0,
        }
    }

    /// The tally with `m` appended after the messages it has counted.
    pub fn append(mut self, m: &AgentMessage) -> Tally {
        match m {
            AgentMessage::Assistant(a) if is_usage_anchor(a, self.compacted_at) => {
                self.anchor = Some(a.usage.total_tokens);
                self.rest = 0;
            }
            _ => self.rest += estimate_tokens(m),
        }
        self
    }

    /// Counts messages given newest first until the anchor; returns whether to go on.
    pub fn prepend(&mut self, m: &AgentMessage) -> bool {
        match m {
            AgentMessage::Assistant(a) if is_usage_anchor(a, self.compacted_at) => {
                self.anchor = Some(a.usage.total_tokens);
                false
            }
            _ => {
                self.rest += estimate_tokens(m);
                true
            }
        }
    }
}

/// Whether a reply's reported usage measures the current context: it succeeded, has a usage,
/// and was requested after the last compaction (if any).
fn is_usage_anchor(a: &AssistantMessage, compacted_at: Option<u64>) -> bool {
    !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted)
        && a.usage.total_tokens > 0
        && compacted_at.is_none_or(|at| a.timestamp >= at)
}

pub fn estimate_tokens(m: &AgentMessage) -> u64 {
    let chars: usize = match m {
        AgentMessage::User(u) => blocks_len(&u.content),
        AgentMessage::Assistant(a) => blocks_len(&a.content),
        AgentMessage::ToolResult(r) => blocks_len(&r.content),
        AgentMessage::BashExecution(b) => b.command.len() + b.output.len(),
        AgentMessage::CompactionSummary(c) => c.summary.len(),
    };
    // Four characters a token, plus a few tokens of per-message framing.
    chars.div_ceil(4) as u64 + 4
}

fn blocks_len(blocks: &[Content]) -> usize {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text { text, .. } => text.len(),
            Content::Thinking { thinking, .. } => thinking.len(),
            Content::ToolCall(c) => c.name.len() + c.arguments.to_string().len(),
            Content::Image { .. } => 4800,
            Content::RedactedThinking { data } => data.len() / 4,
        })
        .sum()
}
