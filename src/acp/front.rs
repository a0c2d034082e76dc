//! The `gjc-acp` thread: the ACP front end. It is the only writer of stdout in `--mode acp` and
//! owns every piece of ACP state: the client's capabilities, the prompt turn in flight, the
//! tool calls shown, and the JSON-RPC ids of the requests gjc sends to the client.
//!
//! It selects over two sources: the client's messages (from `gjc-acp-in`) and the output lane
//! the session and the host broker write to, the same lane the RPC writer reads. Client requests
//! become the session's ordinary commands, tagged with ids of the form `acp-N` so their
//! responses find their way back; session events become `session/update` notifications; the
//! host broker's callbacks (a confirmation before a tool runs, a file read or write served by
//! the host) become `session/request_permission` and `fs/*` requests (`callbacks.rs`). Session
//! management is in `sessions.rs`, modes and config options in `settings.rs`, the editor's
//! terminals in `terminal.rs`.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use agent_client_protocol_schema::v1::{
    AgentCapabilities, AuthenticateResponse, ClientCapabilities, Error, Implementation,
    InitializeRequest, InitializeResponse, McpCapabilities, PromptCapabilities, RequestId,
    SessionId, SessionNotification, SetSessionConfigOptionResponse,
};
use agent_client_protocol_schema::ProtocolVersion;
use crossbeam_channel::{never, select_biased, Receiver, Sender, TrySendError};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::reader::Incoming;
use super::trust;
use super::updates::{self, SessionUpdate};
use super::wire::Wire;
use crate::host::HostRequest;
use crate::output::OutRx;
use crate::protocol::{Command, Outbound, Response};
use crate::session::{CommandFrame, ControlFrame};

/// The unsupported-protocol-version error code the ACP SDKs use.
const UNSUPPORTED_VERSION: i32 = -32022;

/// What a session command's response is for.
pub(super) enum Waiting {
    /// Nothing waits on it (a cancellation, a policy change).
    Nobody,
    /// The prompt's acceptance; its answer comes with `agent_end`.
    Prompt,
    /// `session/set_config_option` for the model: the chosen `provider/id`.
    SetModel(RequestId, String),
    /// A step of opening, resuming or closing a session (`sessions.rs`).
    Session(super::sessions::Step),
    /// `trust_project` after the editor's answer about this folder (`trust.rs`).
    Trust(PathBuf),
}

impl Waiting {
    /// The client request it answers, if any.
    fn request(&self) -> Option<&RequestId> {
        match self {
            Waiting::Nobody | Waiting::Prompt | Waiting::Trust(_) => None,
            Waiting::SetModel(id, _) => Some(id),
            Waiting::Session(step) => Some(step.request()),
        }
    }
}

/// The `session/prompt` in flight.
pub(super) struct Turn {
    pub(super) id: RequestId,
    pub(super) cancelled: bool,
    /// Cancelled by `$/cancel_request` alone: answered -32800 rather than `cancelled`.
    pub(super) by_request: bool,
    /// The prompt command has been accepted by the session (its run has started).
    accepted: bool,
}

impl Turn {
    pub(super) fn new(id: RequestId) -> Turn {
        Turn {
            id,
            cancelled: false,
            by_request: false,
            accepted: false,
        }
    }
}

/// A tool call as announced, for the updates that follow.
pub(super) struct Shown {
    pub args: Value,
}

pub struct Front<W: Write> {
    pub(super) wire: Wire<W>,
    control: Sender<ControlFrame>,
    pub(super) commands: Option<Sender<CommandFrame>>,
    pub(super) host: Sender<HostRequest>,
    pub(super) cwd: PathBuf,
    pub(super) client: ClientCapabilities,
    /// The id of the session served, as the client knows it (empty once it is closed).
    pub(super) session: String,
    /// Sessions opened on this connection and not closed since.
    pub(super) known: HashSet<String>,
    /// Where stored sessions and a project's skills are found.
    pub(super) projects: super::sessions::Projects,
    /// A prompt or load has used the session gjc started with.
    pub(super) session_used: bool,
    /// The MCP servers the editor gave for the session served (`mcp.rs`).
    pub(super) editor_mcp: Vec<String>,
    next_id: u64,
    pub(super) next_client_id: i64,
    /// The skills offered as slash commands (the project's and the user's).
    pub(super) skills: Vec<crate::prompt::Skill>,
    waiting: HashMap<String, Waiting>,
    pub(super) turn: Option<Turn>,
    pub(super) shown: HashMap<String, Shown>,
    pub(super) outgoing: HashMap<RequestId, super::callbacks::Outgoing>,
    pub(super) terminals: super::terminal::Terminals,
    /// Tells the reader which prompt is running, so a `session/cancel` acts at once.
    pub(super) running: super::reader::Running,
    /// Tools the user allowed for the rest of the session ("allow always").
    pub(super) always: HashSet<String>,
    pub(super) mode: &'static str,
    pub(super) permissions: &'static str,
    /// The sandbox policy outside the full-access mode.
    pub(super) sandbox: crate::protocol::sandbox::SandboxMode,
    /// The models with a key (`provider/id`, name), and the one in use.
    pub(super) models: Vec<(String, String)>,
    pub(super) model: Option<String>,
    /// Context use, cost and title of the session served, sent after each turn.
    pub(super) stats: super::usage::SessionStats,
}

