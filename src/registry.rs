//! The session registry: while gjc runs, `<agent dir>/rpc-sessions/<sessionId>.json` says which
//! session this process serves, so hosts and tools can find running agents (published clients
//! list these files and delete records whose `pid` is gone).
//!
//! Records are written atomically (a temporary name that does not end in `.json`, then a
//! rename), not durably (see `write_atomic`): a reader that meets a half-written record deletes
//! it. Every failure is logged and otherwise ignored; the registry never stops the agent.

use std::path::{Path, PathBuf};

use serde::Serialize;

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
    dir: PathBuf,
    transport: &'static str,
    cwd: String,
    started_at: String,
    /// The record this process wrote last.
    current: Option<PathBuf>,
}

impl Registry {
    pub fn new(agent_dir: &Path, transport: &'static str, cwd: &Path) -> Registry {
        Registry {
            dir: agent_dir.join("rpc-sessions"),
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
        let path = self.dir.join(format!("{}.json", file_stem(session_id)));
        match write_atomic(&self.dir, &path, &record) {
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

/// Session ids are generated UUIDs, but a switched-to file may carry anything: keep the name
/// inside the folder.
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

/// Whether the record at `path` names this process. Read with care: a regular file only (never
/// a link or a FIFO, which would hold the exit), at most a few KiB.
fn written_by_us(path: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path);
    let Ok(file) = file else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut text = Vec::new();
    if file.take(64 * 1024).read_to_end(&mut text).is_err() {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("pid").and_then(serde_json::Value::as_u64))
        == Some(u64::from(std::process::id()))
}

fn write_atomic(dir: &Path, path: &Path, record: &Record) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        std::process::id(),
        crate::ids::short_id()
    ));
    // One write, and no fsync: a record describes a live process, so after a power loss it is
    // stale whatever it holds, and readers delete records whose pid is gone (or that do not
    // parse). The rename alone keeps a crash of gjc from leaving half a record under a `.json`
    // name. The fsync cost about a millisecond on the session thread before its first command.
    let mut line = serde_json::to_vec(record)?;
    line.push(b'\n');
    let result = std::fs::write(&tmp, &line).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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
        r.publish("../s2", None);
        assert!(!first.exists());
        assert!(home.path().join("rpc-sessions/___s2.json").exists());
        drop(r);
        assert_eq!(
            std::fs::read_dir(home.path().join("rpc-sessions"))
                .unwrap()
                .count(),
            0
        );
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
