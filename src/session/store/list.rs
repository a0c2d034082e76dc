//! Finding sessions: the folder of a working directory, and the summaries `list_sessions` shows.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::format::message_text;
use crate::protocol::reply::SessionSummary;

/// The most of a file read for its header line: headers are a few hundred bytes, and a file
/// whose first line is longer is not a session file.
const MAX_HEADER: u64 = 64 * 1024;

/// Opens a session file for reading, refusing anything that is not a regular file without waiting
/// on it: a FIFO named like a session would hold `open` until somebody writes to it, and with it
/// the thread listing or loading sessions. (`O_NONBLOCK` changes nothing for a regular file.)
pub fn open_regular(path: &Path) -> io::Result<File> {
    use crate::fs::bounded::{self, Links, ReadError};
    bounded::open_regular(path, Links::Follow).map_err(|e| match e {
        ReadError::Io(e) => e,
        refused => io::Error::new(io::ErrorKind::InvalidInput, refused.to_string()),
    })
}

/// A session file's header line, read without reading the rest of the file.
fn read_header(reader: &mut impl BufRead) -> Option<Value> {
    let mut line = Vec::new();
    reader
        .by_ref()
        .take(MAX_HEADER)
        .read_until(b'\n', &mut line)
        .ok()?;
    if line.last() != Some(&b'\n') {
        return None;
    }
    let header: Value = serde_json::from_slice(&line).ok()?;
    (header["type"] == "session").then_some(header)
}

/// The id in a session header, when it is one: ids name files (the gate store, the registry
/// record), so an id that does not match [`crate::ids::is_valid_id`] makes the file no session
/// gjc lists, finds or deletes. It is reported in the log.
fn header_id(header: &Value, path: &Path) -> Option<String> {
    let id = header.get("id").and_then(Value::as_str)?;
    if !crate::ids::is_valid_id(id) {
        log::warn!(
            "skipping session file {}: {}",
            path.display(),
            crate::ids::invalid_id("header id", id)
        );
        return None;
    }
    Some(id.to_string())
}

/// A stored session as its header and file say, without reading its entries.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub id: String,
    pub path: PathBuf,
    pub cwd: Option<String>,
    pub title: Option<String>,
    /// When the file last changed, in milliseconds since the epoch.
    pub modified_ms: u64,
}

/// The header of the session file at `path`.
pub fn stored(path: &Path) -> Option<Stored> {
    let file = open_regular(path).ok()?;
    let modified_ms = modified_ms(&file.metadata().ok()?);
    let header = read_header(&mut BufReader::new(file))?;
    let text = |key: &str| header.get(key).and_then(Value::as_str).map(str::to_string);
    Some(Stored {
        id: header_id(&header, path)?,
        path: path.to_path_buf(),
        cwd: text("cwd"),
        title: text("title"),
        modified_ms,
    })
}

fn modified_ms(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every session file in `dirs`, by header (unordered).
pub fn stored_in(dirs: &[PathBuf]) -> Vec<Stored> {
    session_files(dirs).filter_map(|p| stored(&p)).collect()
}

/// The session with `id` in `dirs`. Files are named `<time>_<id>.jsonl`, so the names point at
/// the candidates; the header decides.
pub fn find(dirs: &[PathBuf], id: &str) -> Option<Stored> {
    let suffix = format!("_{id}.jsonl");
    let named = session_files(dirs)
        .filter(|p| p.to_string_lossy().ends_with(&suffix))
        .filter_map(|p| stored(&p))
        .find(|s| s.id == id);
    named.or_else(|| stored_in(dirs).into_iter().find(|s| s.id == id))
}

/// The folders sessions are kept in: every folder under `root`.
pub fn folders(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .map(|r| {
            r.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

fn session_files(dirs: &[PathBuf]) -> impl Iterator<Item = PathBuf> + '_ {
    dirs.iter()
        .flat_map(|d| {
            std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
        })
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
}

/// A line's entry type, read without building the entry.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
}

/// A message entry's role, read without building the message.
#[derive(Deserialize)]
struct Role<'a> {
    #[serde(borrow)]
    message: Option<RoleOf<'a>>,
}

#[derive(Deserialize)]
struct RoleOf<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
}