/// The models the front end offers and the one the session starts with.
pub struct Models {
    pub available: Vec<(String, String)>,
    pub current: Option<String>,
    /// The context window of each model, by `provider/id`.
    pub windows: HashMap<String, u64>,
}

impl<W: Write> Front<W> {
    /// The front end writing to `out`, and the output lane it is to read.
    pub fn new(out: W, c: super::Connections) -> (Front<W>, OutRx) {
        let front = Front {
            wire: Wire::new(out),
            control: c.control,
            commands: Some(c.commands),
            host: c.host,
            cwd: c.cwd,
            client: ClientCapabilities::default(),
            session: c.session,
            known: HashSet::new(),
            projects: c.projects,
            session_used: false,
            editor_mcp: Vec::new(),
            next_id: 0,
            next_client_id: 0,
            skills: c.skills,
            waiting: HashMap::new(),
            turn: None,
            shown: HashMap::new(),
            outgoing: HashMap::new(),
            terminals: Default::default(),
            running: Default::default(),
            always: HashSet::new(),
            mode: "default",
            permissions: "ask",
            sandbox: c.sandbox,
            models: c.models.available,
            model: c.models.current,
            stats: super::usage::SessionStats::new(c.models.windows),
        };
        (front, c.frames)
    }

    /// Runs until the output lane closes (the session and the host broker have stopped) or
    /// stdout fails.
    pub fn run(mut self, incoming: Receiver<Incoming>, frames: OutRx) -> std::io::Result<()> {
        let closed = never();
        let no_frames = never();
        let mut open = true;
        let mut first_open = true;
        loop {
            let inbound = if open { &incoming } else { &closed };
            let timer = self.terminals.timer();
            let (first, ordinary) = frames.receivers();
            let first = if first_open { first } else { &no_frames };
            select_biased! {
                recv(first) -> queued => match queued {
                    Ok(queued) => self.on_queued(&frames, queued)?,
                    // Gone together with `ordinary`, which still drains what is left.
                    Err(_) => first_open = false,
                },
                recv(ordinary) -> queued => match queued {
                    Ok(queued) => self.on_queued(&frames, queued)?,
                    Err(_) => break,
                },
                recv(inbound) -> message => match message {
                    Ok(Incoming::Closed) | Err(_) => {
                        open = false;
                        self.input_closed();
                    }
                    Ok(message) => self.on_incoming(message)?,
                },
                recv(timer) -> _ => self.terminal_deadlines()?,
            }
            let running = self.turn.as_ref().map(|_| self.session.as_str());
            self.running.sync(running);
            if frames.is_empty() {
                self.wire.flush()?;
            }
        }
        self.wire.flush()
    }

    fn on_queued(&mut self, frames: &OutRx, queued: crate::output::Queued) -> std::io::Result<()> {
        let cost = queued.cost();
        let written = self.on_frame(queued.frame);
        frames.written(cost);
        written
    }

    /// Stdin EOF: the session answers what it was sent, then shuts down, as in RPC mode.
    fn input_closed(&mut self) {
        let _ = self.control.send(ControlFrame::InputClosed);
        self.commands = None;
    }

    fn on_incoming(&mut self, message: Incoming) -> std::io::Result<()> {
        match message {
            Incoming::Request { id, method, params } => self.on_request(id, &method, params),
            Incoming::Notification { method, params } => self.on_notification(&method, params),
            Incoming::Response { id, result } => self.on_client_response(id, result),
            Incoming::Invalid { id, error } => self.wire.respond::<()>(id, Err(error)),
            Incoming::Closed => Ok(()),
        }
    }

