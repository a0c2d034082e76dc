//! One configured server of a session: its connection, its state (starting, ready with its
//! tools, failed with the reason, stopped) and its restarts. Starting runs on a thread of its own
//! (`start`) or, to restart a crashed server on the next call, on the calling tool thread, with
//! back-off between attempts. Every change is told to the session (`Changed`), which reads the
//! state afresh: the event, `get_state` and the tool list come from the same value.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::client::{Client, Note};
use super::config::{ServerConfig, Spec};
use super::handshake::{self, ToolDef};
use super::http;
use super::transport::{Deliver, Transport};

/// A server's state, as hosts see it.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Starting,
    Ready { tools: usize },
    Failed { reason: String },
    Stopped,
}

impl State {
    pub fn label(&self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Ready { .. } => "ready",
            State::Failed { .. } => "failed",
            State::Stopped => "stopped",
        }
    }
}

/// A server's state changed (its name); the session reads the rest.
#[derive(Debug, Clone)]
pub struct Changed(pub String);

/// Why a server of the old HTTP+SSE transport (`"type": "sse"`) is not started.
pub const SSE_UNSUPPORTED: &str = "the old HTTP+SSE transport (type \"sse\") is not supported: \
     give the server's streamable HTTP endpoint (type \"http\") instead";
/// How long connecting to an HTTP server may take.
const HTTP_CONNECT: Duration = Duration::from_secs(10);
/// How long posting a notification or a response may take.
const HTTP_NOTIFY: Duration = Duration::from_secs(10);

/// The transport of `config`'s server: its process (stdio) or its endpoint (HTTP).
fn transport(
    config: &ServerConfig,
    cwd: &std::path::Path,
    deliver: Deliver,
) -> Result<Box<dyn Transport>, String> {
    match &config.spec {
        Spec::Stdio { .. } => Ok(Box::new(super::stdio::spawn(&config.spec, cwd, deliver)?)),
        Spec::Http { url, headers } => {
            // The client gives up on a call (and cancels it) well before this: it bounds a
            // reader nobody cancels, such as the handshake's.
            let request = config
                .tool_timeout
                .saturating_mul(10)
                .max(config.startup_timeout)
                + HTTP_CONNECT;
            let timeouts = http::Timeouts {
                connect: HTTP_CONNECT,
                request,
                notify: HTTP_NOTIFY,
            };
            let limits = http::Limits::default();
            Ok(Box::new(http::connect(
                url, headers, timeouts, limits, deliver,
            )?))
        }
        Spec::Sse { .. } => Err(SSE_UNSUPPORTED.into()),
    }
}

/// The longest wait between restarts of a server that keeps crashing.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub struct Server {
    pub config: ServerConfig,
    cwd: PathBuf,
    inner: Mutex<Inner>,
    changed: Sender<Changed>,
    /// When the current start began, for the first model request's wait.
    pub started_at: Mutex<Instant>,
    /// A `tools/list` is under way (`relisting`), and another change came since it began
    /// (`dirty`): a server that floods `list_changed` gets one listing at a time.
    relisting: AtomicBool,
    dirty: AtomicBool,
}

struct Inner {
    state: State,
    client: Option<Arc<Client>>,
    tools: Vec<ToolDef>,
    /// Connections made so far: notes of an older one are ignored.
    generation: u64,
    crashes: u32,
    retry_at: Option<Instant>,
}

