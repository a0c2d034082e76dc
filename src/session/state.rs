//! `Session`: the state the session thread alone owns, and its `get_state` projection.

use std::path::PathBuf;
use std::sync::Arc;

use super::queue::Queues;
use super::retry::RetryPolicy;
use super::todos::TodoPhase;
use crate::protocol::message::{AgentMessage, StopReason, Usage};
use crate::protocol::reply::{ContextUsage, SessionState, SessionStats, TokenTotals, ToolInfo};
use crate::provider::catalog::{Catalog, Model};
use crate::provider::scripted::Script;
use crate::tools::ToolRegistry;

pub struct Session {
    pub id: String,
    pub name: Option<String>,
    pub cwd: PathBuf,
    /// The model catalog, shared by every session of the process (it never changes after start).
    pub catalog: std::sync::Arc<Catalog>,
    pub model: Option<Model>,
    pub thinking: &'static str,
    pub queues: Queues,
    pub retry: RetryPolicy,
    pub auto_compaction: bool,
    /// The context's messages and the entries they came from.
    pub messages: super::context::Context,
    pub todos: Vec<TodoPhase>,
    pub system_prompt: String,
    /// Rule files (`--no-rules`: none); conditional ones watch the model's streams.
    pub rules: Arc<crate::rules::RuleSet>,
    pub tools: ToolRegistry,
    pub script: Option<Result<Arc<Script>, String>>,
    /// The host's URI schemes (`set_host_uri_schemes`), shared with tool calls.
    pub schemes: Arc<Vec<crate::host::uri::UriScheme>>,
    /// The session file (or its in-memory stand-in with `--no-session`).
    pub store: super::store::Store,
    /// Where sessions of this cwd live, and the root of all session folders.
    pub session_dir: PathBuf,
    pub sessions_root: PathBuf,
    /// How a project is loaded, for a session that moves to another folder.
    pub project: super::project::ProjectOptions,
    /// Workflow gates and the stage in progress.
    pub workflow: crate::workflow::Workflow,
    /// The project is trusted to run programs (`crate::trust`): its hooks are loaded. Set each
    /// time the hooks are loaded.
    pub project_trusted: bool,
    /// The process's settings, as the blueprint passed them down.
    pub settings: Arc<crate::settings::Settings>,
}

impl Session {
    /// The loaded script of the scripted provider, if any.
    pub fn scripted(&self) -> Option<Arc<Script>> {
        self.script.as_ref().and_then(|s| s.as_ref().ok().cloned())
    }

    /// The model and its key, or the reason a prompt cannot start.
    pub fn credentials(&self) -> Result<(Model, Option<String>), String> {
        let model = self.model.clone().ok_or("No model selected")?;
        let key = self
            .catalog
            .api_key(&model.provider)
            .map_err(|e| e.to_string())?;
        if model.api == crate::provider::catalog::Api::Scripted {
            if let Some(Err(e)) = &self.script {
                return Err(e.clone());
            }
            if self.script.is_none() {
                return Err("the scripted provider needs --script FILE".into());
            }
        }
        Ok((model, key))
    }

    pub fn state(
        &self,
        include: &[String],
        is_streaming: bool,
        is_compacting: bool,
    ) -> SessionState {
        let wants = |what: &[&str]| include.iter().any(|i| what.contains(&i.as_str()));
        SessionState {
            model: self.model.as_ref().map(Model::info),
            thinking_level: self.thinking,
            is_streaming,
            is_compacting,
            steering_mode: self.queues.steering_mode.as_str(),
            follow_up_mode: self.queues.follow_up_mode.as_str(),
            interrupt_mode: self.queues.interrupt_mode.as_str(),
            session_id: self.id.clone(),
            session_file: self.store.path().map(|p| p.display().to_string()),
            session_save_error: self.store.error.clone(),
            models_error: self.catalog.models_error().map(str::to_string),
            session_name: self.name.clone(),
            auto_compaction_enabled: self.auto_compaction,
            auto_retry_enabled: self.retry.enabled,
            message_count: self.messages.len(),
            queued_message_count: self.queues.len(),
            todo_phases: self.todos.clone(),
            pending_workflow_gate_ids: self
                .workflow
                .broker
                .as_ref()
                .filter(|b| b.session_id() == self.id)
                .map(|b| b.pending_ids())
                .unwrap_or_default(),
            workflow_stage: self.workflow.stage.as_ref().map(|s| s.stage.clone()),
            context_usage: self.context_usage(),
            system_prompt: wants(&["systemPrompt"]).then(|| vec![self.system_prompt.clone()]),
            dump_tools: wants(&["tools", "dumpTools"]).then(|| {
                self.tools
                    .specs()
                    .iter()
                    .map(|t| ToolInfo {
                        name: t.name.clone(),
                        description: t.description.clone(),
                        parameters: t.parameters.clone(),
                    })
                    .collect()
            }),
            unattended: None,
            sandbox: None,
            mcp_servers: Vec::new(),
            project_trusted: self.project_trusted,
        }
    }

