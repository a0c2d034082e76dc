//! `RpcClient`: a host-side client for Rust programs. It spawns `gjc --mode rpc`, writes typed
//! commands and host replies (the crate's own [`protocol`](crate::protocol) types), reads typed
//! [`Frame`]s on a thread and waits for responses and events with a bound on every wait. Frames
//! read while waiting for something else are kept in order.
//!
//! Reading keeps gjc's backpressure: the reader thread hands lines over a bounded queue
//! ([`ClientBuilder::read_ahead`], 64 frames by default) and stops reading while it is full, so
//! a host that does not read makes gjc's stdout fill up, and gjc then stops taking commands
//! instead of this process buffering without end. Frames skipped while waiting for another are
//! kept up to a byte limit ([`ClientBuilder::backlog_limit`]). gjc's stderr goes to the `log`
//! facade (target `gjc`) unless the builder says otherwise.
//!
//! With `default-features = false, features = ["client"]` this module and the protocol types
//! build without the agent.
//!
//! ```no_run
//! use std::time::Duration;
//! use gjc::client::{Handlers, RpcClient};
//! use gjc::protocol::command::{Command, GetStateParams};
//! use gjc::protocol::frame::{Event, Frame};
//! use gjc::protocol::message::ToolOutput;
//!
//! # fn main() -> Result<(), gjc::client::ClientError> {
//! let wait = Duration::from_secs(120);
//! let mut gjc = RpcClient::builder("gjc").spawn()?;
//! let ready = gjc.next_frame(wait)?;
//! assert!(matches!(ready, Frame::Ready(_)));
//!
//! let state = gjc.call(Command::GetState(GetStateParams::default()), wait)?;
//! let state: serde_json::Value = state.data_as().expect("get_state succeeds");
//! println!("model: {}", state["model"]["id"]);
//!
//! let ack = gjc.prompt("Summarise README.md", wait)?;
//! assert!(ack.success, "{:?}", ack.error);
//!
//! // Answer host tool calls while the run goes on; print the assistant's text.
//! let mut handlers = Handlers::new().tool("lookup", |call, _| {
//!     ToolOutput::text(format!("no entry for {}", call.arguments))
//! });
//! gjc.serve(&mut handlers, wait, |frame| match frame.event() {
//!     Some(Event::MessageEnd { message }) => {
//!         println!("{message:?}");
//!         false
//!     }
//!     Some(Event::AgentEnd { .. }) => true,
//!     _ => false,
//! })?;
//! gjc.close_stdin();
//! gjc.wait_exit(Duration::from_secs(5));
//! # Ok(())
//! # }
//! ```

mod builder;
mod handlers;
mod stderr;

use std::cell::OnceCell;
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde::Serialize;
use serde_json::{json, Value};

pub use builder::{ClientBuilder, Inspector};
pub use handlers::{Answer, Callback, Handlers, Progress, UiAnswer, UriContent};
pub use stderr::StderrTo;

use crate::protocol::command::{Command as GjcCommand, PromptParams};
use crate::protocol::frame::{Frame, ResponseFrame};
use crate::protocol::host_reply::HostReply;

/// One line read from gjc, with its JSON tree (the untyped view, for protocol tests).
#[derive(Debug, Clone)]
pub struct JsonFrame {
    pub line: String,
    pub value: Value,
}

#[derive(Debug)]
pub enum ClientError {
    Timeout(String),
    Closed,
    Io(std::io::Error),
    /// A line that is not a frame this crate knows (the line, and why).
    Protocol(String, String),
    /// More skipped frames than the backlog limit allows: the caller waits for one frame while
    /// ignoring a flood of others.
    BacklogFull(usize),
    /// gjc wrote a line longer than the client accepts (`ClientBuilder::max_line_bytes`).
    LineTooLong(usize),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Timeout(what) => write!(f, "timed out waiting for {what}"),
            ClientError::Closed => write!(f, "gjc closed its stdout"),
            ClientError::Io(e) => write!(f, "i/o error: {e}"),
            ClientError::Protocol(line, why) => write!(f, "unreadable frame ({why}): {line}"),
            ClientError::BacklogFull(bytes) => {
                write!(
                    f,
                    "{bytes} bytes of frames skipped while waiting; read them"
                )
            }
            ClientError::LineTooLong(limit) => write!(f, "gjc wrote a line over {limit} bytes"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> ClientError {
        ClientError::Io(e)
    }
}

/// A line read and not yet consumed, parsed the ways it has been looked at.
struct Entry {
    line: String,
    value: OnceCell<Value>,
    frame: OnceCell<Result<Frame, String>>,
}

impl Entry {
    fn new(line: String) -> Entry {
        Entry {
            line,
            value: OnceCell::new(),
            frame: OnceCell::new(),
        }
    }

    fn value(&self) -> &Value {
        self.value
            .get_or_init(|| serde_json::from_str(&self.line).unwrap_or(Value::Null))
    }