impl Server {
    pub fn new(config: ServerConfig, cwd: PathBuf, changed: Sender<Changed>) -> Arc<Server> {
        Arc::new(Server {
            config,
            cwd,
            inner: Mutex::new(Inner {
                state: State::Starting,
                client: None,
                tools: Vec::new(),
                generation: 0,
                crashes: 0,
                retry_at: None,
            }),
            changed,
            started_at: Mutex::new(Instant::now()),
            relisting: AtomicBool::new(false),
            dirty: AtomicBool::new(false),
        })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn state(&self) -> State {
        self.inner().state.clone()
    }

    pub fn tools(&self) -> Vec<ToolDef> {
        self.inner().tools.clone()
    }

    fn tell(&self) {
        let _ = self.changed.send(Changed(self.config.name.clone()));
    }

    /// Starts the server on a `gjc-mcp-start` thread.
    pub fn start(self: &Arc<Self>) {
        let server = self.clone();
        let spawned = std::thread::Builder::new()
            .name("gjc-mcp-start".into())
            .spawn(move || {
                let _ = server.connect();
            });
        if let Err(e) = spawned {
            self.fail(
                self.inner().generation,
                format!("cannot start a thread: {e}"),
            );
        }
    }

    /// Connects, shakes hands and lists the tools, on the calling thread. The old connection,
    /// if any, is closed first.
    pub fn connect(self: &Arc<Self>) -> Result<Arc<Client>, String> {
        let generation = {
            let mut inner = self.inner();
            if inner.state == State::Stopped {
                return Err("the server was stopped".into());
            }
            inner.generation += 1;
            inner.state = State::Starting;
            if let Some(old) = inner.client.take() {
                std::thread::spawn(move || old.close());
            }
            inner.generation
        };
        *self.started_at.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.tell();
        match self.open(generation) {
            Ok((client, tools)) => {
                let mut inner = self.inner();
                if inner.generation != generation || inner.state == State::Stopped {
                    drop(inner);
                    client.close();
                    return Err("the server was stopped".into());
                }
                // The connection failed after its tools were listed (an HTTP server's GET
                // stream can hear of a forgotten session then): it stays failed, not ready.
                if let State::Failed { reason } = &inner.state {
                    let reason = reason.clone();
                    drop(inner);
                    client.close();
                    return Err(reason);
                }
                inner.state = State::Ready { tools: tools.len() };
                inner.tools = tools;
                inner.client = Some(client.clone());
                inner.retry_at = None;
                drop(inner);
                self.tell();
                Ok(client)
            }
            Err(reason) => {
                self.fail(generation, reason.clone());
                Err(reason)
            }
        }
    }

    fn open(self: &Arc<Self>, generation: u64) -> Result<(Arc<Client>, Vec<ToolDef>), String> {
        if let Spec::Sse { .. } = self.config.spec {
            return Err(SSE_UNSUPPORTED.into());
        }
        let weak: Weak<Server> = Arc::downgrade(self);
        let (config, cwd) = (self.config.clone(), self.cwd.clone());
        let client = Client::new(
            move |note| {
                if let Some(server) = weak.upgrade() {
                    server.on_note(generation, note);
                }
            },
            move |deliver| transport(&config, &cwd, deliver),
        )?;
        let timeout = self.config.startup_timeout;
        let key = match &self.config.spec {
            Spec::Stdio { command, args, .. } => format!("{command}\0{}", args.join("\0")),
            Spec::Http { url, .. } | Spec::Sse { url } => url.clone(),
        };
        let opened = handshake::open(&client, &key, timeout)
            .and_then(|_| handshake::list_tools(&client, timeout));
        match opened {
            Ok(tools) => Ok((client, tools)),
            Err(e) => {
                // The closing reason (its stderr) says more than "did not answer".
                let closed = client.closed_within(Duration::from_millis(500));
                let why = closed.map(|c| format!("{e} ({c})")).unwrap_or(e);
                std::thread::spawn(move || client.close());
                Err(why)
            }
        }
    }

    /// Marks the server failed; the next call restarts it after a back-off that grows with
    /// each crash.
    fn fail(&self, generation: u64, reason: String) {
        self.fail_with(generation, reason, true);
    }

    fn fail_with(&self, generation: u64, reason: String, backoff: bool) {
        let mut inner = self.inner();
        // Stopped, replaced, or already failed (the reader and the handshake both report it).
        if inner.generation != generation
            || matches!(inner.state, State::Stopped | State::Failed { .. })
        {
            return;
        }
        if backoff {
            inner.crashes += 1;
            let wait = Duration::from_millis(500)
                .saturating_mul(1 << inner.crashes.min(6))
                .min(MAX_BACKOFF);
            inner.retry_at = Some(Instant::now() + wait);
        } else {
            inner.retry_at = None;
        }
        inner.state = State::Failed { reason };
        if let Some(client) = inner.client.take() {
            std::thread::spawn(move || client.close());
        }
        drop(inner);
        self.tell();
    }

    fn on_note(self: &Arc<Self>, generation: u64, note: Note) {
        match note {
            Note::Closed(why) => self.fail(generation, why),
            // The server forgot its session: nothing crashed, the next call opens a new one.
            Note::Expired(why) => self.fail_with(generation, why, false),
            Note::ToolsChanged => {
                self.dirty.store(true, Ordering::SeqCst);
                if self.relisting.swap(true, Ordering::SeqCst) {
                    return;
                }
                let server = self.clone();
                let spawned = std::thread::Builder::new()
                    .name("gjc-mcp-list".into())
                    .spawn(move || loop {
                        // Until no change came in while listing, also one that came as this
                        // thread was letting go.
                        while server.dirty.swap(false, Ordering::SeqCst) {
                            server.relist(generation);
                        }
                        server.relisting.store(false, Ordering::SeqCst);
                        if !server.dirty.load(Ordering::SeqCst)
                            || server.relisting.swap(true, Ordering::SeqCst)
                        {
                            break;
                        }
                    });
                if spawned.is_err() {
                    self.relisting.store(false, Ordering::SeqCst);
                }
            }
        }
    }

    /// `notifications/tools/list_changed`: the tools are listed again.
    fn relist(&self, generation: u64) {
        let client = {
            let inner = self.inner();
            if inner.generation != generation {
                return;
            }
            inner.client.clone()
        };
        let Some(client) = client else { return };
        match handshake::list_tools(&client, self.config.startup_timeout) {
            Ok(tools) => {
                let mut inner = self.inner();
                if inner.generation != generation || !matches!(inner.state, State::Ready { .. }) {
                    return;
                }
                inner.state = State::Ready { tools: tools.len() };
                inner.tools = tools;
                drop(inner);
                self.tell();
            }
            Err(e) => log::warn!(
                "MCP server {}: listing its tools again failed: {e}",
                self.config.name
            ),
        }
    }

    /// The live connection of a ready server, for a call that starts without waiting.
    pub fn ready_client(&self) -> Option<Arc<Client>> {
        let inner = self.inner();
        match (&inner.state, &inner.client) {
            (State::Ready { .. }, Some(client)) if client.closed().is_none() => {
                Some(client.clone())
            }
            _ => None,
        }
    }

    /// The connection for a call: the live one, or a new one when the server crashed and its
    /// back-off has passed (restarted on the calling thread).
    pub fn client_for_call(self: &Arc<Self>) -> Result<Arc<Client>, String> {
        let name = &self.config.name;
        {
            let inner = self.inner();
            match (&inner.state, &inner.client) {
                (State::Ready { .. }, Some(client)) if client.closed().is_none() => {
                    return Ok(client.clone())
                }
                (State::Stopped, _) => return Err(format!("MCP server {name} was stopped")),
                (State::Starting, _) => {
                    return Err(format!(
                        "MCP server {name} is still starting; try again shortly"
                    ))
                }
                (State::Failed { reason }, _) => {
                    if let Some(at) = inner.retry_at.filter(|at| *at > Instant::now()) {
                        let wait = at.saturating_duration_since(Instant::now());
                        return Err(format!(
                            "MCP server {name} failed: {reason}. It is restarted on a call made after {:.1} s.",
                            wait.as_secs_f64()
                        ));
                    }
                }
                _ => {}
            }
        }
        log::info!("MCP server {name}: restarting");
        self.connect()
            .map_err(|e| format!("MCP server {name} failed to restart: {e}"))
    }

    /// Restarts now (the host's `mcp_restart_server`), on a thread of its own.
    pub fn restart(self: &Arc<Self>) {
        {
            let mut inner = self.inner();
            if inner.state == State::Stopped {
                return;
            }
            inner.crashes = 0;
            inner.retry_at = None;
        }
        self.start();
    }

    /// Stops the server for good: stdin closed, SIGTERM, SIGKILL (bounded); returns when gone.
    pub fn stop(&self) {
        let client = {
            let mut inner = self.inner();
            inner.state = State::Stopped;
            inner.generation += 1;
            inner.tools.clear();
            inner.client.take()
        };
        if let Some(client) = client {
            client.close();
        }
    }
}
