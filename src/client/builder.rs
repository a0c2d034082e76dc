//! `ClientBuilder`: how gjc is spawned and how its stdout is read (the reader thread and its
//! bounded queue).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use crossbeam_channel::{bounded, unbounded, Sender};

use super::stderr::{self, StderrTo};
use super::{ClientError, RpcClient};

/// Sees every stdout line as it is read (a protocol checker, a trace).
pub type Inspector = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// How many frames the reader thread may hold before it stops reading.
#[derive(Debug, Clone, Copy)]
enum ReadAhead {
    Frames(usize),
    Unbounded,
}

pub struct ClientBuilder {
    command: Command,
    stderr: StderrTo,
    inspector: Option<Inspector>,
    read_ahead: ReadAhead,
    backlog_limit: usize,
    max_line_bytes: usize,
}

impl ClientBuilder {
    /// A builder for `command` with the defaults the module documentation names.
    pub(super) fn new(command: Command) -> ClientBuilder {
        ClientBuilder {
            command,
            stderr: StderrTo::Log,
            inspector: None,
            read_ahead: ReadAhead::Frames(64),
            backlog_limit: 64 << 20,
            max_line_bytes: 1 << 30,
        }
    }

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

    /// Where gjc's stderr goes (default: [`StderrTo::Log`]).
    pub fn stderr(mut self, to: StderrTo) -> Self {
        self.stderr = to;
        self
    }

    /// Forward gjc's stderr to this process's stderr with a prefix.
    pub fn forward_stderr(self, prefix: &str) -> Self {
        self.stderr(StderrTo::Prefixed(prefix.to_string()))
    }

    /// Frames the reader thread reads ahead of the caller before it stops reading (default 64).
    pub fn read_ahead(mut self, frames: usize) -> Self {
        self.read_ahead = ReadAhead::Frames(frames.max(1));
        self
    }

    /// Reads everything gjc writes as soon as it is written, without bound, and keeps any
    /// number of skipped frames. This removes gjc's backpressure: only for tests that write a
    /// whole flood of commands before reading the answers.
    pub fn unbounded_read_ahead(mut self) -> Self {
        self.read_ahead = ReadAhead::Unbounded;
        self.backlog_limit = usize::MAX;
        self
    }

    /// Bytes of frames kept while a wait skips them (default 64 MiB); past it the wait fails
    /// with [`ClientError::BacklogFull`].
    pub fn backlog_limit(mut self, bytes: usize) -> Self {
        self.backlog_limit = bytes;
        self
    }

    /// The longest line accepted from gjc (default 1 GiB: a `get_messages` of a long session
    /// is one line).
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }

    pub fn spawn(mut self) -> std::io::Result<RpcClient> {
        self.command.stdin(Stdio::piped()).stdout(Stdio::piped());
        self.command.stderr(match self.stderr {
            StderrTo::Discard => Stdio::null(),
            _ => Stdio::piped(),
        });
        let mut child = self.command.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let stdin = child.stdin.take();
        if let Some(stderr) = child.stderr.take() {
            stderr::forward(stderr, self.stderr.clone())?;
        }
        let (tx, lines) = match self.read_ahead {
            ReadAhead::Frames(n) => bounded(n),
            ReadAhead::Unbounded => unbounded(),
        };
        let inspector = self.inspector.take();
        let max_line = self.max_line_bytes;
        std::thread::Builder::new()
            .name("rpc-client-reader".into())
            .spawn(move || read_lines(stdout, &tx, inspector, max_line))?;
        Ok(RpcClient {
            child,
            stdin,
            lines,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            backlog_limit: self.backlog_limit,
            next_id: 0,
        })
    }
}

/// The reader thread: one message per line, blocking while the queue is full.
fn read_lines(
    stdout: impl Read,
    tx: &Sender<Result<String, ClientError>>,
    inspector: Option<Inspector>,
    max_line: usize,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = max_line as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > max_line {
            let _ = tx.send(Err(ClientError::LineTooLong(max_line)));
            return;
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        if let Some(inspect) = &inspector {
            inspect(&text);
        }
        if tx.send(Ok(text)).is_err() {
            return;
        }
    }
}
