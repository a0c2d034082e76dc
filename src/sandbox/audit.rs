//! The sandbox's audit trail: one JSONL record per escalation the host was asked for, approved
//! or not, in the session's folder under the agent dir (`<session dir>/audit/sandbox/<session
//! id>.jsonl`, never in the project). Records are numbered and never deduplicated: two identical
//! escalations are two records. The file is opened without following a link and fsynced after
//! each record.

use std::fs::{File, OpenOptions};
use std::io::Write;
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

#[derive(Debug)]
pub struct Trail {
    path: PathBuf,
    file: File,
    seq: u64,
}

impl Trail {
    /// Opens (creating) the trail of `session_id`; the id must be a plain file name.
    pub fn open(session_dir: &Path, session_id: &str) -> Result<Trail, String> {
        let dir = crate::fs::dirs::real_dir(session_dir, &["audit", "sandbox"])
            .map_err(|e| format!("the sandbox audit folder: {e}"))?;
        let path = crate::ids::join_id(&dir, session_id, ".jsonl")?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let seq = count_lines(&path);
        Ok(Trail { path, file, seq })
    }

    pub fn record(&mut self, e: &Escalated<'_>) -> Result<(), String> {
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
            .map_err(|err| format!("cannot append to {}: {err}", self.path.display()))
    }
}

fn count_lines(path: &Path) -> u64 {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .unwrap_or(0)
}
