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

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use agent_client_protocol_schema::v1::{
    AgentCapabilities, AuthenticateResponse, ClientCapabilities, Error, Implementation,
    InitializeRequest, InitializeResponse, McpCapabilities, PromptCapabilities, RequestId,
    SessionId, SessionNotification, SetSessionConfigOptionResponse,
};
use agent_client_protocol_schema::ProtocolVersion;
use crossbeam_channel::{never, select_biased, Receiver, Sender};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::live::Conversation;
use super::reader::Incoming;
use super::trust;
use super::updates::{self, SessionUpdate};
use super::wire::Wire;
use crate::host::HostRequest;
use crate::lanes::{CommandFrame, ControlFrame};
use crate::output::OutRx;
use crate::protocol::{Command, Outbound, Response};
use crate::sessions::SessionHost;

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
    pub(super) host: Sender<HostRequest>,
    pub(super) client: ClientCapabilities,
    /// The conversation being handled (`live.rs`); the others wait in `parked`.
    pub(super) c: Conversation,
    pub(super) parked: HashMap<String, Conversation>,
    /// Session ids by the number that tags their frames.
    pub(super) numbers: HashMap<u64, String>,
    /// Starts the sessions' actors; `None` once stdin closed and every session ended.
    pub(super) sessions: Option<SessionHost>,
    ended: Receiver<u64>,
    shutdowns: Receiver<ControlFrame>,
    /// Stdin closed or a shutdown came: no new session starts, the front ends with the last.
    pub(super) closing: bool,
    /// Where stored sessions and a project's skills are found.
    pub(super) projects: super::sessions::Projects,
    next_id: u64,
    pub(super) next_client_id: i64,
    waiting: HashMap<String, Waiting>,
    pub(super) outgoing: HashMap<RequestId, super::callbacks::Asked>,
    pub(super) terminals: super::terminal::Terminals,
    /// Tells the reader which prompts are running, so a `session/cancel` acts at once.
    pub(super) running: super::reader::Running,
    /// The sandbox policy outside the full-access mode.
    pub(super) sandbox: crate::protocol::sandbox::SandboxMode,
    /// The models with a key (`provider/id`, name), the one new sessions start with, and
    /// each model's context window.
    pub(super) models: Vec<(String, String)>,
    pub(super) default_model: Option<String>,
    pub(super) windows: HashMap<String, u64>,
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
            host: c.host,
            client: ClientCapabilities::default(),
            c: Conversation::new(None, String::new(), PathBuf::new(), None, HashMap::new()),
            parked: HashMap::new(),
            numbers: HashMap::new(),
            sessions: c.sessions,
            ended: c.ended,
            shutdowns: c.shutdowns,
            closing: false,
            projects: c.projects,
            next_id: 0,
            next_client_id: 0,
            waiting: HashMap::new(),
            outgoing: HashMap::new(),
            terminals: Default::default(),
            running: Default::default(),
            sandbox: c.sandbox,
            models: c.models.available,
            default_model: c.models.current,
            windows: c.models.windows,
        };
        (front, c.frames)
    }

    /// Runs until the output lane closes (every session and the host broker have stopped) or
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
                recv(self.shutdowns) -> frame => {
                    if let Ok(ControlFrame::Shutdown(why)) = frame {
                        log::info!("shutting down: {why}");
                        self.tell_all(|| ControlFrame::Shutdown(why));
                        self.closing = true;
                        self.finish_if_done();
                    }
                },
                recv(first) -> queued => match queued {
                    Ok(queued) => self.on_queued(&frames, queued)?,
                    // Gone together with `ordinary`, which still drains what is left.
                    Err(_) => first_open = false,
                },
                recv(ordinary) -> queued => match queued {
                    Ok(queued) => self.on_queued(&frames, queued)?,
                    Err(_) => break,
                },
                recv(self.ended) -> number => {
                    if let Ok(number) = number {
                        self.session_ended(number);
                    }
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
            let control = self.c.live.as_ref().map(|l| l.control_lane());
            let running = self.c.turn.as_ref().and(control);
            self.running.sync(&self.c.session, running);
            if frames.is_empty() {
                self.wire.flush()?;
            }
        }
        self.wire.flush()
    }

    fn on_queued(&mut self, frames: &OutRx, queued: crate::output::Queued) -> std::io::Result<()> {
        let cost = queued.cost();
        // Frames of a closed session belong to nobody; the broker's own (0) to no session.
        if queued.session != 0 && !self.focus_number(queued.session) {
            frames.written(cost);
            return Ok(());
        }
        let written = self.on_frame(queued.frame);
        frames.written(cost);
        written
    }

    /// Stdin EOF: each session answers what it was sent, then shuts down, as in RPC mode.
    fn input_closed(&mut self) {
        self.input_closed_all();
        self.closing = true;
        self.finish_if_done();
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
            // A cancel for a session that is not live has nothing to stop.
            "session/cancel" => {
                if params["sessionId"].as_str().is_some_and(|s| self.focus(s)) {
                    self.cancel()
                }
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
            .mcp_capabilities(McpCapabilities::new().http(true))
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
        let Some(turn) = &mut self.c.turn else { return };
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
        let prompting = self
            .parked
            .iter()
            .find(|(_, c)| c.turn.as_ref().is_some_and(|t| t.id == id))
            .map(|(session, _)| session.clone());
        if let Some(session) = prompting {
            self.focus(&session);
        }
        if let Some(turn) = self.c.turn.as_mut().filter(|t| t.id == id) {
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
        if let (Some(Ok(command)), Some(live)) = (command, &self.c.live) {
            live.control(ControlFrame::Command {
                id: Some(Value::String(id)),
                command,
            });
        }
    }

    fn next_command_id(&mut self) -> String {
        self.next_id += 1;
        format!("acp-{}", self.next_id)
    }

    /// Sends a command to the focused session; its response comes back through `waiting`.
    /// Never blocks: with the session's command lane full (it is behind on a flood of its own
    /// requests) the request fails.
    pub(super) fn command(&mut self, name: &str, fields: Value, then: Waiting) {
        let id = self.next_command_id();
        let command = match Command::decode(name, fields) {
            Some(Ok(c)) => c,
            other => {
                log::error!("cannot build the {name} command: {other:?}");
                return self.fail(then, Error::internal_error());
            }
        };
        let Some(live) = &self.c.live else {
            return self.fail(then, Error::session_not_found(self.c.session.clone()));
        };
        let frame = CommandFrame::command(Some(Value::String(id.clone())), command);
        if live.command(frame) {
            self.waiting.insert(id, then);
        } else {
            self.fail(then, busy());
        }
    }

    /// Answers the request behind `then` with an error.
    fn fail(&mut self, then: Waiting, error: Error) {
        let id = match then {
            Waiting::Nobody => return,
            Waiting::Prompt => match self.c.turn.take() {
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
                    self.c.stats.title = Some(title.clone());
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
                let cancelled = self.c.turn.as_mut().map(|t| {
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
                self.c.model = Some(model);
                let options = self.config_options();
                self.wire
                    .respond(id, Ok(SetSessionConfigOptionResponse::new(options)))
            }
        }
    }

    pub(super) fn update(&mut self, update: SessionUpdate) -> std::io::Result<()> {
        let notification = SessionNotification::new(self.c.session.clone(), update);
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
        let commands = super::commands::available(&self.c.skills);
        self.update(SessionUpdate::AvailableCommandsUpdate(commands))
    }

    pub(super) fn session_id(&self) -> SessionId {
        SessionId::new(self.c.session.as_str())
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
