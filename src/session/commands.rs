//! One small function per command. Each returns the response data or the error, which
//! `command` wraps into the reply to the request's `id` (`reply.rs`); a few answer with the
//! reply itself (a response now or later, and what follows it).

use serde::Serialize;
use serde_json::Value;

use super::queue::{InterruptMode, QueueMode};
use super::reply::{Answer, CommandError, Reply, Then};
use super::state::clean_session_name;
use super::{todos, SessionLoop};
use crate::exec::JobOwner;
use crate::protocol::command::*;
use crate::protocol::message::UserMessage;
use crate::protocol::outbound::TypedError;
use crate::protocol::reply;
use crate::protocol::{AgentEvent, Command, Data, Response};
use crate::provider::catalog::{self, WIRE_THINKING_LEVELS};

/// The payload of a typed reply.
fn data<T: Serialize>(value: &T) -> Answer {
    serde_json::value::to_raw_value(value)
        .map(|raw| Some(Data::Checked(raw)))
        .map_err(|e| CommandError::Internal(format!("internal error: {e}")))
}

pub(super) const BUSY: &str = "Agent is already processing. Use steer() or followUp() to queue messages, or wait for completion.";

impl SessionLoop {
    /// What a command answers; `handle_command` sends it and runs the post-command steps.
    pub(super) fn command(&mut self, id: Option<Value>, command: Command) -> Reply {
        let name = command.name();
        if let Some(refused) = self.unattended_refusal(&id, &command) {
            return refused;
        }
        let first = matches!(command, Command::GetState(_));
        let answer = match command {
            Command::Prompt(p) => return self.prompt(id, p),
            Command::AbortAndPrompt(p) => return self.abort_and_prompt(id, p),
            Command::Bash(b) => return self.user_bash(id, b),
            Command::Steer(m) => return self.queue_message(id, m, true),
            Command::FollowUp(m) => return self.queue_message(id, m, false),
            Command::Abort(_) => {
                self.abort_run();
                Ok(None)
            }
            Command::AbortRetry(_) => {
                self.abort_retry();
                Ok(None)
            }
            Command::AbortBash(_) => {
                self.bash.abort(JobOwner::User);
                Ok(None)
            }
            Command::NewSession(p) => {
                return self.new_session(id, p.parent_session.as_deref(), p.cwd)
            }
            Command::GetState(p) => {
                let mut state = self.state.state(&p.include, self.is_busy(), self.is_compacting());
                state.unattended = self.unattended.status(&self.state.id);
                state.sandbox = Some(self.sandbox_state());
                state.mcp_servers = self.mcp.statuses();
                data(&state)
            }
            Command::NegotiateUnattended(p) => return self.negotiate_unattended(id, p),
            Command::Compact(p) => return self.compact(id, p.custom_instructions.as_deref()),
            Command::SetTodos(p) => self.set_todos(&p.phases),
            Command::ListMcpServers(_) => data(&self.list_mcp_servers()),
            Command::AddMcpServer(p) => self.add_mcp_server(p).map_err(CommandError::Invalid).and_then(|s| data(&s)),
            Command::RemoveMcpServer(p) => self.remove_mcp_server(&p.name).map_err(CommandError::Invalid).and_then(|s| data(&s)),
            Command::RestartMcpServer(p) => self.restart_mcp_server(&p.name).map_err(CommandError::Invalid).and_then(|s| data(&s)),
            Command::SetHostTools(p) => self.set_host_tools(&p.tools),
            Command::SetHostUriSchemes(p) => self.set_host_uri_schemes(&p.schemes),
            Command::SetCapabilities(p) => data(&self.set_capabilities(&p.capabilities)),
            Command::SetSandbox(p) => self.set_sandbox(p).map_err(Into::into).and_then(|s| data(&s)),
            Command::SetModel(p) => self.set_model(&p.provider, &p.model_id),
            Command::CycleModel(_) => self.cycle_model(),
            Command::GetAvailableModels(_) => return self.get_available_models(id),
            Command::SetThinkingLevel(p) => self.set_thinking_level(&p.level),
            Command::CycleThinkingLevel(_) => self.cycle_thinking_level(),
            Command::SetSteeringMode(p) => parse_mode(&p.mode, "steering").map(|m| {
                self.state.queues.steering_mode = m;
                None
            }),
            Command::SetFollowUpMode(p) => parse_mode(&p.mode, "follow-up").map(|m| {
                self.state.queues.follow_up_mode = m;
                None
            }),
            Command::SetInterruptMode(p) => match InterruptMode::parse(&p.mode) {
                Some(m) => {
                    self.state.queues.interrupt_mode = m;
                    Ok(None)
                }
                None => Err(CommandError::Invalid(format!(
                    "Invalid interrupt mode: {}",
                    p.mode
                ))),
            },
            Command::SetAutoCompaction(p) => {
                self.state.auto_compaction = p.enabled;
                Ok(None)
            }
            Command::SetAutoRetry(p) => {
                self.state.retry.enabled = p.enabled;
                Ok(None)
            }
            Command::SetSessionName(p) => match clean_session_name(&p.name) {
                Ok(n) => {
                    self.send(crate::protocol::Outbound::Show(
                        crate::protocol::Show::Title(n.clone()),
                    ));
                    let saved = self.state.store.set_title(&n);
                    self.state.name = Some(n);
                    saved.map(|_| None).map_err(CommandError::from)
                }
                Err(e) => Err(CommandError::Invalid(e.to_string())),
            },
            Command::SwitchSession(p) => {
                return self.switch_session(id, std::path::Path::new(&p.session_path), p.cwd)
            }
            Command::Branch(p) => return self.branch(id, &p.entry_id),
            Command::GetBranchMessages(_) => self.branch_messages(),
            Command::ListSessions(p) => return self.list_sessions(id, p.all),
            Command::ExportHtml(p) => self.export_html(p.output_path.as_deref()),
            Command::GetSessionStats(_) => match self.state.stats() {
                Ok(stats) => data(&stats),
                Err(e) => Err(CommandError::Io(e.to_string())),
            },
            Command::GetMessages(_) => return self.get_messages(id),
            Command::GetLastAssistantText(_) => data(&reply::LastAssistantText {
                text: self.state.last_assistant_text(),
            }),
            Command::GetLoginProviders(_) => data(&self.login_providers()),
            Command::Login(p) => Err(CommandError::Typed(TypedError {
                code: "not_supported",
                message: format!(
                    "login {}: interactive login is not available; API keys come from the environment or models.json",
                    p.provider_id
                ),
            })),
            Command::WorkflowGateResponse(p) => self
                .workflow_gate_response(p)
                .and_then(|v| data(&v)),
            Command::GetPendingWorkflowGates(_) => data(&self.pending_workflow_gates()),
            Command::TrustProject(p) => self
                .trust_project(p.cwd.as_deref(), p.trusted)
                .map_err(CommandError::Invalid)
                .and_then(|r| data(&r)),
            Command::CheckpointForHandoff(p) => self
                .checkpoint_for_handoff(p)
                .map_err(CommandError::Typed)
                .and_then(|r| data(&r)),
            Command::Handoff(p) => return self.handoff(id, p.custom_instructions.as_deref()),
        };
        match first {
            true => Reply::first(super::reply::response(id, name, answer)),
            false => Reply::answer(id, name, answer),
        }
    }

