//! Why reading or writing a session file failed. The text is what hosts and logs show; the
//! variants keep the path, the step and the `io::Error` so a caller can tell a missing file
//! from a corrupt one or a full disk.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The file operation that failed, worded as the message shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    OpenSession,
    Open,
    Read,
    Repair,
    CreateFolder,
    CreateFile,
    Write,
    WriteBranch,
    Rewrite,
    Cut,
    Sync,
    SyncFolder,
    Resolve,
}

impl Step {
    fn words(self) -> &'static str {
        match self {
            Step::OpenSession => "cannot open session",
            Step::Open => "cannot open",
            Step::Read => "cannot read",
            Step::Repair => "cannot repair",
            Step::CreateFolder => "cannot create session folder",
            Step::CreateFile => "cannot create session file",
            Step::Write => "cannot write session file",
            Step::WriteBranch => "cannot write",
            Step::Rewrite => "cannot rewrite",
            Step::Cut => "cannot cut a failed write off the session file",
            Step::Sync => "cannot sync the session file",
            Step::SyncFolder => "cannot sync the session folder",
            Step::Resolve => "cannot resolve",
        }
    }
}

#[derive(Debug)]
pub enum StoreError {
    /// A file operation failed; `path` is `None` where the message has always named none (the
    /// open session file).
    Io {
        step: Step,
        path: Option<PathBuf>,
        source: io::Error,
    },
    /// Reading the entries failed in the scan (its message; it may come from another thread).
    Scan { path: PathBuf, detail: String },
    /// The file has no line at all.
    Empty(PathBuf),
    /// The first line is not a session header (`detail` says how).
    NotSession { path: PathBuf, detail: String },
    /// The header's id is not one gjc accepts: it names the session's other files.
    BadId { path: PathBuf, id: String },
    /// A line that is not the last one does not parse (`line` counts from 1, the header).
    Corrupt {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    /// `branch`: no user message has this entry id.
    UnknownEntry(String),
    /// An entry could not be encoded as JSON.
    Encode(serde_json::Error),
    /// `--no-session`: there is no file.
    InMemory,
    /// The file was never created or opened.
    NotOpen,
    /// Entries were given up after failed writes: the file lacks them (the store's last error).
    NotSaving(String),
    /// Something else now sits at the path the session writes.
    Replaced(PathBuf),
}

impl StoreError {
    pub(super) fn io(step: Step, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StoreError {
        let path = Some(path.into());
        move |source| StoreError::Io { step, path, source }
    }

    /// For the open session file, whose messages name no path.
    pub(super) fn io_unnamed(step: Step) -> impl FnOnce(io::Error) -> StoreError {
        move |source| StoreError::Io {
            step,
            path: None,
            source,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io {
                step,
                path: Some(p),
                source,
            } => write!(f, "{} {}: {source}", step.words(), p.display()),
            StoreError::Io {
                step,
                path: None,
                source,
            } => write!(f, "{}: {source}", step.words()),
            StoreError::Scan { path, detail } => {
                write!(f, "cannot read {}: {detail}", path.display())
            }
            StoreError::Empty(p) => write!(f, "{} is empty, not a session file", p.display()),
            StoreError::NotSession { path, detail } => {
                write!(f, "{} is not a session file: {detail}", path.display())
            }
            StoreError::BadId { path, id } => write!(
                f,
                "{} is not a session file gjc opens: {}",
                path.display(),
                crate::ids::invalid_id("header id", id)
            ),
            StoreError::Corrupt { path, line, detail } => {
                write!(f, "{} is corrupt at line {line}: {detail}", path.display())
            }
            StoreError::UnknownEntry(_) => f.write_str("Invalid entry ID for branching"),
            StoreError::Encode(e) => write!(f, "{e}"),
            StoreError::InMemory => {
                f.write_str("the session is kept in memory only (--no-session)")
            }
            StoreError::NotOpen => f.write_str("the session file is not open"),
            StoreError::NotSaving(e) => write!(f, "the session is not being saved: {e}"),
            StoreError::Replaced(p) => write!(
                f,
                "{} is no longer the file this session writes",
                p.display()
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            StoreError::Encode(e) => Some(e),
            _ => None,
        }
    }
}
