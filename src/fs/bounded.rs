//! Bounded reads of the files gjc reads for configuration or context (hooks.json, models.json,
//! AGENTS.md, SKILL.md, rule files, the workflow gate store).
//!
//! Any of them may be planted by whoever controls a project folder: a FIFO would hold `open`
//! (and the thread) until somebody writes to it, and a link to `/dev/zero` would be read until
//! memory runs out. So a file is opened with `O_NONBLOCK` (a FIFO's `open` returns at once),
//! the opened descriptor is checked with `fstat` (no race with a rename between check and use)
//! and refused unless it is a regular file, and at most `cap + 1` bytes are read: one byte more
//! than the cap says the file is too large. `O_NONBLOCK` changes nothing for regular files.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// It is something else than a regular file (after following links): `kind` says what.
    NotRegular { kind: &'static str },
    /// It is a symbolic link where links are refused ([`Links::Refuse`]).
    Link,
    /// It holds more than `cap` bytes.
    TooLarge { cap: u64 },
    /// Opening or reading failed (a missing file is [`ReadError::is_not_found`]).
    Io(io::Error),
}

impl ReadError {
    /// The file does not exist (or a folder on its way does not), which callers treat as "none".
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory))
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotRegular { kind } => write!(f, "not a regular file ({kind})"),
            ReadError::Link => write!(f, "a symbolic link, which is refused here"),
            ReadError::TooLarge { cap } => write!(f, "too large (more than {cap} bytes)"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// Whether the last component of the path may be a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Followed: a user's AGENTS.md may well be a link into a dotfiles folder; what it points at
    /// must still be a regular file.
    Follow,
    /// Refused (`O_NOFOLLOW`): files gjc writes itself under the agent dir.
    Refuse,
}

/// What a file that is not regular is, in words.
pub fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading without waiting on it and returns it only when it is a regular
/// file. `O_NOCTTY`: a terminal device is never made the controlling terminal by the check.
pub fn open_regular(path: &Path, links: Links) -> Result<File, ReadError> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        // O_NOFOLLOW on a link fails with ELOOP.
        Err(e) if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(ReadError::Link)
        }
        // A socket cannot be opened at all.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(ReadError::NotRegular { kind: "a socket" })
        }
        Err(e) => return Err(ReadError::Io(e)),
    };
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        return Err(ReadError::NotRegular {
            kind: kind_of(file_type),
        });
    }
    Ok(file)
}

/// The whole of an opened file, refused when it holds more than `cap` bytes. The file may grow
/// while it is read: the limit is on what is read, not on what `fstat` said.
pub fn read_file(file: File, cap: u64) -> Result<Vec<u8>, ReadError> {
    let hint = file.metadata().map(|m| m.len()).unwrap_or(0).min(cap);
    let mut bytes = Vec::with_capacity(hint as usize + 1);
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge { cap });
    }
    Ok(bytes)
}

/// The bytes of the regular file at `path`, at most `cap` of them.
pub fn read(path: &Path, cap: u64, links: Links) -> Result<Vec<u8>, ReadError> {
    read_file(open_regular(path, links)?, cap)
}

/// The text of the regular file at `path`, at most `cap` bytes of UTF-8.
pub fn read_to_string(path: &Path, cap: u64, links: Links) -> Result<String, ReadError> {
    let bytes = read(path, cap, links)?;
    String::from_utf8(bytes).map_err(|_| {
        ReadError::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn regular_files_are_read_up_to_the_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        std::fs::write(&p, "12345").unwrap();
        assert_eq!(read_to_string(&p, 5, Links::Follow).unwrap(), "12345");
        let err = read(&p, 4, Links::Follow).unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { cap: 4 }), "{err:?}");
        assert_eq!(err.to_string(), "too large (more than 4 bytes)");
        assert!(read(&tmp.path().join("missing"), 4, Links::Follow)
            .unwrap_err()
            .is_not_found());
        assert!(read(&p.join("below-a-file"), 4, Links::Follow)
            .unwrap_err()
            .is_not_found());
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_to_string(&p, 5, Links::Follow).is_err());
    }

    #[test]
    fn fifos_devices_and_folders_are_refused_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        mkfifo(&fifo);
        let zero = tmp.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let started = Instant::now();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO"),
            (zero.as_path(), "a character device"),
            (tmp.path(), "a directory"),
        ] {
            match read(path, 1 << 20, Links::Follow) {
                Err(ReadError::NotRegular { kind: k }) => assert_eq!(k, kind),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn links_are_followed_or_refused_as_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::write(&real, "x").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(read(&link, 8, Links::Follow).unwrap(), b"x");
        assert!(matches!(
            read(&link, 8, Links::Refuse),
            Err(ReadError::Link)
        ));
        assert_eq!(read(&real, 8, Links::Refuse).unwrap(), b"x");
    }
}
