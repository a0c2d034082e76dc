//! Compaction: the older part of the context is summarised by the current model and replaced by
//! that summary, keeping the most recent turns (about `keep` tokens, cut only where a user
//! message starts, so a tool call never loses its result). Manual (`compact`) or automatic: when
//! the context passes the window minus a reserve, and when the provider reports a context overflow
//! (then the request is retried once).

use std::sync::Arc;

use serde_json::{json, Value};

use super::reply::CommandError::{self, Credentials, Io, Refused};
use super::run::Phase;
use super::SessionLoop;
use crate::protocol::message::{
    AgentMessage, AssistantMessage, CompactionSummaryMessage, Content, UserMessage,
};
use crate::protocol::reply::CompactionResult;

/// The error of a handoff whose document came back empty.
pub const NO_CONTENT: &str = "Handoff generation produced no content";

/// The status line shown while a summary is written; cleared when it ends either way.
const COMPACTION_STATUS: &str = "gjc.compaction";
use crate::protocol::{AgentEvent, Response};
use crate::provider::{self, ProviderEvent, ProviderMsg, ProviderRequest, StreamHandle};

/// Room left free for the next reply before automatic compaction starts.
pub const RESERVE_TOKENS: u64 = 16_384;

const SYSTEM: &str = "You are a context summarization assistant. Your task is to read a conversation between a user and an AI coding assistant, then produce a structured summary that another instance of the assistant will use to continue the work. Do not continue the conversation and do not answer questions in it; only summarize.";

const INSTRUCTIONS: &str = "Summarize the conversation above for the assistant that will continue it. Use this structure:\n\n## Goal\nWhat the user is trying to accomplish.\n\n## Constraints and preferences\nRequirements the user stated.\n\n## Progress\n### Done\n### In progress\n\n## Key decisions\nDecisions made and why.\n\n## Next steps\nWhat should happen next.\n\n## Critical context\nFile paths, function names, commands, error messages and values needed to continue.\n\nBe concise and precise; keep exact paths and identifiers.";

pub enum Origin {
    /// `compact`: the response goes to this request id.
    Manual(Option<Value>),
    /// The context passed the threshold at the end of a run.
    Threshold,
    /// The provider rejected the context as too long; retry the request after compacting.
    Overflow(Box<AssistantMessage>, bool),
    /// `handoff`: the text is a handoff document that starts a new session (see `handoff.rs`);
    /// the response goes to this request id.
    Handoff(Option<Value>),
    /// The context passed the threshold and the strategy is `handoff` (`handoff.rs`).
    AutoHandoff,
}

impl Origin {
    fn is_handoff(&self) -> bool {
        matches!(self, Origin::Handoff(_) | Origin::AutoHandoff)
    }
}

pub struct Compaction {
    pub stream: u64,
    handle: StreamHandle,
    partial: AssistantMessage,
    cut: usize,
    tokens_before: u64,
    origin: Origin,
}

impl Compaction {
    /// The summary (or handoff document) in the finished reply; a reply without text is a
    /// failure.
    fn summary_of(&self, message: &AssistantMessage) -> Result<String, String> {
        let summary = message.text();
        if !summary.trim().is_empty() {
            return Ok(summary);
        }
        Err(match self.origin.is_handoff() {
            true => NO_CONTENT.into(),
            false => "Summarization failed: the model returned no text".into(),
        })
    }

    /// The request failed with `error`.
    fn failure(&self, error: &str) -> Result<String, String> {
        let what = match self.origin.is_handoff() {
            true => "Handoff failed",
            false => "Summarization failed",
        };
        Err(format!("{what}: {error}"))
    }
}

/// Where the kept part starts: the earliest user message from which the rest fits in `keep`
/// tokens, or else the last user message. `None` when nothing before it could be summarised.
pub fn cut_point(messages: &[AgentMessage], keep: u64) -> Option<usize> {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, AgentMessage::User(_) | AgentMessage::BashExecution(_)))
        .map(|(i, _)| i)
        .collect();
    let mut tail = 0u64;
    let mut best = None;
    for i in (0..messages.len()).rev() {
        tail += super::state::estimate_tokens(&messages[i]);
        if tail > keep {
            break;
        }
        if starts.contains(&i) {
            best = Some(i);
        }
    }
    let cut = best.or_else(|| starts.last().copied())?;
    (cut > 0).then_some(cut)
}

