//! How bytes reach the disk: private folders and files, appends of whole lines, and whole-file
//! replacement (written aside, synced, renamed into place, the folder synced).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use serde_json::Value;

use super::error::{Step, StoreError};

/// Creates `dir` and its missing parents, private to the user.
pub(crate) fn create_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(StoreError::io(Step::CreateFolder, dir))
}

/// Creates a new session file, private to the user, for appending. An existing file is an error:
/// appending a second header to it would make it unreadable.
pub(super) fn create_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Appends whole lines with one `write_all`: a crash or a full disk can cut only what this call
/// was writing, which the caller cuts back off.
pub(super) fn append_all(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    #[cfg(test)]
    if let Some(room) = test_disk::take(bytes.len()) {
        file.write_all(&bytes[..room])?;
        if room < bytes.len() {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        return Ok(());
    }
    file.write_all(bytes)
}

/// Replaces `path` with what `fill` writes: a private file, synced with its folder
/// (`crate::fs::atomic`). A failure leaves `path` as it was and no temporary file.
pub(crate) fn replace_file(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    crate::fs::atomic::replace(path, crate::fs::atomic::Options::PRIVATE, fill)
}

/// Rewrites the header line of `path`, keeping the entries up to `body_end` (where the last
/// complete write ended) byte for byte. Returns the new file's length.
pub(super) fn rewrite_header(path: &Path, header: &Value, body_end: u64) -> io::Result<u64> {
    let mut reader = BufReader::new(File::open(path)?);
    let body_start = reader.read_until(b'\n', &mut Vec::new())? as u64;
    let body_len = body_end.saturating_sub(body_start);
    let mut line = serde_json::to_vec(header)?;
    line.push(b'\n');
    replace_file(path, |out| {
        out.write_all(&line)?;
        let copied = io::copy(&mut reader.take(body_len), out)?;
        if copied != body_len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the session file is shorter than gjc wrote it",
            ));
        }
        Ok(())
    })?;
    Ok(line.len() as u64 + body_len)
}

/// A full disk for unit tests, per thread: `fill(n)` lets the next appends write `n` more bytes
/// in all (then they fail with ENOSPC after a partial write), `free()` ends it.
#[cfg(test)]
pub(super) mod test_disk {
    use std::cell::Cell;

    thread_local! {
        static ROOM: Cell<Option<usize>> = const { Cell::new(None) };
    }

    pub fn fill(room: usize) {
        ROOM.set(Some(room));
    }

    pub fn free() {
        ROOM.set(None);
    }

    /// How much of a write of `len` bytes fits, when the disk is being simulated.
    pub(in super::super) fn take(len: usize) -> Option<usize> {
        let room = ROOM.get()?;
        let n = room.min(len);
        ROOM.set(Some(room - n));
        Some(n)
    }
}
