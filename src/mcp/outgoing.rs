//! Writes to a stdio server's stdin that never hold the sender up. The pipe is non-blocking: a
//! message goes out at once when the pipe has room, which it nearly always has (a server reads
//! its input as it comes), and what does not fit waits in a backlog that a `gjc-mcp-write`
//! thread, started only then, writes as the server reads. So a call can be sent from the
//! session's own thread: a server that stops reading its input fills the backlog, not the
//! session's time. The backlog is capped; past the cap a send fails and says why.

use std::io::{ErrorKind, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::process::ChildStdin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Bytes a server may leave unread before sends to it fail.
pub const MAX_BACKLOG: usize = 16 << 20;
/// How long the writer thread waits for room before it looks again (the pipe may be closed).
const POLL: Duration = Duration::from_millis(200);

pub struct Outgoing {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// The pipe's descriptor, for the writer thread's wait (outside the lock).
    fd: RawFd,
}

struct State {
    /// `None` once closed.
    pipe: Option<ChildStdin>,
    /// Bytes accepted but not yet written, in order.
    backlog: Vec<u8>,
    /// A writer thread is draining the backlog.
    draining: bool,
}

impl Outgoing {
    /// Takes the pipe over and makes it non-blocking.
    pub fn new(pipe: ChildStdin) -> std::io::Result<Outgoing> {
        let fd = pipe.as_raw_fd();
        // SAFETY: fcntl on a descriptor this value owns; only the status flags change.
        let set = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        if !set {
            return Err(std::io::Error::last_os_error());
        }
        let state = State {
            pipe: Some(pipe),
            backlog: Vec::new(),
            draining: false,
        };
        Ok(Outgoing {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                fd,
            }),
        })
    }

    /// Sends `bytes` (whole messages), or fails at once: the pipe is closed or broken, or the
    /// server has left too much unread. Never waits for the server.
    pub fn send(&self, bytes: &[u8]) -> Result<(), String> {
        let mut state = self.shared.lock();
        let State {
            pipe,
            backlog,
            draining,
        } = &mut *state;
        let pipe = pipe.as_mut().ok_or("the server is closed")?;
        if backlog.len() + bytes.len() > MAX_BACKLOG {
            return Err(format!(
                "the server does not read its input ({} MB waiting)",
                (backlog.len() + bytes.len()) >> 20
            ));
        }
        // What waits goes first: messages keep their order.
        let written = if backlog.is_empty() {
            write_now(pipe, bytes).map_err(|e| format!("cannot write to the server: {e}"))?
        } else {
            0
        };
        if written == bytes.len() {
            return Ok(());
        }
        backlog.extend_from_slice(&bytes[written..]);
        if !*draining {
            *draining = true;
            let shared = self.shared.clone();
            let started = std::thread::Builder::new()
                .name("gjc-mcp-write".into())
                .spawn(move || shared.drain());
            if let Err(e) = started {
                *draining = false;
                state.pipe = None;
                return Err(format!("cannot start a writer thread: {e}"));
            }
        }
        Ok(())
    }

    /// Closes the pipe (the server sees the end of its input); what waits is dropped.
    pub fn close(&self) {
        let mut state = self.shared.lock();
        state.pipe = None;
        state.backlog = Vec::new();
    }

    /// Bytes accepted and not yet written.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.shared.lock().backlog.len()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer thread: writes the backlog as the server makes room, until it is empty or
    /// the pipe is closed or broken (the reader then reports the server's end).
    fn drain(&self) {
        loop {
            {
                let mut state = self.lock();
                let State {
                    pipe,
                    backlog,
                    draining,
                } = &mut *state;
                let written = match pipe.as_mut() {
                    Some(pipe) if !backlog.is_empty() => write_now(pipe, backlog),
                    _ => Ok(backlog.len()),
                };
                match written {
                    Ok(n) => drop(backlog.drain(..n)),
                    Err(e) => {
                        log::debug!("MCP server input: {e}");
                        backlog.clear();
                    }
                }
                if backlog.is_empty() {
                    *backlog = Vec::new();
                    *draining = false;
                    return;
                }
            }
            wait_writable(self.fd, POLL);
        }
    }
}

/// Writes what the pipe takes now; the count written.
fn write_now(pipe: &mut ChildStdin, bytes: &[u8]) -> std::io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match pipe.write(&bytes[written..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Waits until `fd` takes bytes again, or `limit` passes.
fn wait_writable(fd: RawFd, limit: Duration) {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd on the stack; a closed or reused descriptor only ends the wait early.
    unsafe {
        libc::poll(&mut poll, 1, limit.as_millis() as libc::c_int);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// A child that reads nothing until told to (a line on its stdin's far end is not it: it
    /// sleeps, then copies its input to its output).
    fn sleeper(secs: &str) -> std::process::Child {
        Command::new("sh")
            .args(["-c", &format!("sleep {secs}; cat")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_server_that_does_not_read_never_holds_the_sender_up() {
        let mut child = sleeper("1");
        let out = Outgoing::new(child.stdin.take().unwrap()).unwrap();
        let line = vec![b'x'; 100 * 1024];
        let started = Instant::now();
        // More than a pipe holds: the rest waits in the backlog, and sending returns at once.
        for _ in 0..4 {
            out.send(&line).unwrap();
        }
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(out.waiting() > 0, "the pipe cannot have taken 400 KiB");
        // Once the server reads, everything arrives, in order and whole.
        let mut got = Vec::new();
        let mut stdout = child.stdout.take().unwrap();
        let reading = std::thread::spawn(move || {
            let mut buf = vec![0; 64 * 1024];
            while got.len() < 4 * line.len() {
                let n = stdout.read(&mut buf).unwrap();
                assert!(n > 0, "the output ended early");
                got.extend_from_slice(&buf[..n]);
            }
            got
        });
        let got = reading.join().unwrap();
        assert_eq!(got.len(), 400 * 1024);
        assert!(got.iter().all(|b| *b == b'x'));
        let until = Instant::now() + Duration::from_secs(10);
        while out.waiting() > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(out.waiting(), 0);
        out.close();
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn past_the_cap_a_send_fails_and_says_why_and_after_close_every_send_does() {
        let mut child = sleeper("30");
        let out = Outgoing::new(child.stdin.take().unwrap()).unwrap();
        let chunk = vec![b'y'; MAX_BACKLOG / 4];
        let mut refused = None;
        for _ in 0..8 {
            if let Err(e) = out.send(&chunk) {
                refused = Some(e);
                break;
            }
        }
        let refused = refused.expect("the cap was never reached");
        assert!(refused.contains("does not read its input"), "{refused}");
        out.close();
        assert_eq!(out.send(b"{}\n"), Err("the server is closed".to_string()));
        let _ = child.kill();
        let _ = child.wait();
    }
}