/// The summarisation request text: the older messages as a transcript, then the instructions.
pub fn summary_prompt(messages: &[AgentMessage], custom: Option<&str>) -> String {
    transcript_prompt(messages, INSTRUCTIONS, custom)
}

/// `messages` as a transcript, then `instructions` and the host's extra focus, if any.
pub fn transcript_prompt(
    messages: &[AgentMessage],
    instructions: &str,
    custom: Option<&str>,
) -> String {
    let mut out = String::from("<conversation>\n");
    for m in messages {
        match m {
            AgentMessage::User(u) => out.push_str(&format!("[User]: {}\n\n", text(&u.content))),
            AgentMessage::Assistant(a) => {
                for c in &a.content {
                    match c {
                        Content::Text { text, .. } => {
                            out.push_str(&format!("[Assistant]: {text}\n\n"))
                        }
                        Content::Thinking { thinking, .. } => {
                            out.push_str(&format!("[Assistant thinking]: {thinking}\n\n"))
                        }
                        Content::ToolCall(call) => out.push_str(&format!(
                            "[Assistant tool call]: {}({})\n\n",
                            call.name, call.arguments
                        )),
                        _ => {}
                    }
                }
            }
            AgentMessage::ToolResult(r) => {
                let t = text(&r.content);
                let t = crate::provider::wire::clip(&t, 2000);
                out.push_str(&format!(
                    "[Tool result{}]: {t}\n\n",
                    if r.is_error { " (error)" } else { "" }
                ));
            }
            AgentMessage::BashExecution(b) => {
                out.push_str(&format!("[User ran]: {}\n\n", b.as_prompt_text()))
            }
            AgentMessage::CompactionSummary(c) => {
                out.push_str(&format!("[Earlier summary]: {}\n\n", c.summary))
            }
        }
    }
    out.push_str("</conversation>\n\n");
    out.push_str(instructions);
    if let Some(extra) = custom.filter(|c| !c.trim().is_empty()) {
        out.push_str(&format!("\n\nAdditional focus: {extra}"));
    }
    out
}

