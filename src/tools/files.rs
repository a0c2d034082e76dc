//! File access shared by the file tools: opening only regular files (a FIFO or a device could block
//! or never end), reading lines with a cap on what is kept and a cancellation check per chunk,
//! and replacing a file atomically through symlinks.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::fs::atomic;

/// Why a file could not be opened for reading.
pub enum OpenError {
    Io(io::Error),
    Directory,
    /// Not a regular file: what it is instead ("a FIFO", "a character device", ...).
    Special(&'static str),
}

impl OpenError {
    /// The message the model sees, for `raw` as it wrote the path.
    pub fn describe(&self, raw: &str) -> String {
        match self {
            OpenError::Io(e) => format!("Cannot read {raw}: {}", super::read::io_reason(e)),
            OpenError::Directory => format!("{raw} is a directory"),
            OpenError::Special(kind) => special_message(raw, kind),
        }
    }
}

pub fn special_message(raw: &str, kind: &str) -> String {
    format!("{raw} is not a regular file ({kind}); only regular files can be read or changed by this tool. Use bash for pipes and devices.")
}

/// What a non-regular, non-directory file is.
pub fn special_kind(t: std::fs::FileType) -> &'static str {
    crate::fs::bounded::kind_of(t)
}

/// Opens a regular file for reading. The open does not block (a FIFO without a writer would
/// wait forever), and the type is checked on the opened descriptor, so a file swapped in after a
/// `stat` cannot slip through.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), OpenError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(OpenError::Io)?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    let t = meta.file_type();
    if t.is_dir() {
        return Err(OpenError::Directory);
    }
    if !t.is_file() {
        return Err(OpenError::Special(special_kind(t)));
    }
    Ok((file, meta))
}

/// Why a line read stopped early.
pub enum Stop {
    Io(io::Error),
    Cancelled,
    /// `until` was reached inside a line.
    Limit,
}

/// Reads lines while keeping at most a given number of bytes of each: a file with no newline
/// costs one buffer, not its size. Cancellation is checked once per buffer (64 KiB).
pub struct Lines<'a> {
    reader: BufReader<File>,
    cancelled: &'a dyn Fn() -> bool,
    /// Bytes consumed so far.
    pub offset: u64,
    /// No line is read past this offset (`Stop::Limit`): bounds a scan that only counts.
    pub until: u64,
}

impl<'a> Lines<'a> {
    pub fn new(file: File, cancelled: &'a dyn Fn() -> bool) -> Lines<'a> {
        Lines {
            reader: BufReader::with_capacity(64 * 1024, file),
            cancelled,
            offset: 0,
            until: u64::MAX,
        }
    }

    /// The buffered reader, positioned after what was consumed.
    pub fn into_inner(self) -> BufReader<File> {
        self.reader
    }

    /// The first bytes of the file (up to one buffer), without consuming them.
    pub fn peek(&mut self) -> io::Result<&[u8]> {
        self.reader.fill_buf()
    }

    /// Reads the next line into `keep` (cleared first; without its `\n`), keeping at most `cap`
    /// bytes of it. Returns the line's whole length without the `\n`, or `None` at the end.
    pub fn next(&mut self, keep: &mut Vec<u8>, cap: usize) -> Result<Option<u64>, Stop> {
        keep.clear();
        let (mut len, mut any) = (0u64, false);
        loop {
            if (self.cancelled)() {
                return Err(Stop::Cancelled);
            }
            if self.offset >= self.until {
                return Err(Stop::Limit);
            }
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Stop::Io(e)),
            };
            if buf.is_empty() {
                return Ok(any.then_some(len));
            }
            any = true;
            let (part, used, done) = match memchr::memchr(b'\n', buf) {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            let room = cap.saturating_sub(keep.len());
            keep.extend_from_slice(&part[..part.len().min(room)]);
            len += part.len() as u64;
            self.reader.consume(used);
            self.offset += used as u64;
            if done {
                return Ok(Some(len));
            }
        }
    }
}

/// The longest prefix of `bytes` that does not end inside a UTF-8 sequence (for a cut line).
pub fn whole_chars(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// The file a write to `path` lands in: symlinks are followed to their final target (which may
/// not exist yet), so replacing it leaves the links in place.
pub fn write_target(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    // The kernel's own limit on links followed in one lookup.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "too many levels of symbolic links at {}",
        path.display()
    )))
}

/// Replaces `target` with `bytes` so that a crash leaves the old file or the new one, never a
/// mix (`crate::fs::atomic`): the new file keeps the old one's mode (and, when allowed, its
/// owner); a new file gets the mode `open` would have given it (0666 less the umask).
pub fn replace_file(target: &Path, bytes: &[u8], old: Option<&Metadata>) -> io::Result<()> {
    // The folder's sync is best effort: once renamed, nothing already written is lost.
    let options = atomic::Options::like(old, atomic::Durability::SyncedFolderBestEffort);
    atomic::replace(target, options, atomic::bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn lines_keep_at_most_the_cap_and_report_whole_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let long = "x".repeat(200_000);
        std::fs::write(&p, format!("ab\n{long}\r\nlast")).unwrap();
        let never = || false;
        let mut lines = Lines::new(File::open(&p).unwrap(), &never);
        let mut keep = Vec::new();
        assert!(matches!(lines.next(&mut keep, 10), Ok(Some(2))));
        assert_eq!(keep, b"ab");
        assert!(matches!(lines.next(&mut keep, 10), Ok(Some(200_001))));
        assert_eq!(keep, b"xxxxxxxxxx");
        assert!(matches!(lines.next(&mut keep, 0), Ok(Some(4))));
        assert!(keep.is_empty());
        assert!(matches!(lines.next(&mut keep, 10), Ok(None)));
    }

    #[test]
    fn a_cancelled_read_stops() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "a\n").unwrap();
        let always = || true;
        let mut lines = Lines::new(File::open(&p).unwrap(), &always);
        assert!(matches!(
            lines.next(&mut Vec::new(), 10),
            Err(Stop::Cancelled)
        ));
    }

    #[test]
    fn cut_lines_end_on_a_character() {
        assert_eq!(whole_chars("aé".as_bytes()), "aé".as_bytes());
        assert_eq!(whole_chars(&"aé".as_bytes()[..2]), b"a");
        assert_eq!(whole_chars(&"日".as_bytes()[..2]), b"");
    }

    #[test]
    fn replace_follows_links_keeps_the_mode_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("t")).unwrap();
        let real = dir.path().join("t/real");
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o751)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("t/real", &link).unwrap();
        let target = write_target(&link).unwrap();
        assert_eq!(target, real);
        let old = std::fs::metadata(&target).unwrap();
        replace_file(&target, b"new", Some(&old)).unwrap();
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::metadata(&real).unwrap().mode() & 0o7777, 0o751);
        assert_eq!(std::fs::read_dir(dir.path().join("t")).unwrap().count(), 1);
    }

    #[test]
    fn a_name_at_the_length_limit_is_still_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("é".repeat(127));
        std::fs::write(&target, "old").unwrap();
        replace_file(&target, b"new", None).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn link_loops_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        assert!(write_target(&a).is_err());
    }

    #[test]
    fn special_files_are_refused_before_they_are_read() {
        assert!(matches!(
            open_regular(Path::new("/dev/zero")),
            Err(OpenError::Special("a character device"))
        ));
        assert!(matches!(
            open_regular(Path::new("/")),
            Err(OpenError::Directory)
        ));
    }
}
