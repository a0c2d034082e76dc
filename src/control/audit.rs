//! The unattended audit trail: append-only JSONL in the session's folder under the agent dir
//! (`<session dir>/audit/unattended/<run id>.jsonl`, never in the user's project), one record per
//! line, each append followed by fsync. Every event is one record, with the next number of the
//! trail's sequence (`seq`, 1-based): nothing is deduplicated by content, since two identical
//! denials are two attempts. The sequence goes on across restarts (the trail is read back when
//! it is opened), so `seq`, `event_id` and `dedupe_key` each name one event for good. Answers are
//! never stored, only their canonical hash; shell command text is scrubbed of known keys.
//!
//! The run id names the file, so it must match [`crate::ids::is_valid_id`]; the `audit` and
//! `unattended` folders must be real folders and the trail a regular file, not a link: records
//! are never appended anywhere a planted link points (the open fails and negotiation says why).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::canonical;

/// One event to record; the trail adds the sequence number, ids, times and the outcome.
#[derive(Debug, Default, Clone)]
pub struct AuditEvent<'a> {
    pub event: &'static str,
    pub gate_id: Option<&'a str>,
    pub stage: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub scope: Option<&'a str>,
    pub action: Option<&'a str>,
    pub budget: Option<Value>,
    /// Hashed, never written.
    pub answer: Option<&'a Value>,
    pub error: Option<Value>,
}

/// Why a trail could not be opened, read or appended to.
#[derive(Debug)]
pub enum AuditError {
    /// The run id cannot name a trail.
    BadRunId(String),
    /// The file name made of the run id would not stay in the trails' folder.
    Name(crate::ids::IdError),
    /// The `audit/unattended` folders could not be made (or one is a link).
    Folder {
        session_dir: PathBuf,
        source: io::Error,
    },
    /// The trail is a symbolic link, which is never followed.
    Link(PathBuf),
    /// The trail is not a regular file (a FIFO, a folder).
    NotRegular(PathBuf),
    Open {
        path: PathBuf,
        source: io::Error,
    },
    Read {
        path: PathBuf,
        source: io::Error,
    },
    /// A line (counted from 1) is not a JSON object.
    NotRecord {
        path: PathBuf,
        line: usize,
    },
    /// A record (counted from 1) lacks what every record has.
    BadRecord {
        path: PathBuf,
        record: usize,
        what: &'static str,
    },
    /// Every sequence number has been given.
    Exhausted,
    Encode(serde_json::Error),
    Append {
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditError::BadRunId(id) => write!(
                f,
                "no audit trail for this run: {}",
                crate::ids::invalid_id("run id", id)
            ),
            AuditError::Name(e) => write!(f, "{e}"),
            AuditError::Folder {
                session_dir,
                source,
            } => write!(
                f,
                "cannot create the audit folder under {}: {source}",
                session_dir.display()
            ),
            AuditError::Link(p) => write!(
                f,
                "cannot open {}: a symbolic link, which is refused",
                p.display()
            ),
            AuditError::NotRegular(p) => {
                write!(f, "cannot open {}: not a regular file", p.display())
            }
            AuditError::Open { path, source } => {
                write!(f, "cannot open {}: {source}", path.display())
            }
            AuditError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            AuditError::NotRecord { path, line } => write!(
                f,
                "audit trail {} is corrupt at line {line}: not a record",
                path.display()
            ),
            AuditError::BadRecord { path, record, what } => write!(
                f,
                "audit trail {} is corrupt at record {record}: {what}",
                path.display()
            ),
            AuditError::Exhausted => f.write_str("the audit sequence is exhausted"),
            AuditError::Encode(e) => write!(f, "{e}"),
            AuditError::Append { path, source } => {
                write!(f, "cannot append to {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for AuditError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AuditError::Name(e) => Some(e),
            AuditError::Folder { source, .. }
            | AuditError::Open { source, .. }
            | AuditError::Read { source, .. }
            | AuditError::Append { source, .. } => Some(source),
            AuditError::Encode(e) => Some(e),
            _ => None,
        }
    }
}

pub struct Audit {
    path: PathBuf,
    file: File,
    run_id: String,
    /// The last sequence number given to an event (0: none yet).
    seq: u64,
}

/// `ae_<base36 ms>_<base36 seq>`.
fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The folders of the trails under a session folder.
const FOLDERS: [&str; 2] = ["audit", "unattended"];

/// Everything but `[A-Za-z0-9_.-]` becomes `_` (a valid id's `:`, as trails were named so).
fn file_name(run_id: &str) -> String {
    run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `substring of the event name → outcome`, first match wins.
pub fn outcome(event: &str) -> &'static str {
    if event.contains("denied") {
        "denied"
    } else if event.contains("exceeded") {
        "exceeded"
    } else if event.contains("abort") {
        "aborted"
    } else if event.contains("rejected") || event.contains("conflict") {
        "rejected"
    } else if ["accepted", "negotiated", "emitted"]
        .iter()
        .any(|w| event.contains(w))
    {
        "accepted"
    } else {
        "info"
    }
}

impl Audit {
    /// `<session dir>/audit/unattended/<run id>.jsonl`, or why `run_id` cannot name it.
    pub fn path_for(session_dir: &Path, run_id: &str) -> Result<PathBuf, AuditError> {
        if !crate::ids::is_valid_id(run_id) {
            return Err(AuditError::BadRunId(run_id.to_string()));
        }
        let dir = FOLDERS
            .iter()
            .fold(session_dir.to_path_buf(), |d, f| d.join(f));
        crate::ids::join_id(&dir, &file_name(run_id), ".jsonl").map_err(AuditError::Name)
    }