    fn on_request(&mut self, id: RequestId, method: &str, params: Value) -> std::io::Result<()> {
        log::debug!("acp request {method} id {id}");
        match method {
            "initialize" => self.with(id, params, Self::initialize),
            "authenticate" => self.wire.respond(id, Ok(AuthenticateResponse::new())),
            "session/new" => self.with(id, params, Self::new_session),
            "session/load" => self.with(id, params, Self::load_session),
            "session/resume" => self.with(id, params, Self::resume_session),
            "session/list" => self.with(id, params, Self::list_sessions),
            "session/close" => self.with(id, params, Self::close_session),
            "session/delete" => self.with(id, params, Self::delete_session),
            // Not advertised: keys come from the environment, so there is no sign-in to end,
            // and new sessions would not need one after it.
            "logout" => self.wire.respond::<()>(
                id,
                Err(Error::method_not_found()
                    .data("gjc has no sign-in: API keys come from the environment or models.json")),
            ),
            "session/prompt" => self.with(id, params, Self::prompt),
            "session/set_mode" => self.with(id, params, Self::set_mode),
            "session/set_config_option" => self.with(id, params, Self::set_config_option),
            other => self.wire.respond::<()>(
                id,
                Err(Error::method_not_found().data(format!("gjc does not serve {other}"))),
            ),
        }
    }

    /// Decodes the params and calls the handler, or answers invalid params naming the field.
    fn with<T: DeserializeOwned>(
        &mut self,
        id: RequestId,
        params: Value,
        handler: fn(&mut Self, RequestId, T) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        match decode(params) {
            Ok(p) => handler(self, id, p),
            Err(e) => self.wire.respond::<()>(id, Err(e)),
        }
    }

    fn on_notification(&mut self, method: &str, params: Value) -> std::io::Result<()> {
        match method {
            // A cancel for another session (one replaced since) has nothing to stop.
            "session/cancel" if params["sessionId"].as_str() == Some(self.session.as_str()) => {
                self.cancel()
            }
            "$/cancel_request" => return self.on_cancel_request(params),
            other => log::debug!("ignoring notification {other}"),
        }
        Ok(())
    }

    fn initialize(&mut self, id: RequestId, p: InitializeRequest) -> std::io::Result<()> {
        if p.protocol_version != ProtocolVersion::V1 {
            let error = Error::new(UNSUPPORTED_VERSION, "Unsupported protocol version")
                .data(json!({"requested": p.protocol_version, "supported": [ProtocolVersion::V1]}));
            return self.wire.respond::<()>(id, Err(error));
        }
        self.client = p.client_capabilities;
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .mcp_capabilities(McpCapabilities::new())
            .session_capabilities(super::sessions::capabilities());
        let response = InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .auth_methods(Vec::new())
            .agent_info(
                Implementation::new("gjc", env!("CARGO_PKG_VERSION")).title("gjc".to_string()),
            );
        self.wire.respond(id, Ok(response))?;
        self.send_policy();
        Ok(())
    }

    pub(super) fn cancel(&mut self) {
        let Some(turn) = &mut self.turn else { return };
        turn.cancelled = true;
        // `session/cancel` asks for the `cancelled` stop reason, whatever came before it.
        turn.by_request = false;
        self.abort();
    }

    /// `$/cancel_request`: a prompt stops as with `session/cancel` and is answered -32800 once
    /// its run has ended (so no update follows the answer); a `session/new`, `session/load` or
    /// model change still under way is answered -32800 now, its remaining steps unanswered.
    /// Every other request was answered when it came; unknown ids are ignored.
    fn on_cancel_request(&mut self, params: Value) -> std::io::Result<()> {
        use agent_client_protocol_schema::v1::CancelRequestNotification;
        let Ok(note) = serde_json::from_value::<CancelRequestNotification>(params) else {
            return Ok(());
        };
        let id = note.request_id;
        if let Some(turn) = self.turn.as_mut().filter(|t| t.id == id) {
            if !turn.cancelled {
                turn.cancelled = true;
                turn.by_request = true;
                self.abort();
            }
            return Ok(());
        }
        let in_flight = self.waiting.values().any(|w| w.request() == Some(&id));
        if in_flight && !self.wire.is_cancelled(&id) {
            return self.wire.cancel(id);
        }
        Ok(())
    }

    /// Aborts the run on the control lane, which overtakes every queued command.
    fn abort(&mut self) {
        let id = self.next_command_id();
        self.waiting.insert(id.clone(), Waiting::Nobody);
        let command = Command::decode("abort", json!({}));
        if let Some(Ok(command)) = command {
            let _ = self.control.send(ControlFrame::Command {
                id: Some(Value::String(id)),
                command,
            });
        }
    }

    fn next_command_id(&mut self) -> String {
        self.next_id += 1;
        format!("acp-{}", self.next_id)
    }

    /// Sends a session command; its response comes back through `waiting`. Never blocks: with
    /// the command lane full (the session behind on a flood of requests) the request fails.
    pub(super) fn command(&mut self, name: &str, fields: Value, then: Waiting) {
        let id = self.next_command_id();
        let command = match Command::decode(name, fields) {
            Some(Ok(c)) => c,
            other => {
                log::error!("cannot build the {name} command: {other:?}");
                return self.fail(then, Error::internal_error());
            }
        };
        let Some(tx) = &self.commands else {
            return self.fail(then, Error::internal_error().data("stdin closed"));
        };
        let frame = CommandFrame::Command {
            id: Some(Value::String(id.clone())),
            command,
        };
        match tx.try_send(frame) {
            Ok(()) => {
                self.waiting.insert(id, then);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.fail(then, busy());
            }
        }
    }

