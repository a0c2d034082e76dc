//! The session registry: while gjc runs, `<agent dir>/rpc-sessions/<sessionId>.json` says which
//! session this process serves, so hosts and tools can find running agents (published clients
//! list these files and delete records whose `pid` is gone).
//!
//! Records are written atomically (a temporary name that does not end in `.json`, then a
//! rename), not durably (see `write_atomic`): a reader that meets a half-written record deletes
//! it. Every failure is logged and otherwise ignored; the registry never stops the agent.
//!
//! The session id names the record, so it must match [`crate::ids::is_valid_id`]; the
//! `rpc-sessions` folder must be a real folder (a planted link is refused, not followed), and a
//! record is first written under a fresh name that is never followed through a link.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::fs::atomic;

/// The registry's folder in the agent dir.
const FOLDER: &str = "rpc-sessions";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Record<'a> {
    session_id: &'a str,
    pid: u32,
    transport: &'static str,
    cwd: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    started_at: &'a str,
}

pub struct Registry {
    agent_dir: PathBuf,
    transport: &'static str,
    cwd: String,
    started_at: String,
    /// The record this process wrote last.
    current: Option<PathBuf>,
}

impl Registry {
    pub fn new(agent_dir: &Path, transport: &'static str, cwd: &Path) -> Registry {
        Registry {
            agent_dir: agent_dir.to_path_buf(),
            transport,
            cwd: cwd.display().to_string(),
            started_at: crate::ids::iso_now(),
            current: None,
        }
    }

    /// Says that this process now serves `session_id` with `model` (`provider/id`).
    pub fn publish(&mut self, session_id: &str, model: Option<&str>) {
        let record = Record {
            session_id,
            pid: std::process::id(),
            transport: self.transport,
            cwd: &self.cwd,
            model,
            started_at: &self.started_at,
        };
        let dir = self.agent_dir.join(FOLDER);
        let path = match crate::ids::join_id(&dir, &file_stem(session_id), ".json") {
            Ok(path) if crate::ids::is_valid_id(session_id) => path,
            _ => {
                // No record names this process now: the old one would say the wrong session.
                log::warn!(
                    "no session registry record: {}",
                    crate::ids::invalid_id("session id", session_id)
                );
                self.remove();
                return;
            }
        };
        match write_atomic(&self.agent_dir, &path, &record) {
            Ok(()) => {
                if self.current.as_ref().is_some_and(|old| *old != path) {
                    self.remove();
                }
                self.current = Some(path);
            }
            Err(e) => log::warn!(
                "cannot write the session registry record {}: {e}",
                path.display()
            ),
        }
    }

    /// The session moved to another folder; the next record names it.
    pub fn set_cwd(&mut self, cwd: &Path) {
        self.cwd = cwd.display().to_string();
    }

    /// Removes this process's record (at exit, or when it serves another session now). A record
    /// belongs to its process: when another process serving the same session has written it
    /// since, it describes that process and stays.
    pub fn remove(&mut self) {
        let Some(path) = self.current.take() else {
            return;
        };
        if !written_by_us(&path) {
            log::debug!("{} belongs to another process; kept", path.display());
            return;
        }
        if let Err(e) = std::fs::remove_file(&path) {
            log::debug!("cannot remove {}: {e}", path.display());
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A valid session id with `.` and `:` as `_`, as records were always named.
fn file_stem(session_id: &str) -> String {
    session_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether the record at `path` names this process. Read with care (`fs::bounded`): a regular
/// file only (never a link or a FIFO, which would hold the exit), at most 64 KiB.
fn written_by_us(path: &Path) -> bool {
    use crate::fs::bounded::{self, Links};
    let Ok(text) = bounded::read(path, 64 * 1024, Links::Refuse) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("pid").and_then(serde_json::Value::as_u64))
        == Some(u64::from(std::process::id()))
}

fn write_atomic(agent_dir: &Path, path: &Path, record: &Record) -> std::io::Result<()> {
    crate::fs::dirs::real_dir(agent_dir, &[FOLDER])?;
    // No fsync: a record describes a live process, so after a power loss it is stale whatever
    // it holds, and readers delete records whose pid is gone (or that do not parse). The rename
    // alone keeps a crash of gjc from leaving half a record under a `.json` name. The fsync
    // cost about a millisecond on the session thread before its first command. The temporary
    // file is new (`O_EXCL`: a planted link is never written through), and the rename replaces
    // a link at the record rather than following it.
    let mut line = serde_json::to_vec(record)?;
    line.push(b'\n');
    let options = atomic::Options {
        durability: atomic::Durability::Renamed,
        ..atomic::Options::PRIVATE
    };
    atomic::replace(path, options, atomic::bytes(&line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_replaces_and_removes_its_record() {
        let home = tempfile::tempdir().unwrap();
        let mut r = Registry::new(home.path(), "stdio", Path::new("/p"));
        r.publish("s1", Some("scripted/m"));
        let first = home.path().join("rpc-sessions/s1.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&first).unwrap()).unwrap();
        assert_eq!(v["sessionId"], "s1");
        assert_eq!(v["pid"], std::process::id());
        assert_eq!(v["transport"], "stdio");
        assert_eq!(v["model"], "scripted/m");
        r.publish("ed:s2.x", None);
        assert!(!first.exists());
        assert!(home.path().join("rpc-sessions/ed_s2_x.json").exists());
        drop(r);
        assert_eq!(
            std::fs::read_dir(home.path().join("rpc-sessions"))
                .unwrap()
                .count(),
            0
        );
    }

    #[test]
    fn bad_ids_and_a_linked_folder_write_nothing() {
        let home = tempfile::tempdir().unwrap();
        let outside = home.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let mut r = Registry::new(&home.path().join("agent"), "stdio", Path::new("/p"));
        r.publish("s1", None);
        let first = home.path().join("agent/rpc-sessions/s1.json");
        assert!(first.exists());
        for id in ["/etc/x", "../../x", "..", ""] {
            r.publish(id, None);
        }
        assert!(!first.exists(), "the record of the old session went");
        assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 2);
        // The folder a planted link: refused, nothing written where it points.
        let agent = home.path().join("linked");
        std::fs::create_dir(&agent).unwrap();
        std::os::unix::fs::symlink(&outside, agent.join("rpc-sessions")).unwrap();
        let mut r = Registry::new(&agent, "stdio", Path::new("/p"));
        r.publish("s1", None);
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_record_another_process_wrote_since_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        let mut r = Registry::new(home.path(), "stdio", Path::new("/p"));
        r.publish("s1", None);
        // A second process serving the same session replaces the record with its own.
        let path = home.path().join("rpc-sessions/s1.json");
        let other = serde_json::json!({"sessionId": "s1", "pid": std::process::id() + 1,
            "transport": "stdio", "cwd": "/p", "startedAt": "x"});
        std::fs::write(&path, other.to_string()).unwrap();
        drop(r);
        let kept: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(kept, other, "the running process keeps its record");
    }
}
