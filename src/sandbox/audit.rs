//! The sandbox's audit trail: one JSONL record per escalation the host was asked for, approved
//! or not, in the session's folder under the agent dir (`<session dir>/audit/sandbox/<session
//! id>.jsonl`, never in the project). Records are numbered and never deduplicated: two identical
//! escalations are two records. The file is opened without following a link and fsynced after
//! each record.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

/// One escalation, as the session saw it in the call's result.
pub struct Escalated<'a> {
    pub session_id: &'a str,
    pub tool_call_id: &'a str,
    pub command: &'a str,
    pub to: &'a str,
    pub approved: bool,
}

/// Why the sandbox trail could not be opened or written.
#[derive(Debug)]
pub enum TrailError {
    /// `audit/sandbox` could not be made under the session folder (or one of them is a link).
    Folder(io::Error),
    /// The session id cannot name the trail.
    Name(crate::ids::IdError),
    Open {
        path: PathBuf,
        source: io::Error,
    },
    /// Counting the records already there failed: numbering would start over.
    Read {
        path: PathBuf,
        source: io::Error,
    },
    Append {
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for TrailError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrailError::Folder(e) => write!(f, "the sandbox audit folder: {e}"),
            TrailError::Name(e) => write!(f, "{e}"),
            TrailError::Open { path, source } => {
                write!(f, "cannot open {}: {source}", path.display())
            }
            TrailError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            TrailError::Append { path, source } => {
                write!(f, "cannot append to {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for TrailError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TrailError::Folder(e) => Some(e),
            TrailError::Name(e) => Some(e),
            TrailError::Open { source, .. }
            | TrailError::Read { source, .. }
            | TrailError::Append { source, .. } => Some(source),
        }
    }
}

#[derive(Debug)]
pub struct Trail {
    path: PathBuf,
    file: File,
    seq: u64,
}

impl Trail {
    /// Opens (creating) the trail of `session_id`; the id must be a plain file name.
    pub fn open(session_dir: &Path, session_id: &str) -> Result<Trail, TrailError> {
        let dir = crate::fs::dirs::real_dir(session_dir, &["audit", "sandbox"])
            .map_err(TrailError::Folder)?;
        let path = crate::ids::join_id(&dir, session_id, ".jsonl").map_err(TrailError::Name)?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|source| TrailError::Open {
                path: path.clone(),
                source,
            })?;
        let seq = count_lines(&file).map_err(|source| TrailError::Read {
            path: path.clone(),
            source,
        })?;
        Ok(Trail { path, file, seq })
    }

    pub fn record(&mut self, e: &Escalated<'_>) -> Result<(), TrailError> {
        self.seq += 1;
        let now = crate::ids::now_ms();
        let record = json!({
            "schema_version": 1,
            "category": "sandbox_escalation",
            "seq": self.seq,
            "timestamp": crate::ids::iso_from_ms(now),
            "session_id": e.session_id,
            "tool_call_id": e.tool_call_id,
            "command": crate::secrets::installed().scrub(e.command),
            "to": e.to,
            "outcome": if e.approved { "approved" } else { "denied" },
        });
        let mut line = record.to_string().into_bytes();
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|_| self.file.sync_data())
            .map_err(|source| TrailError::Append {
                path: self.path.clone(),
                source,
            })
    }
}

/// The records already in the trail, counted on the file just opened (not the path again, which
/// could name another file by now) and without holding the whole file in memory. A read error
/// fails the open: numbering from 0 again would give two records one number.
fn count_lines(file: &File) -> io::Result<u64> {
    let mut reader = BufReader::new(file);
    let mut lines = 0;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(lines);
        }
        lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        let n = buf.len();
        reader.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escalated() -> Escalated<'static> {
        Escalated {
            session_id: "s1",
            tool_call_id: "c1",
            command: "ls",
            to: "host",
            approved: true,
        }
    }

    /// Numbering goes on from the records already in the trail.
    #[test]
    fn records_are_numbered_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let mut trail = Trail::open(dir.path(), "s1").unwrap();
        trail.record(&escalated()).unwrap();
        trail.record(&escalated()).unwrap();
        let mut again = Trail::open(dir.path(), "s1").unwrap();
        assert_eq!(again.seq, 2);
        again.record(&escalated()).unwrap();
        let text = std::fs::read_to_string(&again.path).unwrap();
        assert!(text.lines().nth(2).unwrap().contains("\"seq\":3"), "{text}");
    }

    /// A bad id, a planted link and an unreadable trail are each told apart.
    #[test]
    fn failures_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let e = Trail::open(dir.path(), "../x").unwrap_err();
        assert!(matches!(e, TrailError::Name(_)), "{e:?}");
        let trails = dir.path().join("audit/sandbox");
        std::os::unix::fs::symlink("/etc/hostname", trails.join("s2.jsonl")).unwrap();
        let e = Trail::open(dir.path(), "s2").unwrap_err();
        assert!(
            matches!(&e, TrailError::Open { source, .. } if source.raw_os_error() == Some(libc::ELOOP)),
            "{e:?}"
        );
        // A folder in the trail's place opens (read-only is allowed for one) but cannot be read.
        std::fs::create_dir(trails.join("s3.jsonl")).unwrap();
        let e = Trail::open(dir.path(), "s3").unwrap_err();
        assert!(e.to_string().contains("s3.jsonl"), "{e}");
    }
}