    fn frame(&self) -> Result<&Frame, ClientError> {
        self.frame
            .get_or_init(|| Frame::parse(&self.line).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|why| ClientError::Protocol(self.line.clone(), why.clone()))
    }

    fn into_json(self) -> JsonFrame {
        self.value();
        JsonFrame {
            value: self.value.into_inner().unwrap_or(Value::Null),
            line: self.line,
        }
    }

    fn into_frame(self) -> Result<Frame, ClientError> {
        self.frame()?;
        match self.frame.into_inner() {
            Some(Ok(frame)) => Ok(frame),
            _ => unreachable!("parsed just above"),
        }
    }
}

/// A command with the `id` the client gave it.
#[derive(Serialize)]
pub(crate) struct WithId<'a> {
    id: String,
    #[serde(flatten)]
    command: &'a GjcCommand,
}

/// Writes one value as a JSON line.
pub(crate) fn write_frame(
    stdin: &mut ChildStdin,
    frame: &impl Serialize,
) -> Result<(), ClientError> {
    let mut line = serde_json::to_vec(frame).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stdin.write_all(&line)?;
    stdin.flush()?;
    Ok(())
}

pub struct RpcClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Result<String, ClientError>>,
    backlog: VecDeque<Entry>,
    backlog_bytes: usize,
    backlog_limit: usize,
    next_id: u64,
}

impl RpcClient {
    /// `program --mode rpc` plus whatever the builder adds.
    pub fn builder(program: impl AsRef<Path>) -> ClientBuilder {
        let mut command = Command::new(program.as_ref());
        command.arg("--mode").arg("rpc");
        ClientBuilder::new(command)
    }

