//! `RpcClient`: a small host-side client for Rust programs, tests and examples. It spawns
//! `gjc --mode rpc`, writes commands, reads frames on a thread, and waits for responses and events
//! with a bound on every wait. Frames read while waiting for something else are kept in order.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError};
use serde_json::{json, Value};

/// One line read from gjc's stdout.
#[derive(Debug, Clone)]
pub struct Frame {
    pub line: String,
    pub value: Value,
}

#[derive(Debug)]
pub enum ClientError {
    Timeout(String),
    Closed,
    Io(std::io::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Timeout(what) => write!(f, "timed out waiting for {what}"),
            ClientError::Closed => write!(f, "gjc closed its stdout"),
            ClientError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> ClientError {
        ClientError::Io(e)
    }
}

/// Sees every stdout line as it is read (a protocol checker, a trace).
pub type Inspector = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

pub struct ClientBuilder {
    command: Command,
    stderr_prefix: Option<String>,
    inspector: Option<Inspector>,
}

impl ClientBuilder {
    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(mut self, args: I) -> Self {
        self.command.args(args);
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: &str) -> Self {
        self.command.env_remove(key);
        self
    }

    /// Runs gjc as another user (a host that drops privileges for the agent).
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        use std::os::unix::process::CommandExt;
        self.command.uid(uid).gid(gid);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Calls `inspector` with every line gjc writes, on the reader thread, before it is queued.
    pub fn inspect(mut self, inspector: Inspector) -> Self {
        self.inspector = Some(inspector);
        self
    }

    /// Forward gjc's stderr to this process's stderr with a prefix (default: discard it).
    pub fn forward_stderr(mut self, prefix: &str) -> Self {
        self.stderr_prefix = Some(prefix.to_string());
        self
    }

    pub fn spawn(mut self) -> std::io::Result<RpcClient> {
        self.command.stdin(Stdio::piped()).stdout(Stdio::piped());
        self.command.stderr(if self.stderr_prefix.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = self.command.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let stdin = child.stdin.take();
        if let (Some(prefix), Some(stderr)) = (self.stderr_prefix, child.stderr.take()) {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    eprintln!("{prefix}{line}");
                }
            });
        }
        let (tx, frames) = unbounded();
        let inspector = self.inspector.take();
        std::thread::Builder::new()
            .name("rpc-client-reader".into())
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                    let text = line.trim_end_matches('\n').to_string();
                    if let Some(inspect) = &inspector {
                        inspect(&text);
                    }
                    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    if tx.send(Frame { line: text, value }).is_err() {
                        break;
                    }
                    line.clear();
                }
            })?;
        Ok(RpcClient {
            child,
            stdin,
            frames,
            backlog: VecDeque::new(),
            next_id: 0,
        })
    }
}

pub struct RpcClient {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Frame>,
    backlog: VecDeque<Frame>,
    next_id: u64,
}

impl RpcClient {
    /// `program --mode rpc` plus whatever the builder adds.
    pub fn builder(program: impl AsRef<Path>) -> ClientBuilder {
        let mut command = Command::new(program.as_ref());
        command.arg("--mode").arg("rpc");
        ClientBuilder {
            command,
            stderr_prefix: None,
            inspector: None,
        }
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

    /// Writes one frame as a JSON line.
    pub fn send(&mut self, frame: &Value) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(frame).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.send_raw(&line)
    }

    /// Writes bytes as they are (for malformed input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let stdin = self.stdin.as_mut().ok_or(ClientError::Closed)?;
        stdin.write_all(bytes)?;
        stdin.flush()?;
        Ok(())
    }

    /// A fresh request id.
    pub fn next_id(&mut self) -> String {
        self.next_id += 1;
        format!("req_{}", self.next_id)
    }

    /// Sends a command (adding an `id` if it has none) and waits for its response.
    pub fn request(&mut self, mut command: Value, timeout: Duration) -> Result<Value, ClientError> {
        if command.get("id").is_none() {
            command["id"] = json!(self.next_id());
        }
        let id = command["id"].clone();
        self.send(&command)?;
        self.wait_for(|f| f["type"] == "response" && f["id"] == id, timeout)
    }

    /// The next frame, from the backlog first.
    pub fn recv(&mut self, timeout: Duration) -> Result<Frame, ClientError> {
        if let Some(f) = self.backlog.pop_front() {
            return Ok(f);
        }
        self.recv_new(timeout)
    }

    fn recv_new(&mut self, timeout: Duration) -> Result<Frame, ClientError> {
        match self.frames.recv_timeout(timeout) {
            Ok(f) => Ok(f),
            Err(RecvTimeoutError::Timeout) => Err(ClientError::Timeout("a frame".into())),
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
        }
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
    ) -> Result<Frame, ClientError> {
        if let Some(i) = self.backlog.iter().position(|f| pred(&f.value)) {
            return Ok(self.backlog.remove(i).unwrap_or_else(|| unreachable!()));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = match self.recv_new(left) {
                Ok(f) => f,
                Err(ClientError::Timeout(_)) => {
                    return Err(ClientError::Timeout("a matching frame".into()))
                }
                Err(e) => return Err(e),
            };
            if pred(&frame.value) {
                return Ok(frame);
            }
            self.backlog.push_back(frame);
        }
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
    pub fn take_backlog(&mut self) -> Vec<Frame> {
        self.backlog.drain(..).collect()
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