    /// Opens (creating if needed) the trail of `run_id`, reading it back to continue its
    /// sequence. A line that is not a record fails the open: a trail that cannot be read whole
    /// cannot say which number comes next.
    pub fn open(session_dir: &Path, run_id: &str) -> Result<Audit, AuditError> {
        let path = Audit::path_for(session_dir, run_id)?;
        let dir = crate::fs::dirs::real_dir(session_dir, &FOLDERS).map_err(|source| {
            AuditError::Folder {
                session_dir: session_dir.to_path_buf(),
                source,
            }
        })?;
        let file = open_trail(&path, true)?;
        let seq = last_seq(&file, &path)?;
        // The new file's name must survive a crash too.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(Audit {
            path,
            file,
            run_id: run_id.to_string(),
            seq,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the event as the next record of the sequence and returns its number. The number
    /// is spent even when the write fails, so none is ever given to two events.
    pub fn record(
        &mut self,
        ev: AuditEvent<'_>,
        session_id: &str,
        actor: Option<&str>,
    ) -> Result<u64, AuditError> {
        let mut payload = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                payload.insert(k.to_string(), v);
            }
        };
        put("schema_version", Some(json!(1)));
        put("category", Some(json!("unattended_lifecycle")));
        put("run_id", Some(json!(self.run_id)));
        put("session_id", Some(json!(session_id)));
        put("actor", actor.map(Value::from));
        put("event", Some(json!(ev.event)));
        put("outcome", Some(json!(outcome(ev.event))));
        put("gate_id", ev.gate_id.map(Value::from));
        put("stage", ev.stage.map(Value::from));
        put("kind", ev.kind.map(Value::from));
        put("scope", ev.scope.map(Value::from));
        put("action", ev.action.map(Value::from));
        put("budget", ev.budget);
        put(
            "answer_hash",
            ev.answer.map(|a| Value::from(canonical::hash(a))),
        );
        put("error", ev.error);
        let seq = self.seq.checked_add(1).ok_or(AuditError::Exhausted)?;
        self.seq = seq;
        let now = crate::ids::now_ms();
        let mut record = payload;
        record.insert("seq".into(), json!(seq));
        record.insert(
            "event_id".into(),
            json!(format!("ae_{}_{}", base36(now), base36(seq))),
        );
        record.insert("timestamp".into(), json!(crate::ids::iso_from_ms(now)));
        // Unique per event: a reader that meets the record twice (a retried copy of the trail)
        // can drop the copy, and two events that look the same stay two.
        let key = format!("{}:{}:{seq}", ev.event, ev.gate_id.unwrap_or("run"));
        record.insert("dedupe_key".into(), json!(key));
        let mut line = serde_json::to_vec(&record).map_err(AuditError::Encode)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|_| self.file.sync_data())
            .map_err(|source| AuditError::Append {
                path: self.path.clone(),
                source,
            })?;
        Ok(seq)
    }
}