    /// Starts a run, or queues the message while one streams (with `streamingBehavior`). Failures
    /// known at once (busy, no model, no key) are the only response; otherwise the ack comes first.
    fn prompt(&mut self, id: Option<Value>, p: PromptParams) -> Reply {
        let text = if self.is_busy() {
            p.message.clone()
        } else {
            self.start_stage_if_asked(&p.message)
        };
        let message = UserMessage::new(&text, &p.images);
        if self.is_busy() {
            let queue = match p.streaming_behavior {
                Some(StreamingBehavior::Steer) => &mut self.state.queues.steering,
                Some(StreamingBehavior::FollowUp) => &mut self.state.queues.follow_up,
                None => return Reply::now(Response::err(id, "prompt", BUSY)),
            };
            queue.push_back(message);
            return Reply::now(Response::done(id, "prompt"));
        }
        self.start_prompt(id, "prompt", message)
    }

    fn abort_and_prompt(&mut self, id: Option<Value>, p: MessageParams) -> Reply {
        if self.is_busy() {
            self.abort_run();
        }
        self.start_prompt(
            id,
            "abort_and_prompt",
            UserMessage::new(&p.message, &p.images),
        )
    }

    /// The response comes first, then the run (`Then::Prompt`).
    fn start_prompt(
        &mut self,
        id: Option<Value>,
        command: &'static str,
        message: UserMessage,
    ) -> Reply {
        if let Err(e) = self.state.credentials() {
            return Reply::answer(id, command, Err(CommandError::Credentials(e)));
        }
        // A session that cannot be written is refused before the run, not discovered in it.
        if self.state.store.is_persistent() && !self.state.store.is_on_disk() {
            if let Err(e) = self.state.store.ensure_on_disk() {
                let e = CommandError::Io(format!("Cannot save the session: {e}"));
                return Reply::answer(id, command, Err(e));
            }
            self.write_selection();
        }
        Reply::now(Response::done(id, command)).then(Then::Prompt(vec![message], command))
    }