    /// The `gjc` found next to the current executable or on PATH.
    pub fn default_program() -> PathBuf {
        if let Some(p) = std::env::var_os("GJC_BIN") {
            return PathBuf::from(p);
        }
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|d| d.to_path_buf()))
            .into_iter()
            .flat_map(|d| [d.join("gjc"), d.join("../gjc")])
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("gjc"))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A fresh request id.
    pub fn next_id(&mut self) -> String {
        self.next_id += 1;
        format!("req_{}", self.next_id)
    }

    fn stdin(&mut self) -> Result<&mut ChildStdin, ClientError> {
        self.stdin.as_mut().ok_or(ClientError::Closed)
    }

    // ---- typed frames ----

    /// Sends a command with a fresh `id`, which it returns.
    pub fn send_command(&mut self, command: &GjcCommand) -> Result<String, ClientError> {
        let id = self.next_id();
        let framed = WithId {
            id: id.clone(),
            command,
        };
        write_frame(self.stdin()?, &framed)?;
        Ok(id)
    }

    /// Sends a command and waits for its response; frames that come first stay queued.
    pub fn call(
        &mut self,
        command: GjcCommand,
        timeout: Duration,
    ) -> Result<ResponseFrame, ClientError> {
        let id = Value::from(self.send_command(&command)?);
        let frame = self.wait_frame(
            |f| matches!(f, Frame::Response(r) if r.id.as_ref() == Some(&id)),
            timeout,
        )?;
        match frame {
            Frame::Response(r) => Ok(r),
            _ => unreachable!("the predicate matched a response"),
        }
    }

    /// Sends a `prompt` with `message` alone and waits for its response (the run goes on
    /// after it; its events follow).
    pub fn prompt(
        &mut self,
        message: &str,
        timeout: Duration,
    ) -> Result<ResponseFrame, ClientError> {
        let params = PromptParams {
            message: message.to_string(),
            images: Vec::new(),
            streaming_behavior: None,
        };
        self.call(GjcCommand::Prompt(params), timeout)
    }

    /// Sends a reply to a callback (host tool result, URI result, UI response).
    pub fn reply(&mut self, reply: &HostReply) -> Result<(), ClientError> {
        write_frame(self.stdin()?, reply)
    }

    /// The next frame, from the backlog first.
    pub fn next_frame(&mut self, timeout: Duration) -> Result<Frame, ClientError> {
        self.next_entry(timeout)?.into_frame()
    }

    /// Waits for the first frame matching `pred`; other frames stay queued, in order. A line
    /// that is not a frame fails the wait (it stays queued for the untyped view).
    pub fn wait_frame(
        &mut self,
        mut pred: impl FnMut(&Frame) -> bool,
        timeout: Duration,
    ) -> Result<Frame, ClientError> {
        let entry = self.wait_entry(|e| Ok(pred(e.frame()?)), timeout)?;
        entry.into_frame()
    }

    /// Reads frames, answering callbacks with `handlers`, until `until` returns true for one;
    /// that frame is returned. Every frame is shown to `until`, callbacks after their answer
    /// was sent. Frames already queued are served first.
    pub fn serve(
        &mut self,
        handlers: &mut Handlers,
        timeout: Duration,
        mut until: impl FnMut(&Frame) -> bool,
    ) -> Result<Frame, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self.next_frame(left)?;
            if let Some(answer) = handlers.answer(&frame, self.stdin.as_mut()) {
                let next_id = &mut self.next_id;
                let stdin = self.stdin.as_mut().ok_or(ClientError::Closed)?;
                handlers::send_answer(stdin, &answer, || {
                    *next_id += 1;
                    format!("req_{next_id}")
                })?;
            }
            if until(&frame) {
                return Ok(frame);
            }
        }
    }

    // ---- the untyped view: raw bytes and JSON trees, for protocol tests ----

    /// Writes one JSON value as a line.
    pub fn send(&mut self, frame: &Value) -> Result<(), ClientError> {
        write_frame(self.stdin()?, frame)
    }

    /// Writes bytes as they are (for malformed input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let stdin = self.stdin()?;
        stdin.write_all(bytes)?;
        stdin.flush()?;
        Ok(())
    }

    /// Sends a JSON command (adding an `id` if it has none) and waits for its response.
    pub fn request(&mut self, mut command: Value, timeout: Duration) -> Result<Value, ClientError> {
        if command.get("id").is_none() {
            command["id"] = json!(self.next_id());
        }
        let id = command["id"].clone();
        self.send(&command)?;
        self.wait_for(|f| f["type"] == "response" && f["id"] == id, timeout)
    }

    /// The next line and its JSON, from the backlog first.
    pub fn recv(&mut self, timeout: Duration) -> Result<JsonFrame, ClientError> {
        Ok(self.next_entry(timeout)?.into_json())
    }

    /// Waits for the first frame matching `pred`; other frames stay queued, in order.
    pub fn wait_for(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        Ok(self.wait_for_frame(pred, timeout)?.value)
    }

    pub fn wait_for_frame(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Result<JsonFrame, ClientError> {
        Ok(self
            .wait_entry(|e| Ok(pred(e.value())), timeout)?
            .into_json())
    }

    /// Waits for an event frame of `event_type`, returning its inner event.
    pub fn wait_event(
        &mut self,
        event_type: &str,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let f = self.wait_for(
            |f| f["type"] == "event" && f["payload"]["event_type"] == event_type,
            timeout,
        )?;
        Ok(f["payload"]["event"].clone())
    }

    /// Every frame up to and including the first matching one, in order.
    pub fn collect_until(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Result<Vec<Value>, ClientError> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let f = self.recv(left)?;
            let done = pred(&f.value);
            out.push(f.value);
            if done {
                return Ok(out);
            }
        }
    }

    /// Frames already read and not yet consumed.
    pub fn take_backlog(&mut self) -> Vec<JsonFrame> {
        self.backlog_bytes = 0;
        self.backlog.drain(..).map(Entry::into_json).collect()
    }

    // ---- reading ----

    fn next_entry(&mut self, timeout: Duration) -> Result<Entry, ClientError> {
        if let Some(e) = self.backlog.pop_front() {
            self.backlog_bytes -= e.line.len();
            return Ok(e);
        }
        self.read_entry(timeout)
    }

    fn read_entry(&mut self, timeout: Duration) -> Result<Entry, ClientError> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok(line)) => Ok(Entry::new(line)),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Err(ClientError::Timeout("a frame".into())),
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
        }
    }

    /// The first entry `pred` accepts, from the backlog first, then as lines arrive; the others
    /// are kept in order, up to the backlog limit.
    fn wait_entry(
        &mut self,
        mut pred: impl FnMut(&Entry) -> Result<bool, ClientError>,
        timeout: Duration,
    ) -> Result<Entry, ClientError> {
        for i in 0..self.backlog.len() {
            if pred(&self.backlog[i])? {
                let e = self.backlog.remove(i).unwrap_or_else(|| unreachable!());
                self.backlog_bytes -= e.line.len();
                return Ok(e);
            }
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let entry = match self.read_entry(left) {
                Ok(e) => e,
                Err(ClientError::Timeout(_)) => {
                    return Err(ClientError::Timeout("a matching frame".into()))
                }
                Err(e) => return Err(e),
            };
            let matched = pred(&entry);
            if let Ok(true) = matched {
                return Ok(entry);
            }
            self.keep(entry)?;
            matched?;
        }
    }

    fn keep(&mut self, entry: Entry) -> Result<(), ClientError> {
        if self.backlog_bytes.saturating_add(entry.line.len()) > self.backlog_limit {
            return Err(ClientError::BacklogFull(self.backlog_bytes));
        }
        self.backlog_bytes += entry.line.len();
        self.backlog.push_back(entry);
        Ok(())
    }

    /// Closes gjc's stdin (the host going away).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the process to exit, killing it after the timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for RpcClient {
    fn drop(&mut self) {
        self.stdin = None;
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
