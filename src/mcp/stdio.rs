//! The stdio transport: the server is a child process in its own process group (so a signal
//! reaches everything it started), killed with gjc (`PR_SET_PDEATHSIG`), speaking newline-
//! delimited JSON-RPC. Writes to its stdin never wait for it (`outgoing`), so any thread may
//! send, the session's own too. One reader thread per server parses its stdout; another drains
//! its stderr into a small ring, whose tail is the failure reason when the server dies (stderr
//! carries logs, which are not logged by gjc: they may hold the secrets of its environment).
//! Closing follows the spec: stdin closed, then SIGTERM to the group, then SIGKILL after a
//! grace period.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio as Pipe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::config::Spec;
use super::outgoing::Outgoing;
use super::transport::{Deliver, Incoming, Transport};

/// One message larger than this ends the connection (a result this large is a fault).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// Lines on stdout that are not JSON-RPC, tolerated before the server counts as broken.
const MAX_GARBAGE_LINES: usize = 32;
/// The stderr kept for the failure reason.
const STDERR_RING: usize = 2048;

/// The capacity the line buffer keeps between messages (it grows for a longer one, then
/// shrinks back).
const KEPT_LINE_BYTES: usize = 16 * 1024;
/// How long a server has to exit after stdin closes, then after SIGTERM.
const GRACE: Duration = Duration::from_millis(1500);

pub struct Stdio {
    stdin: Outgoing,
    child: Mutex<Child>,
    pgid: i32,
}

/// The tail of a server's stderr, shared with its drain thread.
#[derive(Clone, Default)]
pub struct StderrRing(Arc<Mutex<Vec<u8>>>);

impl StderrRing {
    fn push(&self, bytes: &[u8]) {
        let mut ring = self.0.lock().unwrap_or_else(|e| e.into_inner());
        ring.extend_from_slice(bytes);
        if ring.len() > STDERR_RING {
            let cut = ring.len() - STDERR_RING;
            ring.drain(..cut);
        }
    }

    /// The last lines, for a failure reason.
    pub fn tail(&self) -> String {
        let ring = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&ring);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

/// Starts the server of `spec` (stdio only) in `default_cwd` unless it names its own.
pub fn spawn(
    spec: &Spec,
    default_cwd: &std::path::Path,
    deliver: Deliver,
) -> Result<Stdio, String> {
    let Spec::Stdio {
        command,
        args,
        env,
        cwd,
    } = spec
    else {
        return Err("not a stdio server".into());
    };
    let mut cmd = Command::new(command);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(match cwd {
            Some(dir) if dir.is_absolute() => dir.clone(),
            Some(dir) => default_cwd.join(dir),
            None => default_cwd.to_path_buf(),
        })
        .stdin(Pipe::piped())
        .stdout(Pipe::piped())
        .stderr(Pipe::piped())
        .process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid and sched_setscheduler are plain syscalls; nothing is allocated
    // after fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            // gjc died between the fork and the prctl: nothing would ever kill this server
            // (the shell's child in exec/ checks the same).
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            crate::sched::restore_in_child();
            Ok(())
        });
    }
    let mut child = keeper_spawn(cmd).map_err(|e| format!("cannot start {command}: {e}"))?;
    let pgid = child.id() as i32;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let ring = StderrRing::default();
    if let Some(mut stderr) = stderr {
        let ring = ring.clone();
        let _ = std::thread::Builder::new()
            .name("gjc-mcp-stderr".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = stderr.read(&mut buf) {
                    ring.push(&buf[..n]);
                }
            });
    }
    let stdout = stdout.ok_or("no stdout")?;
    let stdin = Outgoing::new(stdin.ok_or("no stdin")?)
        .map_err(|e| format!("cannot set up the server's input: {e}"))?;
    std::thread::Builder::new()
        .name("gjc-mcp-read".into())
        .spawn(move || {
            crate::sched::prompt_thread();
            let why = read_messages(stdout, &deliver);
            // The drain thread may still be reading the last words; give it a moment.
            std::thread::sleep(Duration::from_millis(30));
            let tail = ring.tail();
            let why = if tail.is_empty() {
                why
            } else {
                format!("{why}; stderr: {tail}")
            };
            deliver(Incoming::Closed(why));
        })
        .map_err(|e| format!("cannot start reader thread: {e}"))?;
    Ok(Stdio {
        stdin,
        child: Mutex::new(child),
        pgid,
    })
}

/// Reads messages until the stream ends or stops being MCP; returns why it ended.
fn read_messages(stdout: impl Read, deliver: &Deliver) -> String {
    // Small buffers, kept small: a server idles for most of its life, and what a large message
    // (a tool list, a big result) grew them to would stay resident per server until gjc exits.
    let mut reader = BufReader::with_capacity(8 * 1024, stdout);
    let mut line = Vec::new();
    let mut garbage = 0;
    loop {
        line.clear();
        line.shrink_to(KEPT_LINE_BYTES);
        let read = (&mut reader)
            .take(MAX_MESSAGE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) => return "the server exited".into(),
            Err(e) => return format!("reading its output failed: {e}"),
            Ok(_) => {}
        }
        if line.len() > MAX_MESSAGE_BYTES {
            return format!("it sent a message over {} MB", MAX_MESSAGE_BYTES >> 20);
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Value>(text) {
            Ok(value) if value.is_object() => deliver(Incoming::Message(value)),
            _ => {
                garbage += 1;
                log::debug!("MCP server wrote a line that is not JSON-RPC ({garbage})");
                if garbage > MAX_GARBAGE_LINES {
                    return "its output is not MCP (lines that are not JSON-RPC)".into();
                }
            }
        }
    }
}

impl Transport for Stdio {
    fn send(&self, message: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.stdin.send(&line)
    }

    fn close(&self) {
        self.stdin.close();
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if wait_until(&mut child, GRACE) {
            return kill_group(self.pgid, libc::SIGKILL);
        }
        kill_group(self.pgid, libc::SIGTERM);
        if !wait_until(&mut child, GRACE) {
            kill_group(self.pgid, libc::SIGKILL);
            let _ = child.wait();
        }
        // What the server started and left behind goes with it.
        kill_group(self.pgid, libc::SIGKILL);
    }
}

/// Whether the child exited within `limit` (it is reaped then).
fn wait_until(child: &mut Child, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if start.elapsed() >= limit => return false,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn kill_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill only sends a signal; a gone group is ESRCH.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

type SpawnJob = (Command, crossbeam_channel::Sender<std::io::Result<Child>>);

/// Servers are started from one thread that lives as long as gjc: `PR_SET_PDEATHSIG` fires when
/// the thread that started the child ends, not the process, and tool threads come and go.
fn keeper_spawn(cmd: Command) -> std::io::Result<Child> {
    static KEEPER: std::sync::LazyLock<Option<crossbeam_channel::Sender<SpawnJob>>> =
        std::sync::LazyLock::new(|| {
            let (tx, rx) = crossbeam_channel::unbounded::<SpawnJob>();
            std::thread::Builder::new()
                .name("gjc-mcp-spawn".into())
                .spawn(move || {
                    for (mut cmd, reply) in rx {
                        let _ = reply.send(cmd.spawn());
                    }
                })
                .ok()?;
            Some(tx)
        });
    let keeper = KEEPER
        .as_ref()
        .ok_or_else(|| std::io::Error::other("no spawn thread"))?;
    let (tx, rx) = crossbeam_channel::bounded(1);
    keeper
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("spawn thread gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("spawn thread gone"))?
}