    /// `steer` / `follow_up`. While idle after an assistant reply, the message starts a run at
    /// once (a continuation); in a fresh session it waits for the next prompt.
    fn queue_message(&mut self, id: Option<Value>, m: MessageParams, steer: bool) -> Reply {
        let command = if steer { "steer" } else { "follow_up" };
        let message = UserMessage::new(&m.message, &m.images);
        if steer {
            self.state.queues.steering.push_back(message);
        } else {
            self.state.queues.follow_up.push_back(message);
        }
        let continues = !self.is_busy()
            && matches!(
                self.state.messages.last().as_deref(),
                Some(crate::protocol::message::AgentMessage::Assistant(_))
            );
        if continues && self.state.credentials().is_ok() {
            let first = if steer {
                Vec::new()
            } else {
                self.state.queues.poll_follow_up()
            };
            // The response to the queuing command precedes the run's events.
            return Reply::answer(id, command, Ok(None)).then(Then::Continue(first));
        }
        Reply::answer(id, command, Ok(None))
    }

    /// Serializes the context straight into the response, without an intermediate JSON tree;
    /// messages still in the session file are copied from it as they are.
    fn get_messages(&mut self, id: Option<Value>) -> Reply {
        let response = match self.state.messages.to_json() {
            Ok(data) => Response::ok_raw(id, "get_messages", Some(data)),
            Err(e) => Response::err(id, "get_messages", CommandError::Io(e.to_string())),
        };
        crate::memory::release_free_pages();
        Reply::now(response)
    }

    /// `compact`: aborts a run, then summarises; the response comes when the summary is written.
    fn compact(&mut self, id: Option<Value>, custom: Option<&str>) -> Reply {
        if self.is_busy() {
            self.abort_run();
        }
        match self.start_compaction(super::compaction::Origin::Manual(id.clone()), custom) {
            Ok(()) => Reply::later(),
            Err(e) => Reply::answer(id, "compact", Err(e)),
        }
    }

    /// Replaces the session: id, file, context and name; queues, todos and usage start over.
    pub(super) fn reset(
        &mut self,
        id: String,
        store: super::store::Store,
        messages: super::context::Context,
        name: Option<String>,
    ) {
        // The previous session's spilled command outputs go with it.
        self.bash.clear_spill();
        self.state.id = id;
        self.state.store = store;
        self.state.messages = messages;
        self.state.name = name;
        self.state.queues.clear();
        self.state.todos.clear();
    }

    fn branch_messages(&mut self) -> Answer {
        let Some(path) = self
            .state
            .store
            .path()
            .filter(|_| self.state.store.is_on_disk())
        else {
            return data(&reply::BranchMessages {
                messages: Vec::new(),
            });
        };
        let messages = super::store::user_messages(path)?
            .into_iter()
            .map(|(entry_id, text)| reply::BranchMessage { entry_id, text })
            .collect();
        data(&reply::BranchMessages { messages })
    }