/// The message entries among `lines`, and the text of the first user message. Each line is
/// only scanned for its type (a long session is mostly tool output); the first user message is
/// the one line built whole.
fn count_messages(lines: impl Iterator<Item = Vec<u8>>) -> (u64, Option<String>) {
    let (mut count, mut first) = (0u64, None);
    for line in lines {
        // Cheap pre-filter: only lines that may be message entries are parsed.
        if !line.windows(16).any(|w| w == b"\"type\":\"message\"") {
            continue;
        }
        let is_message = serde_json::from_slice::<Kind>(&line)
            .is_ok_and(|k| k.kind.as_deref() == Some("message"));
        if !is_message {
            continue;
        }
        count += 1;
        let user = || {
            serde_json::from_slice::<Role>(&line)
                .is_ok_and(|r| r.message.and_then(|m| m.role).as_deref() == Some("user"))
        };
        if first.is_none() && user() {
            first = serde_json::from_slice::<Value>(&line)
                .ok()
                .map(|v| message_text(&v["message"]));
        }
    }
    (count, first)
}

/// One line of `list_sessions`.
pub fn summary(path: &Path) -> Option<SessionSummary> {
    let file = open_regular(path).ok()?;
    let meta = file.metadata().ok()?;
    let mut reader = BufReader::new(file);
    let header = read_header(&mut reader)?;
    let (count, first) = count_messages(reader.split(b'\n').map_while(Result::ok));

    let modified = Some(modified_ms(&meta))
        .filter(|ms| *ms > 0)
        .map(crate::ids::iso_from_ms);
    let text = |key: &str| header.get(key).and_then(Value::as_str).map(str::to_string);
    Some(SessionSummary {
        id: header_id(&header, path)?,
        path: path.display().to_string(),
        name: text("title"),
        created: text("timestamp"),
        modified,
        message_count: count,
        first_message: first,
        cwd: text("cwd"),
        parent_session: text("parentSession"),
    })
}

/// The folder for sessions of `cwd` under `root` (`~/src/app` → `-src-app`, else `--srv-app--`).
pub fn cwd_dir(root: &Path, cwd: &Path, home: Option<&Path>) -> PathBuf {
    let encode = |s: &str| s.replace(['/', '\\', ':'], "-");
    let name = match home.and_then(|h| cwd.strip_prefix(h).ok()) {
        Some(rel) if rel.as_os_str().is_empty() => "-".to_string(),
        Some(rel) => format!("-{}", encode(&rel.display().to_string())),
        None => format!(
            "--{}--",
            encode(cwd.display().to_string().trim_start_matches('/'))
        ),
    };
    root.join(name)
}