/// The last sequence number of a trail: its records' highest `seq`, and at least their count
/// (records written before `seq` existed each took a number). A record without an `event`, or
/// whose `seq` is not a positive integer, fails the read.
fn last_seq(file: &File, path: &Path) -> Result<u64, AuditError> {
    let records = parse_records(BufReader::new(file), path)?;
    let mut last = records.len() as u64;
    for (n, r) in records.iter().enumerate() {
        let corrupt = |what| AuditError::BadRecord {
            path: path.to_path_buf(),
            record: n + 1,
            what,
        };
        if !r.get("event").is_some_and(Value::is_string) {
            return Err(corrupt("no event"));
        }
        match r.get("seq") {
            None => {}
            Some(v) => match v.as_u64().filter(|s| *s > 0) {
                Some(seq) => last = last.max(seq),
                None => return Err(corrupt("seq is not a positive integer")),
            },
        }
    }
    Ok(last)
}

/// Every record of a trail. A line that is not a JSON object fails the whole read: a trail
/// that cannot be read whole is not trusted in part.
pub fn records(path: &Path) -> Result<Vec<Value>, AuditError> {
    let file = open_trail(path, false)?;
    parse_records(BufReader::new(file), path)
}

/// Opens a trail (for appending, created if missing, when `append`): never through a link
/// (`O_NOFOLLOW`), never waiting on a FIFO (`O_NONBLOCK`), and only a regular file.
fn open_trail(path: &Path, append: bool) -> Result<File, AuditError> {
    let file = OpenOptions::new()
        .read(true)
        .append(append)
        .create(append)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => AuditError::Link(path.to_path_buf()),
            _ => AuditError::Open {
                path: path.to_path_buf(),
                source,
            },
        })?;
    let metadata = file.metadata().map_err(|source| AuditError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if !metadata.is_file() {
        return Err(AuditError::NotRegular(path.to_path_buf()));
    }
    Ok(file)
}

