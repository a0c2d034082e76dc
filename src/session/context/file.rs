//! Reading a context's stored messages back from the session file: one span at a time, or
//! many through one reused window, and the stamp that says whether the file changed since its
//! messages were last checked to be JSON.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::{ContextError, Span};
use crate::protocol::message::AgentMessage;

/// What `fstat` says of a file's contents: its size and its last modification and change times.
/// Any write through any descriptor moves at least one of them. Linux 6.13 and later give a
/// change right after a `stat` a fine-grained ctime on ext4, xfs, btrfs and tmpfs (multigrain
/// timestamps); elsewhere a same-size write within one clock tick of the stamp can go unseen, and
/// the cost of that blind spot is one get_messages of damaged JSON, which the host's parser
/// rejects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    pub fn of(file: &File) -> Option<Stamp> {
        file.metadata().ok().map(|m| Stamp::from_metadata(&m))
    }

    pub fn from_metadata(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            len: m.size(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// The message stored at `span` of `file`, read on its own (`None` if it does not parse).
pub(super) fn read_span(file: &File, span: Span) -> std::io::Result<Option<AgentMessage>> {
    let mut bytes = vec![0; span.len];
    file.read_exact_at(&mut bytes, span.offset)?;
    Ok(parse(&bytes))
}

/// Reads spans through one reused buffer. Spans along a session's path mostly follow each other
/// in the file, so a long context costs a few large reads and no file-sized allocation.
pub(super) struct Window<'a> {
    file: &'a File,
    buf: Vec<u8>,
    /// The file offset of `buf[0]`.
    start: u64,
}

impl<'a> Window<'a> {
    const SIZE: usize = 1 << 20;

    pub(super) fn new(file: &'a File) -> Window<'a> {
        Window {
            file,
            buf: Vec::new(),
            start: 0,
        }
    }

    pub(super) fn get(&mut self, span: Span) -> Result<&[u8], ContextError> {
        let end = span.offset + span.len as u64;
        if span.offset < self.start || end > self.start + self.buf.len() as u64 {
            self.fill(span.offset, span.len.max(Self::SIZE))?;
        }
        let at = (span.offset - self.start) as usize;
        if at + span.len > self.buf.len() {
            return Err(ContextError::Shorter);
        }
        Ok(&self.buf[at..at + span.len])
    }

    /// Reads up to `len` bytes from `offset` (fewer at the end of the file).
    fn fill(&mut self, offset: u64, len: usize) -> Result<(), ContextError> {
        self.buf.resize(len, 0);
        let mut filled = 0;
        while filled < len {
            match self
                .file
                .read_at(&mut self.buf[filled..], offset + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ContextError::Reread(e)),
            }
        }
        self.buf.truncate(filled);
        self.start = offset;
        Ok(())
    }
}

pub(super) fn parse(bytes: &[u8]) -> Option<AgentMessage> {
    serde_json::from_slice(bytes)
        .map_err(|e| log::warn!("skipping a stored message gjc cannot read: {e}"))
        .ok()
}