/// Session files under `dir` (or every folder under `root` with `all`), newest first.
pub fn list(root: &Path, dir: &Path, all: bool) -> Vec<SessionSummary> {
    let dirs: Vec<PathBuf> = if all {
        folders(root)
    } else {
        vec![dir.to_path_buf()]
    };
    let mut out: Vec<SessionSummary> = session_files(&dirs).filter_map(|p| summary(&p)).collect();
    // Two files changed within one tick of the file system's clock tie on `modified`; the later
    // created (file names start with the creation time) comes first.
    out.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| b.created.cmp(&a.created))
            .then_with(|| b.path.cmp(&a.path))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread and waits for it at most 10 s: a listing that blocks fails the test
    /// instead of hanging it.
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the listing blocked")
    }

    /// A sessions root with one project folder holding session `aaa`.
    fn root_with_one_session(header_extra: &str, body: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("--p--");
        std::fs::create_dir_all(&dir).unwrap();
        let header =
            format!("{{\"type\":\"session\",\"id\":\"aaa\",\"cwd\":\"/p\"{header_extra}}}\n");
        let file = dir.join("2026-01-01T00-00-00-000Z_aaa.jsonl");
        std::fs::write(file, header + body).unwrap();
        (tmp, dir)
    }

    #[test]
    fn a_fifo_named_like_a_session_is_skipped_without_waiting_on_it() {
        let (tmp, dir) = root_with_one_session("", "");
        let fifo = dir.join("2026-01-02T00-00-00-000Z_bbb.jsonl");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let (root, d) = (tmp.path().to_path_buf(), dir.clone());
        let listed = within_10s(move || list(&root, &d, true));
        assert_eq!(listed.len(), 1);
        let dirs = vec![dir];
        let ids: Vec<String> = within_10s(move || stored_in(&dirs))
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, ["aaa"]);
        let err = open_regular(&fifo).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_header_id_that_is_a_path_is_not_a_stored_session() {
        let (tmp, dir) = root_with_one_session("", "");
        for (n, id) in ["/etc/x", "../../x", ".."].iter().enumerate() {
            let header = serde_json::json!({"type": "session", "id": id, "cwd": "/p"});
            let file = dir.join(format!("2026-01-0{}T00-00-00-000Z_x.jsonl", n + 2));
            std::fs::write(&file, format!("{header}\n")).unwrap();
            assert_eq!(stored(&file), None, "{id}");
            assert!(summary(&file).is_none(), "{id}");
            assert!(find(std::slice::from_ref(&dir), id).is_none(), "{id}");
        }
        assert_eq!(list(tmp.path(), &dir, true).len(), 1);
    }

    #[test]
    fn messages_are_counted_as_a_whole_parse_would_count_them() {
        let lines = [
            r#"{"type":"model_change","model":"a/b"}"#,
            // Not an entry of type message, though the text says so.
            r#"{"type":"custom","data":{"type":"message"}}"#,
            r#"{"type":"message","message":{"role":"assistant","content":[]}}"#,
            // A message that is not an object, escapes, a torn line.
            r#"{"type":"message","message":"odd"}"#,
            r#"{"type":"message","message":{"role":"user","content":"first \"one\""}}"#,
            r#"{"type":"message","message":{"role":"user","content":"second"}"#,
            r#"{"type":"message","message":{"role":"user","content":"third"}}"#,
        ];
        let (count, first) = count_messages(lines.iter().map(|l| l.as_bytes().to_vec()));
        // The reading that builds each line whole.
        let whole = lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "message")
            .count();
        assert_eq!(count, whole as u64);
        assert_eq!(count, 4);
        assert_eq!(first.as_deref(), Some("first \"one\""));
    }

    #[test]
    fn headers_are_read_alone_and_bounded() {
        let (tmp, dir) = root_with_one_session(",\"title\":\"T\"", "{\"type\":\"message\"}\n");
        let a = dir.join("2026-01-01T00-00-00-000Z_aaa.jsonl");
        // A first line longer than the bound is not a header, whatever follows.
        let long = format!(
            "{{\"type\":\"session\",\"id\":\"bbb\",\"pad\":\"{}\"}}\n",
            "x".repeat(MAX_HEADER as usize)
        );
        std::fs::write(dir.join("x_bbb.jsonl"), long).unwrap();
        // An id the file name does not carry is still found by its header.
        std::fs::write(
            dir.join("renamed.jsonl"),
            "{\"type\":\"session\",\"id\":\"ccc\",\"cwd\":\"/q\"}\n",
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "{\"type\":\"session\"}\n").unwrap();
        let dirs = folders(tmp.path());
        let mut ids: Vec<String> = stored_in(&dirs).into_iter().map(|s| s.id).collect();
        ids.sort();
        assert_eq!(ids, ["aaa", "ccc"]);
        let found = find(&dirs, "aaa").unwrap();
        assert_eq!(found.path, a);
        assert_eq!(found.cwd.as_deref(), Some("/p"));
        assert_eq!(found.title.as_deref(), Some("T"));
        assert!(found.modified_ms > 0);
        assert_eq!(find(&dirs, "ccc").unwrap().cwd.as_deref(), Some("/q"));
        assert!(find(&dirs, "bbb").is_none());
        assert!(find(&dirs, "zzz").is_none());
    }

    #[test]
    fn cwd_folder_names() {
        let root = Path::new("/r");
        assert_eq!(
            cwd_dir(root, Path::new("/srv/app"), None),
            PathBuf::from("/r/--srv-app--")
        );
        // Under the settings' home the name is relative to it; the test process's `HOME`
        // plays no part.
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            cwd_dir(root, Path::new("/home/u/src/app"), home),
            PathBuf::from("/r/-src-app")
        );
        assert_eq!(
            cwd_dir(root, Path::new("/home/u"), home),
            PathBuf::from("/r/-")
        );
        assert_eq!(
            cwd_dir(root, Path::new("/srv/app"), home),
            PathBuf::from("/r/--srv-app--")
        );
    }
}
