//! One running command as `gjc-bash` keeps it: the shell, its process group, the merged output
//! pipe and what was read from it. The bash thread reads every command's pipe itself when
//! poll(2) says it is ready and learns of the shell's exit from a pidfd in the same poll, so a
//! command costs no thread of its own. Once the shell has exited its group is killed, so
//! background children (`sleep 1000 &`) cannot hold the pipe open; the command is complete when
//! the shell has been waited for and the pipe has reached EOF.

use std::io::{PipeReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Instant;

use super::output::OutputSink;
use super::{orphans, process, BashEvent, BashJob, BashResult, JobOwner, Reply};

pub(super) struct Job {
    /// The session that started it (`BashHandle::for_session`).
    pub session: u64,
    pub owner: JobOwner,
    pub pgid: i32,
    pub deadline: Option<Instant>,
    pub cancelled: bool,
    pub timed_out: bool,
    /// The shell until it has been waited for.
    child: Option<process::Shell>,
    status: Option<ExitStatus>,
    /// Readable when the shell has exited; `None` where pidfds are missing (then the shell is
    /// checked with a non-blocking wait at each of the thread's short fallback wake-ups).
    pidfd: Option<OwnedFd>,
    /// The merged output until EOF.
    pipe: Option<PipeReader>,
    sink: OutputSink,
    /// Forward output chunks as they arrive (the bash tool streams them).
    stream: bool,
    /// The output after which the group is killed (`BashJob::output_limit`), and whether it was.
    output_limit: Option<u64>,
    over_limit: bool,
    /// Bytes of a UTF-8 sequence split across reads, kept for the next chunk.
    pending_utf8: Vec<u8>,
    reply: Reply,
}

impl Job {
    pub fn start(
        session: u64,
        job: BashJob,
        spawned: process::Spawned,
        spill: Option<PathBuf>,
    ) -> Job {
        let process::Spawned {
            child,
            output,
            pgid,
        } = spawned;
        let pidfd = pidfd_open(child.id());
        Job {
            session,
            owner: job.owner,
            pgid,
            deadline: job.timeout.map(|t| Instant::now() + t),
            cancelled: false,
            timed_out: false,
            child: Some(child),
            status: None,
            pidfd,
            pipe: Some(output),
            sink: OutputSink::new(spill),
            stream: job.stream,
            output_limit: job.output_limit,
            over_limit: false,
            pending_utf8: Vec::new(),
            reply: job.reply,
        }
    }

    /// The pipe to watch for output, while it is open.
    pub fn pipe_fd(&self) -> Option<RawFd> {
        self.pipe.as_ref().map(|p| p.as_raw_fd())
    }

    /// The pidfd to watch for the shell's exit, while it has not been waited for.
    pub fn exit_fd(&self) -> Option<RawFd> {
        self.child.as_ref()?;
        self.pidfd.as_ref().map(|f| f.as_raw_fd())
    }

    /// Whether the exit can only be noticed by checking again later (no pidfd).
    pub fn needs_exit_check(&self) -> bool {
        self.child.is_some() && self.pidfd.is_none()
    }

    /// The pipe is ready: one read (EOF closes it). One read per wake-up keeps a command that
    /// prints without end from starving the others and the thread's requests.
    pub fn read_once(&mut self, buf: &mut [u8]) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        match pipe.read(buf) {
            Ok(0) => self.pipe = None,
            Ok(n) => self.take_output(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => self.pipe = None,
        }
    }

    fn take_output(&mut self, bytes: &[u8]) {
        self.sink.push(bytes);
        let over = self
            .output_limit
            .is_some_and(|limit| self.sink.total_bytes() > limit);
        if over && !self.over_limit {
            self.over_limit = true;
            process::kill_group(self.pgid);
        }
        if !self.stream {
            return;
        }
        self.pending_utf8.extend_from_slice(bytes);
        let text = take_valid_utf8(&mut self.pending_utf8);
        if !text.is_empty() {
            self.reply.send(BashEvent::Output {
                owner: self.owner.clone(),
                text,
            });
        }
    }

    /// Reaps the shell if it has exited; then the rest of its group is killed, so nothing it
    /// left behind holds the pipe open.
    pub fn check_exit(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let status = match child.try_wait() {
            Ok(Some(status)) => Some(status),
            Ok(None) => return,
            // Not ours to wait for any more (reaped elsewhere): it has gone all the same.
            Err(_) => None,
        };
        self.status = status;
        self.child = None;
        orphans::shell_ended(self.pgid);
        process::kill_group(self.pgid);
    }

    pub fn is_complete(&self) -> bool {
        self.child.is_none() && self.pipe.is_none()
    }

    /// What the command produced, key values scrubbed, and where it goes.
    pub fn result(self) -> (BashResult, Reply) {
        let mut captured = self.sink.finish();
        if let std::borrow::Cow::Owned(clean) = crate::secrets::installed().scrub(&captured.output)
        {
            captured.output = clean;
        }
        let exit_code = self
            .status
            .and_then(|s| s.code())
            .filter(|_| !self.cancelled && !self.timed_out && !self.over_limit);
        let result = BashResult {
            output: captured.output,
            exit_code,
            cancelled: self.cancelled,
            timed_out: self.timed_out,
            truncated: captured.truncated,
            total_bytes: captured.total_bytes,
            total_lines: captured.total_lines,
            full_output_path: captured.full_output_path,
            spawn_error: None,
        };
        (result, self.reply)
    }
}

/// A pidfd for `pid` (Linux 5.3 and later); `None` elsewhere or when the kernel refuses.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscall; the result is a new descriptor we own (close-on-exec), or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd >= 0 {
            // SAFETY: the descriptor was just created and nothing else owns it.
            return Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        log::debug!(
            "pidfd_open failed ({}); checking the shell's exit periodically",
            std::io::Error::last_os_error()
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pid;
    None
}

/// Decodes the complete UTF-8 prefix, keeping an incomplete trailing sequence for the next read.
pub(super) fn take_valid_utf8(buf: &mut Vec<u8>) -> String {
    let keep = match std::str::from_utf8(buf) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => buf.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let rest = buf.split_off(buf.len() - keep);
    let text = String::from_utf8_lossy(buf).into_owned();
    *buf = rest;
    text
}