    /// Writes the HTML page; by default next to the session file.
    fn export_html(&mut self, output: Option<&str>) -> Answer {
        let Some(session_path) = self.state.store.path() else {
            return Err(CommandError::Refused(
                "Cannot export in-memory session to HTML".into(),
            ));
        };
        let target = match output {
            Some(p) => crate::tools::paths::resolve(
                &self.state.cwd,
                self.state.settings.home.as_deref(),
                p,
            ),
            None => session_path.with_extension("html"),
        };
        let title = self
            .state
            .name
            .clone()
            .unwrap_or_else(|| format!("gjc session {}", self.state.id));
        let messages = self
            .state
            .messages
            .parsed()
            .map_err(|e| CommandError::Io(e.to_string()))?;
        let html = crate::export_html::render(&title, &self.state.id, messages);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| CommandError::Io(format!("cannot create {}: {e}", dir.display())))?;
        }
        let written = std::fs::write(&target, html);
        crate::memory::release_free_pages();
        written.map_err(|e| CommandError::Io(format!("cannot write {}: {e}", target.display())))?;
        data(&reply::Exported {
            path: target.display().to_string(),
        })
    }

    fn set_todos(&mut self, phases: &[Value]) -> Answer {
        let phases = todos::normalize(phases)
            .map_err(|e| CommandError::Invalid(format!("Invalid todo phases: {e}")))?;
        self.state.todos = phases;
        self.show_todos();
        data(&reply::TodoPhases {
            todo_phases: &self.state.todos,
        })
    }

    fn set_host_tools(&mut self, defs: &[HostToolDefinition]) -> Answer {
        let builtin = crate::tools::builtin_names();
        let builtin: Vec<&str> = builtin.iter().map(String::as_str).collect();
        let validated = crate::host::tools::validate(defs, &builtin)
            .map_err(|e| CommandError::Invalid(e.to_string()))?;
        let names: Vec<String> = validated.iter().map(|(d, _)| d.name.clone()).collect();
        let tools = validated
            .into_iter()
            .map(|(def, validator)| {
                let tool: std::sync::Arc<dyn crate::tools::Tool> =
                    crate::tools::host_tool::HostTool::new(def, self.host.clone());
                (tool, validator)
            })
            .collect();
        self.state.tools.set_host_tools(tools);
        data(&reply::ToolNames { tool_names: names })
    }

    fn set_host_uri_schemes(&mut self, defs: &[HostUriSchemeDefinition]) -> Answer {
        let schemes = crate::host::uri::normalize(defs).map_err(CommandError::Invalid)?;
        let names: Vec<String> = schemes.iter().map(|s| s.scheme.clone()).collect();
        self.state.schemes = std::sync::Arc::new(schemes);
        data(&reply::Schemes { schemes: names })
    }

    fn set_capabilities(&mut self, caps: &Value) -> reply::Capabilities {
        let items = caps.as_array().cloned().unwrap_or_default();
        let (accepted, unsupported): (Vec<Value>, Vec<Value>) = items
            .into_iter()
            .partition(|c| c.as_str() == Some("compact_message_update"));
        self.outbox.set_compact(!accepted.is_empty());
        reply::Capabilities {
            accepted_capabilities: accepted,
            unsupported,
        }
    }

    fn set_model(&mut self, provider: &str, model_id: &str) -> Answer {
        let model = self
            .state
            .catalog
            .resolve(provider, model_id)
            .map_err(|e| CommandError::Invalid(e.to_string()))?;
        self.state.catalog.api_key(provider).map_err(|_| {
            CommandError::Credentials(format!("No API key for {provider}/{model_id}"))
        })?;
        self.switch_model(model.clone());
        // The model object itself is the payload.
        data(&model.info())
    }

    /// Makes `model` current: the thinking level is clamped to it (announced when it changes)
    /// and the registry record names it.
    fn switch_model(&mut self, model: catalog::Model) {
        self.state.model = Some(model);
        self.apply_thinking(self.state.thinking);
        self.registry_update();
    }

    /// The next available model (the current one when it is the only one).
    fn cycle_model(&mut self) -> Answer {
        let available: Vec<catalog::Model> = self
            .state
            .catalog
            .available()
            .into_iter()
            .cloned()
            .collect();
        if available.is_empty() {
            return Err(CommandError::Refused(
                "No models available: set a provider's API key or add models.json".into(),
            ));
        }
        let current = self.state.model.as_ref().and_then(|m| {
            available
                .iter()
                .position(|a| a.provider == m.provider && a.id == m.id)
        });
        let next = available[current.map_or(0, |i| (i + 1) % available.len())].clone();
        self.switch_model(next.clone());
        data(&reply::CycledModel {
            model: next.info(),
            thinking_level: self.state.thinking,
            is_scoped: false,
        })
    }

    fn set_thinking_level(&mut self, level: &str) -> Answer {
        if !WIRE_THINKING_LEVELS.contains(&level) {
            return Err(CommandError::Invalid(format!(
                "Invalid thinking level: {level} (one of {})",
                WIRE_THINKING_LEVELS.join(", ")
            )));
        }
        self.apply_thinking(level);
        Ok(None)
    }

    /// Clamps to the model; announces a change with `thinking_level_changed`.
    fn apply_thinking(&mut self, level: &str) {
        let clamped = catalog::clamp_thinking(level, self.state.model.as_ref());
        if clamped != self.state.thinking {
            self.state.thinking = clamped;
            self.emit(AgentEvent::ThinkingLevelChanged {
                thinking_level: clamped.to_string(),
            });
        }
    }

    /// `{level}` after the step; no payload for a model without thinking levels.
    fn cycle_thinking_level(&mut self) -> Answer {
        let Some(model) = &self.state.model else {
            return Ok(None);
        };
        let levels = catalog::thinking_cycle(model);
        if levels.is_empty() {
            return Ok(None);
        }
        let i = levels
            .iter()
            .position(|l| *l == self.state.thinking)
            .map_or(0, |i| (i + 1) % levels.len());
        self.apply_thinking(levels[i]);
        data(&reply::ThinkingLevel {
            level: self.state.thinking,
        })
    }

    /// Every provider gjc knows, with whether a key for it is present.
    fn login_providers(&self) -> reply::LoginProviders {
        let providers = self
            .state
            .catalog
            .providers()
            .into_iter()
            .map(|(id, authenticated)| reply::LoginProvider {
                name: id.clone(),
                id,
                available: true,
                authenticated,
            })
            .collect();
        reply::LoginProviders { providers }
    }
}

/// A session command's `cwd`, checked before anything changes.
fn parse_mode(mode: &str, what: &str) -> Result<QueueMode, CommandError> {
    QueueMode::parse(mode)
        .ok_or_else(|| CommandError::Invalid(format!("Invalid {what} mode: {mode}")))
}