    /// What the next request will carry, in tokens: the usage the provider reported for the last
    /// successful reply (`source: "provider_anchor"`) plus an estimate of four characters a token
    /// for the messages after it; with no such reply, an estimate of the whole context and system
    /// prompt (`"heuristic"`). A reply from before the last compaction counted messages the
    /// context no longer holds, so it is estimated like any other message, not trusted.
    pub fn context_usage(&self) -> Option<ContextUsage> {
        let window = self.model.as_ref()?.context_window;
        if window == 0 {
            return None;
        }
        let tally = self.messages.tally(self.store.compacted_at());
        let (base, source) = match tally.anchor {
            Some(tokens) => (tokens, "provider_anchor"),
            None => ((self.system_prompt.len() / 4) as u64, "heuristic"),
        };
        let tokens = base + tally.rest;
        let percent = tokens as f64 / window as f64 * 100.0;
        Some(ContextUsage {
            tokens: Some(tokens),
            context_window: window,
            percent: Some((percent * 100.0).round() / 100.0),
            source,
        })
    }

    pub fn stats(&self) -> Result<SessionStats, super::context::ContextError> {
        let (mut users, mut assistants, mut tool_calls, mut tool_results, mut total) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut tokens = Usage::default();
        self.messages.scan(|m| {
            total += 1;
            match m {
                AgentMessage::User(_) => users += 1,
                AgentMessage::Assistant(a) => {
                    assistants += 1;
                    tool_calls += a.tool_calls().count() as u64;
                    tokens.add(&a.usage);
                }
                AgentMessage::ToolResult(_) => tool_results += 1,
                _ => {}
            }
        })?;
        Ok(SessionStats {
            session_file: self.store.path().map(|p| p.display().to_string()),
            session_id: self.id.clone(),
            user_messages: users,
            assistant_messages: assistants,
            tool_calls,
            tool_results,
            total_messages: total,
            tokens: TokenTotals {
                input: tokens.input,
                output: tokens.output,
                cache_read: tokens.cache_read,
                cache_write: tokens.cache_write,
                total: tokens.total_tokens,
            },
            cost: tokens.cost.total,
        })
    }

    pub fn last_assistant_text(&self) -> Option<String> {
        let mut found = None;
        self.messages.scan_back(|m| match m {
            AgentMessage::Assistant(a)
                if !(a.stop_reason == StopReason::Aborted && a.content.is_empty()) =>
            {
                let t = a.text();
                let t = t.trim();
                found = (!t.is_empty()).then(|| t.to_string());
                found.is_none()
            }
            _ => true,
        });
        found
    }
}

pub use super::usage::estimate_tokens;

/// The longest session name, in characters. The name is stored in the session file's header
/// line, which listing reads up to a bound: a name this short keeps every session listable.
pub const MAX_SESSION_NAME_CHARS: usize = 256;

/// Why a session name is refused (the text answers `set_session_name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    Empty,
    TooLong { chars: usize },
}

impl std::fmt::Display for NameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameError::Empty => f.write_str("Session name cannot be empty"),
            NameError::TooLong { chars } => write!(
                f,
                "Session name is {chars} characters long; the limit is {MAX_SESSION_NAME_CHARS}"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Session names: trimmed, control characters turned into spaces, runs of spaces collapsed; an
/// empty or overlong result is refused with the error to answer.
pub fn clean_session_name(name: &str) -> Result<String, NameError> {
    let replaced: String = name
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let collapsed = replaced.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return Err(NameError::Empty);
    }
    let chars = collapsed.chars().count();
    if chars > MAX_SESSION_NAME_CHARS {
        return Err(NameError::TooLong { chars });
    }
    Ok(collapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_are_cleaned() {
        assert_eq!(clean_session_name("  a\tb\u{7}  c "), Ok("a b c".into()));
        assert_eq!(clean_session_name(" \u{1} "), Err(NameError::Empty));
        assert_eq!(clean_session_name(""), Err(NameError::Empty));
        let longest = "é".repeat(MAX_SESSION_NAME_CHARS);
        assert_eq!(clean_session_name(&longest), Ok(longest.clone()));
        let e = clean_session_name(&format!("{longest}x")).unwrap_err();
        assert_eq!(e, NameError::TooLong { chars: 257 });
        assert_eq!(
            e.to_string(),
            "Session name is 257 characters long; the limit is 256"
        );
    }
}
