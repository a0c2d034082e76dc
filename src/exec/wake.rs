//! How a request reaches `gjc-bash` while it sleeps in poll(2): every sender of a request writes
//! a byte to a pipe the thread polls beside its commands' pipes. Both ends are non-blocking: a
//! full pipe already holds a wake-up, and the thread drains it without waiting.

use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsRawFd, RawFd};

pub(super) struct Waker(PipeWriter);

pub(super) struct Woken(PipeReader);

pub(super) fn pair() -> std::io::Result<(Waker, Woken)> {
    let (reader, writer) = std::io::pipe()?;
    set_nonblocking(reader.as_raw_fd())?;
    set_nonblocking(writer.as_raw_fd())?;
    Ok((Waker(writer), Woken(reader)))
}

fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns; only the status flags change.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl Waker {
    pub fn wake(&self) {
        // A full pipe (WouldBlock) means a wake-up is already pending.
        let _ = (&self.0).write(&[1]);
    }
}

impl Woken {
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Empties the pipe; the requests it announced are in the channel by now.
    pub fn drain(&mut self) {
        let mut buf = [0u8; 64];
        while matches!(self.0.read(&mut buf), Ok(n) if n > 0) {}
    }
}