fn parse_records(reader: impl BufRead, path: &Path) -> Result<Vec<Value>, AuditError> {
    let mut out = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| AuditError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&line) {
            Ok(v @ Value::Object(_)) => out.push(v),
            _ => {
                return Err(AuditError::NotRecord {
                    path: path.to_path_buf(),
                    line: n + 1,
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_is_one_record_and_never_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let mut audit = Audit::open(dir.path(), "run:1").unwrap();
        assert!(audit.path().ends_with("audit/unattended/run_1.jsonl"));
        let answer = json!({"secret": "hunter2-answer"});
        let ev = AuditEvent {
            event: "gate_response_accepted",
            gate_id: Some("wg_1"),
            answer: Some(&answer),
            ..Default::default()
        };
        // The same event twice is two attempts: two records, numbered in order.
        assert_eq!(audit.record(ev.clone(), "s1", Some("ci")).unwrap(), 1);
        assert_eq!(audit.record(ev.clone(), "s1", Some("ci")).unwrap(), 2);
        drop(audit);
        // Reopened: the sequence goes on where it stopped.
        let mut audit = Audit::open(dir.path(), "run:1").unwrap();
        assert_eq!(audit.record(ev, "s1", Some("ci")).unwrap(), 3);
        let denied = AuditEvent {
            event: "scope_denied",
            scope: Some("bash"),
            ..Default::default()
        };
        assert_eq!(audit.record(denied, "s1", None).unwrap(), 4);
        let path = audit.path().to_path_buf();
        let records = records(&path).unwrap();
        let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        let keys: std::collections::HashSet<&str> = records
            .iter()
            .map(|r| r["dedupe_key"].as_str().unwrap())
            .collect();
        assert_eq!(keys.len(), 4, "one key per event");
        let ids: std::collections::HashSet<&str> = records
            .iter()
            .map(|r| r["event_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 4, "one id per event");
        assert_eq!(records[0]["outcome"], "accepted");
        assert_eq!(records[0]["answer_hash"], canonical::hash(&answer));
        assert_eq!(records[3]["outcome"], "denied");
        assert!(records[3]["event_id"].as_str().unwrap().starts_with("ae_"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("hunter2"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_trail_without_numbers_is_continued_after_its_last_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = Audit::path_for(dir.path(), "r").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let old = "{\"event\":\"scope_denied\",\"dedupe_key\":\"a\"}\n";
        std::fs::write(&path, old.repeat(3)).unwrap();
        let mut audit = Audit::open(dir.path(), "r").unwrap();
        let ev = AuditEvent {
            event: "unattended_negotiated",
            ..Default::default()
        };
        assert_eq!(audit.record(ev, "s", None).unwrap(), 4);
        std::fs::write(&path, "{\"event\":\"x\",\"seq\":0}\n").unwrap();
        let err = Audit::open(dir.path(), "r").err().unwrap();
        assert!(
            err.to_string().contains("seq is not a positive integer"),
            "{err}"
        );
        assert!(
            matches!(err, AuditError::BadRecord { record: 1, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn a_corrupt_trail_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = Audit::path_for(dir.path(), "r").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"dedupe_key\":\"a\"}\nnot json\n").unwrap();
        let err = Audit::open(dir.path(), "r").err().unwrap();
        assert!(err.to_string().contains("corrupt at line 2"), "{err}");
        assert!(
            matches!(err, AuditError::NotRecord { line: 2, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn outcomes_by_name() {
        assert_eq!(outcome("scope_denied"), "denied");
        assert_eq!(outcome("budget_exceeded"), "exceeded");
        assert_eq!(outcome("unattended_abort_settled"), "aborted");
        assert_eq!(outcome("gate_response_idempotency_conflict"), "rejected");
        assert_eq!(outcome("unattended_negotiated"), "accepted");
        assert_eq!(outcome("gate_advance_recovered"), "info");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
    }

    #[test]
    fn planted_links_and_bad_run_ids_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for id in ["/etc/x", "../../x", "..", "run/1"] {
            let err = Audit::open(dir.path(), id).err().unwrap();
            assert!(err.to_string().contains("invalid run id"), "{id:?}: {err}");
            assert!(matches!(err, AuditError::BadRunId(_)), "{err:?}");
        }
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("victim"), "keep\n").unwrap();
        // The trail a link to a file elsewhere.
        let session = dir.path().join("s1");
        let path = Audit::path_for(&session, "r").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), &path).unwrap();
        let err = Audit::open(&session, "r").err().unwrap();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(matches!(err, AuditError::Link(p) if p == path));
        assert!(matches!(records(&path), Err(AuditError::Link(_))));
        // A folder on the way a link.
        let session = dir.path().join("s2");
        std::fs::create_dir_all(session.join("audit")).unwrap();
        std::os::unix::fs::symlink(&outside, session.join("audit/unattended")).unwrap();
        let err = Audit::open(&session, "r").err().unwrap();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(matches!(err, AuditError::Folder { .. }), "{err:?}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "keep\n"
        );
    }
}