    /// Answers the request behind `then` with an error.
    fn fail(&mut self, then: Waiting, error: Error) {
        let id = match then {
            Waiting::Nobody => return,
            Waiting::Prompt => match self.turn.take() {
                Some(turn) => turn.id,
                None => return,
            },
            Waiting::Session(step) => step.request().clone(),
            Waiting::SetModel(id, _) => id,
            Waiting::Trust(cwd) => {
                // The decision is not kept, and the hooks stay skipped: the user is told why.
                let why = match error.data {
                    Some(Value::String(text)) => text,
                    Some(other) => other.to_string(),
                    None => error.message,
                };
                let text = format!("{}; the answer was not kept: {why}", trust::skipped(&cwd));
                if let Err(e) = self.notice(&text) {
                    log::info!("stdout closed: {e}");
                }
                return;
            }
        };
        if let Err(e) = self.wire.respond::<()>(id, Err(error)) {
            log::info!("stdout closed: {e}");
        }
    }

    fn on_frame(&mut self, frame: Outbound) -> std::io::Result<()> {
        match frame {
            Outbound::Ready => Ok(()),
            Outbound::Response(r) => self.on_response(r),
            Outbound::Event(event) => self.on_event(*event),
            Outbound::Frame(frame) => self.on_callback(frame),
            Outbound::Terminal(frame) => self.on_terminal(frame),
            Outbound::Show(show) => {
                if let crate::protocol::Show::Title(title) = &show {
                    self.stats.title = Some(title.clone());
                }
                match updates::show(&show) {
                    Some(update) => self.update(update),
                    None => Ok(()),
                }
            }
        }
    }

    fn on_response(&mut self, r: Response) -> std::io::Result<()> {
        let Some(then) =
            r.id.as_ref()
                .and_then(Value::as_str)
                .and_then(|id| self.waiting.remove(id))
        else {
            return Ok(());
        };
        if !r.success {
            let message = r.error.unwrap_or_else(|| "failed".into());
            self.fail(then, Error::internal_error().data(message));
            return Ok(());
        }
        let data: Value = r
            .data
            .as_ref()
            .and_then(|d| serde_json::from_str(d.get()).ok())
            .unwrap_or(Value::Null);
        match then {
            Waiting::Nobody | Waiting::Trust(_) => Ok(()),
            Waiting::Prompt => {
                let cancelled = self.turn.as_mut().map(|t| {
                    t.accepted = true;
                    t.cancelled
                });
                // A cancel that came while the prompt waited in the command lane found no run.
                if cancelled == Some(true) {
                    self.abort();
                }
                Ok(())
            }
            Waiting::Session(step) => self.session_step(step, &data),
            Waiting::SetModel(id, model) => {
                self.model = Some(model);
                let options = self.config_options();
                self.wire
                    .respond(id, Ok(SetSessionConfigOptionResponse::new(options)))
            }
        }
    }

    pub(super) fn update(&mut self, update: SessionUpdate) -> std::io::Result<()> {
        let notification = SessionNotification::new(self.session.clone(), update);
        self.wire.notify("session/update", notification)
    }

    /// Something the user should know that is not part of the conversation: a `notice` when the
    /// client takes them, else the log.
    pub(super) fn notice(&mut self, text: &str) -> std::io::Result<()> {
        let takes_notices = self
            .client
            .session
            .as_ref()
            .is_some_and(|s| s.notices.is_some());
        if !takes_notices {
            log::warn!("{text}");
            return Ok(());
        }
        use agent_client_protocol_schema::v1::{Notice, NoticeSeverity};
        self.update(SessionUpdate::Notice(Notice::new(
            NoticeSeverity::Warning,
            text,
        )))
    }

    pub(super) fn available_commands(&mut self) -> std::io::Result<()> {
        let commands = super::commands::available(&self.skills);
        self.update(SessionUpdate::AvailableCommandsUpdate(commands))
    }

    pub(super) fn session_id(&self) -> SessionId {
        SessionId::new(self.session.as_str())
    }
}

pub(super) fn busy() -> Error {
    Error::invalid_request().data("a prompt is running in this session; cancel it or wait")
}

/// Decodes a request's params; the error names the field.
fn decode<T: DeserializeOwned>(params: Value) -> Result<T, Error> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        Error::invalid_params().data(format!("{path}: {}", e.into_inner()))
    })
}