fn text(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|c| {
            if let Content::Text { text, .. } = c {
                Some(text.as_str())
            } else {
                None
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl SessionLoop {
    pub fn is_compacting(&self) -> bool {
        self.compaction.is_some()
    }

    /// Whether the context has passed the automatic threshold.
    pub fn over_threshold(&self) -> bool {
        let Some(model) = &self.state.model else {
            return false;
        };
        let tokens = self
            .state
            .context_usage()
            .and_then(|u| u.tokens)
            .unwrap_or(0);
        self.state.auto_compaction && tokens > model.context_window.saturating_sub(RESERVE_TOKENS)
    }

    /// Starts summarising; the outcome arrives as provider events of a stream of its own.
    pub fn start_compaction(
        &mut self,
        origin: Origin,
        custom: Option<&str>,
    ) -> Result<(), CommandError> {
        if self.compaction.is_some() {
            return Err(Refused("Compaction already in progress".into()));
        }
        if self.state.store.last_kind.as_deref() == Some("compaction") {
            return Err(Refused("Already compacted".into()));
        }
        let (model, api_key) = self.state.credentials().map_err(Credentials)?;
        let messages = self
            .state
            .messages
            .parsed()
            .map_err(|e| Io(e.to_string()))?;
        let cut = cut_point(messages, self.state.settings.compact_keep_tokens)
            .ok_or_else(|| Refused("Nothing to compact (session too small)".into()))?;
        let tokens_before = self
            .state
            .context_usage()
            .and_then(|u| u.tokens)
            .unwrap_or(0);
        let messages = self
            .state
            .messages
            .parsed()
            .map_err(|e| Io(e.to_string()))?;
        let prompt = summary_prompt(&messages[..cut], custom);
        self.before_compact_hooks(match origin {
            Origin::Manual(_) | Origin::Handoff(_) => "manual",
            Origin::Threshold | Origin::AutoHandoff => "threshold",
            Origin::Overflow(..) => "overflow",
        });
        if matches!(origin, Origin::Threshold | Origin::Overflow(..)) {
            let reason = if matches!(origin, Origin::Overflow(..)) {
                "overflow"
            } else {
                "threshold"
            };
            self.emit(AgentEvent::AutoCompactionStart {
                reason,
                action: "context-full",
            });
            if let Some(run) = &mut self.run {
                run.enter(Phase::Compacting);
            }
        }
        self.launch_summary(
            (model, api_key),
            SYSTEM,
            prompt,
            (cut, tokens_before),
            origin,
            "Compacting the conversation",
        );
        Ok(())
    }

    /// Sends the one-shot request that writes a summary or a handoff document; its events come
    /// back on a stream of their own (`on_compaction`) and `abort` cancels it.
    pub(super) fn launch_summary(
        &mut self,
        (model, api_key): (crate::provider::catalog::Model, Option<String>),
        system: &str,
        prompt: String,
        (cut, tokens_before): (usize, u64),
        origin: Origin,
        status: &str,
    ) {
        let request = ProviderRequest {
            model: model.clone(),
            api_key,
            system_prompt: system.into(),
            messages: vec![AgentMessage::User(UserMessage::new(&prompt, &[]))],
            history: None,
            tools: Arc::from([]),
            thinking: "off",
            session_id: self.state.id.clone(),
            scripted: self.state.scripted(),
            limits: provider::Limits::of(&self.state.settings),
        };
        self.set_status(COMPACTION_STATUS, Some(status.into()));
        let stream = self.next_generation();
        let handle = provider::start_stream(request, stream, self.provider_tx());
        let partial = AssistantMessage::empty(model.api.as_str(), &model.provider, &model.id);
        self.compaction = Some(Compaction {
            stream,
            handle,
            partial,
            cut,
            tokens_before,
            origin,
        });
    }

    /// Provider events of the compaction stream.
    pub fn on_compaction(&mut self, msg: ProviderMsg) {
        let Some(c) = &mut self.compaction else {
            return;
        };
        match *msg.event {
            ProviderEvent::Start | ProviderEvent::Usage(_) => {}
            ProviderEvent::Delta(ev) => c.partial.apply(&ev),
            // A summary is a model request too: its usage counts against an unattended budget.
            ProviderEvent::Done(message) if self.unattended_commit(&message) => {}
            ProviderEvent::Done(message) => {
                if let Some(outcome) = self.compaction.as_ref().map(|c| c.summary_of(&message)) {
                    self.finish_compaction(outcome);
                }
            }
            ProviderEvent::Failed(f) => {
                let error = f.message.error_message.unwrap_or_default();
                if let Some(outcome) = self.compaction.as_ref().map(|c| c.failure(&error)) {
                    self.finish_compaction(outcome);
                }
            }
        }
    }

    fn finish_compaction(&mut self, outcome: Result<String, String>) {
        let Some(c) = self.compaction.take() else {
            return;
        };
        self.set_status(COMPACTION_STATUS, None);
        match c.origin {
            Origin::Handoff(id) => return self.finish_handoff(id, outcome),
            Origin::AutoHandoff => return self.finish_auto_handoff(outcome, c.tokens_before),
            _ => {}
        }
        let result =
            outcome.and_then(|summary| self.apply_compaction(&summary, c.cut, c.tokens_before));
        let (kind, message) = match &result {
            Ok(_) => ("info", "The conversation was compacted".to_string()),
            Err(e) => ("error", format!("Compaction failed: {e}")),
        };
        let notice =
            crate::host::ui::notice("notify", json!({"message": message, "notifyType": kind}));
        self.send(crate::protocol::Outbound::Frame(notice));
        match c.origin {
            Origin::Manual(id) => self.respond(match result {
                Ok(data) => Response::ok(id, "compact", Some(&data)),
                Err(e) => Response::err(id, "compact", e),
            }),
            Origin::Handoff(_) | Origin::AutoHandoff => {
                unreachable!("a handoff finishes in handoff.rs")
            }
            Origin::Threshold => {
                self.emit_compaction_end("context-full", &result, false, false);
                self.end_run_completed();
            }
            Origin::Overflow(failed, started) => {
                self.emit_compaction_end("context-full", &result, false, result.is_ok());
                match result {
                    Ok(_) => self.retry_after_compaction(*failed, started),
                    Err(_) => self.fail_after_compaction(*failed, started),
                }
            }
        }
    }

    pub(super) fn emit_compaction_end(
        &mut self,
        action: &'static str,
        result: &Result<CompactionResult, String>,
        aborted: bool,
        will_retry: bool,
    ) {
        let (result, error_message) = match result {
            Ok(v) => (Some(v.clone()), None),
            Err(e) => (None, Some(e.clone())),
        };
        self.emit(AgentEvent::AutoCompactionEnd {
            action,
            result,
            aborted,
            will_retry,
            error_message,
        });
    }

    /// Writes the compaction entry and rebuilds the context: the summary, then the kept messages.
    fn apply_compaction(
        &mut self,
        summary: &str,
        cut: usize,
        tokens_before: u64,
    ) -> Result<CompactionResult, String> {
        let (messages, ids) = self.state.messages.parts_mut().map_err(|e| e.to_string())?;
        let first_kept = ids.get(cut).cloned().flatten().unwrap_or_default();
        if cut > messages.len() {
            return Err("The context changed while it was being summarised".into());
        }
        let entry = json!({"summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": tokens_before});
        let entry_id = self
            .state
            .store
            .append("compaction", entry)
            .map_err(|e| format!("Cannot save the compaction: {e}"))?;
        self.emit_store_notices();
        let (messages, ids) = self.state.messages.parts_mut().map_err(|e| e.to_string())?;
        let kept: Vec<AgentMessage> = messages.drain(cut..).collect();
        let kept_ids: Vec<Option<super::store::EntryId>> =
            ids.drain(cut.min(ids.len())..).collect();
        let summary_message = CompactionSummaryMessage {
            summary: summary.to_string(),
            tokens_before,
            // The entry's time: reported usage from before it no longer describes the context.
            timestamp: self
                .state
                .store
                .compacted_at()
                .unwrap_or_else(crate::ids::now_ms),
        };
        self.state.messages = super::context::Context::from_messages(
            std::iter::once(AgentMessage::CompactionSummary(summary_message))
                .chain(kept)
                .collect(),
            std::iter::once(Some(entry_id)).chain(kept_ids).collect(),
        );
        Ok(CompactionResult {
            summary: summary.to_string(),
            first_kept_entry_id: first_kept.to_string(),
            tokens_before,
            details: None,
        })
    }

    /// Abort while summarising: the stream is shut down and the requester told.
    pub fn abort_compaction(&mut self) {
        let Some(c) = self.compaction.take() else {
            return;
        };
        self.set_status(COMPACTION_STATUS, None);
        c.handle.abort();
        match c.origin {
            Origin::Manual(id) => {
                self.respond(Response::err(id, "compact", "Compaction cancelled"))
            }
            Origin::Handoff(id) => self.respond(Response::err(id, "handoff", "Handoff cancelled")),
            Origin::AutoHandoff => {
                self.emit_compaction_end("handoff", &Err("Handoff cancelled".into()), true, false)
            }
            _ => self.emit_compaction_end(
                "context-full",
                &Err("Compaction cancelled".into()),
                true,
                false,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(t: &str) -> AgentMessage {
        AgentMessage::User(UserMessage::new(t, &[]))
    }

    #[test]
    fn cuts_at_user_messages_within_the_budget() {
        let big = "x".repeat(4000);
        let msgs = vec![user(&big), user(&big), user("small"), user("tail")];
        assert_eq!(
            cut_point(&msgs, 10),
            Some(3),
            "only the last user message fits"
        );
        assert_eq!(
            cut_point(&msgs, 1500),
            Some(1),
            "one big message and the small ones fit"
        );
        assert_eq!(cut_point(&[user("only")], 10), None);
        assert!(summary_prompt(&msgs[..1], Some("focus on tests"))
            .ends_with("Additional focus: focus on tests"));
    }
}
