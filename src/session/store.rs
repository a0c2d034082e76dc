//! Session files: append-only JSONL in the reference's format (a `session` header line, then
//! entries with `id`/`parentId` forming a tree). Each entry is written with one `write` call before
//! the event that announces it is sent; loading streams the file, skips a torn last line, and
//! rebuilds the context along the path from the last entry to the root.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::protocol::message::AgentMessage;

pub struct Store {
    /// `None` with `--no-session`.
    path: Option<PathBuf>,
    file: Option<File>,
    pub header: Value,
    leaf: Option<String>,
    ids: std::collections::HashSet<String>,
    /// The first failure to write, reported once and kept for `get_state`.
    pub error: Option<String>,
    /// The type of the last entry appended (a second `compact` in a row is refused).
    pub last_kind: Option<String>,
}

/// A loaded session: its header, the context along the current path, the model and thinking
/// level the path last set, and the leaf.
#[derive(Debug)]
pub struct Loaded {
    pub header: Value,
    pub messages: Vec<AgentMessage>,
    pub message_ids: Vec<Option<String>>,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub leaf: Option<String>,
    pub ids: std::collections::HashSet<String>,
    pub skipped_torn_line: bool,
}

impl Store {
    pub fn in_memory(id: &str, cwd: &Path) -> Store {
        Store {
            path: None,
            file: None,
            header: header(id, cwd, None),
            leaf: None,
            ids: Default::default(),
            error: None,
            last_kind: None,
        }
    }

    /// A new session file in `dir` (created when the first entry is written).
    pub fn create(dir: &Path, id: &str, cwd: &Path, parent: Option<&str>) -> Store {
        let header = header(id, cwd, parent);
        let ts = header["timestamp"]
            .as_str()
            .unwrap_or("")
            .replace([':', '.'], "-");
        let path = dir.join(format!("{ts}_{id}.jsonl"));
        Store {
            path: Some(path),
            file: None,
            header,
            leaf: None,
            ids: Default::default(),
            error: None,
            last_kind: None,
        }
    }

    pub fn open(path: &Path, loaded: &Loaded) -> Result<Store, String> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        Ok(Store {
            path: Some(path.to_path_buf()),
            file: Some(file),
            header: loaded.header.clone(),
            leaf: loaded.leaf.clone(),
            ids: loaded.ids.clone(),
            error: None,
            last_kind: None,
        })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn is_persistent(&self) -> bool {
        self.path.is_some()
    }

    pub fn is_on_disk(&self) -> bool {
        self.file.is_some()
    }

    /// Creates the file with its header if it does not exist yet. Errors name the path.
    pub fn ensure_on_disk(&mut self) -> Result<(), String> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if self.file.is_some() {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create session folder {}: {e}", dir.display()))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot create session file {}: {e}", path.display()))?;
        let mut line = serde_json::to_vec(&self.header).map_err(|e| e.to_string())?;
        line.push(b'\n');
        file.write_all(&line)
            .map_err(|e| format!("cannot write session file {}: {e}", path.display()))?;
        self.file = Some(file);
        Ok(())
    }

    /// Appends an entry of `kind` with `fields`; returns its id.
    pub fn append(&mut self, kind: &str, fields: Value) -> Result<String, String> {
        let id = self.new_id();
        self.last_kind = Some(kind.to_string());
        if self.path.is_none() {
            self.leaf = Some(id.clone());
            return Ok(id);
        }
        let mut entry = json!({"type": kind, "id": id, "parentId": self.leaf, "timestamp": crate::ids::iso_now()});
        if let (Some(e), Some(f)) = (entry.as_object_mut(), fields.as_object()) {
            e.extend(f.clone());
        }
        let result = self.ensure_on_disk().and_then(|_| {
            let mut line = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
            line.push(b'\n');
            // One write call per entry: a crash can tear only the line being written.
            let file = self.file.as_mut().ok_or("the session file is not open")?;
            file.write_all(&line)
                .map_err(|e| format!("cannot write session file: {e}"))
        });
        match result {
            Ok(()) => {
                self.leaf = Some(id.clone());
                Ok(id)
            }
            Err(e) => {
                self.error.get_or_insert(e.clone());
                Err(e)
            }
        }
    }

    pub fn append_message(&mut self, message: &AgentMessage) -> Result<String, String> {
        self.append("message", json!({ "message": message }))
    }

    /// Sets the title in the header, rewriting the file atomically when it exists.
    pub fn set_title(&mut self, title: &str) -> Result<(), String> {
        self.header["title"] = json!(title);
        self.header["titleSource"] = json!("user");
        let (Some(path), Some(_)) = (&self.path, &self.file) else {
            return Ok(());
        };
        rewrite_header(path, &self.header)?;
        self.file = Some(
            OpenOptions::new()
                .append(true)
                .open(path)
                .map_err(|e| e.to_string())?,
        );
        Ok(())
    }

    pub fn sync(&mut self) {
        if let Some(f) = &self.file {
            let _ = f.sync_data();
        }
    }

    fn new_id(&mut self) -> String {
        loop {
            let id = format!("{:08x}", crate::ids::next_u64() as u32);
            if self.ids.insert(id.clone()) {
                return id;
            }
        }
    }
}

fn header(id: &str, cwd: &Path, parent: Option<&str>) -> Value {
    let mut h = json!({"type": "session", "version": 3, "id": id, "timestamp": crate::ids::iso_now(), "cwd": cwd.display().to_string()});
    if let Some(p) = parent {
        h["parentSession"] = json!(p);
    }
    h
}

fn rewrite_header(path: &Path, header: &Value) -> Result<(), String> {
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("session"),
        crate::ids::short_id()
    ));
    let result = (|| -> std::io::Result<()> {
        let src = BufReader::new(File::open(path)?);
        let mut out = std::io::BufWriter::new(File::create(&tmp)?);
        let mut lines = src.split(b'\n');
        lines.next();
        out.write_all(serde_json::to_string(header)?.as_bytes())?;
        out.write_all(b"\n")?;
        for line in lines {
            let line = line?;
            if !line.is_empty() {
                out.write_all(&line)?;
                out.write_all(b"\n")?;
            }
        }
        out.flush()?;
        out.get_ref().sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| format!("cannot rewrite {}: {e}", path.display()))
}

/// One parsed entry line.
/// The raw line is kept and parsed again only for the entries that are needed (the current
/// path): holding every entry as a JSON tree costs about ten times the file size.
struct Entry {
    id: String,
    parent: Option<String>,
    kind: String,
    line: Vec<u8>,
}

impl Entry {
    fn value(&self) -> Value {
        serde_json::from_slice(&self.line).unwrap_or(Value::Null)
    }

    fn message(&self) -> Result<AgentMessage, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct MessageLine {
            message: AgentMessage,
        }
        serde_json::from_slice::<MessageLine>(&self.line).map(|m| m.message)
    }

    fn is_user_message(&self) -> bool {
        self.kind == "message" && self.value()["message"]["role"] == "user"
    }
}

/// The fields every entry line has.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(rename = "parentId", default)]
    parent: Option<String>,
}

/// Reads every entry of a session file, streaming; a torn last line is skipped.
fn read_entries(path: &Path) -> Result<(Value, Vec<Entry>, bool), String> {
    let file =
        File::open(path).map_err(|e| format!("cannot open session {}: {e}", path.display()))?;
    let mut lines = BufReader::with_capacity(256 * 1024, file)
        .split(b'\n')
        .peekable();
    let first = lines
        .next()
        .ok_or(format!("{} is empty, not a session file", path.display()))?
        .map_err(|e| e.to_string())?;
    let header: Value = serde_json::from_slice(&first)
        .map_err(|e| format!("{} is not a session file: {e}", path.display()))?;
    if header["type"] != "session" {
        return Err(format!(
            "{} is not a session file: the first line is not a session header",
            path.display()
        ));
    }
    let mut entries = Vec::new();
    let mut torn = false;
    let mut n = 1;
    while let Some(line) = lines.next() {
        n += 1;
        let line = line.map_err(|e| e.to_string())?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Head>(&line) {
            Ok(head) => {
                let id = head.id.unwrap_or_default();
                entries.push(Entry {
                    id,
                    parent: head.parent,
                    kind: head.kind,
                    line,
                });
            }
            Err(_) if lines.peek().is_none() => {
                log::warn!(
                    "{}: skipping a torn last line ({} bytes)",
                    path.display(),
                    line.len()
                );
                torn = true;
            }
            Err(e) => return Err(format!("{} is corrupt at line {n}: {e}", path.display())),
        }
    }
    Ok((header, entries, torn))
}

/// Loads a session: the context is the path from the last entry back to the root.
pub fn load(path: &Path) -> Result<Loaded, String> {
    let (header, entries, torn) = read_entries(path)?;
    let ids = entries.iter().map(|e| e.id.clone()).collect();
    let leaf = entries.last().map(|e| e.id.clone());
    let path_entries = path_to(&entries, leaf.as_deref());
    let (mut model, mut thinking) = (None, None);
    let mut messages = Vec::new();
    let mut message_ids: Vec<Option<String>> = Vec::new();
    // Entry id → index in `messages`, to find where a compaction's kept region starts.
    let mut kept_index: HashMap<String, usize> = HashMap::new();
    for e in path_entries {
        kept_index.insert(e.id.clone(), messages.len());
        let value = if e.kind == "message" {
            Value::Null
        } else {
            e.value()
        };
        match Some(e.kind.as_str()) {
            Some("message") => match e.message() {
                Ok(m) => {
                    messages.push(m);
                    message_ids.push(Some(e.id.clone()));
                }
                Err(err) => {
                    log::warn!("skipping entry {} of an unknown message shape: {err}", e.id)
                }
            },
            Some("model_change") => model = value["model"].as_str().map(str::to_string),
            Some("thinking_level_change") => {
                thinking = value["thinkingLevel"].as_str().map(str::to_string)
            }
            Some("compaction") => {
                // Only the messages from firstKeptEntryId on survive a compaction.
                let first_kept = value["firstKeptEntryId"].as_str().unwrap_or("");
                let kept_from = kept_index
                    .get(first_kept)
                    .copied()
                    .unwrap_or(messages.len());
                let kept: Vec<AgentMessage> = messages.drain(kept_from..).collect();
                let kept_ids: Vec<Option<String>> = message_ids
                    .drain(kept_from.min(message_ids.len())..)
                    .collect();
                messages.clear();
                message_ids.clear();
                message_ids.push(Some(e.id.clone()));
                message_ids.extend(kept_ids);
                messages.push(AgentMessage::CompactionSummary(
                    crate::protocol::message::CompactionSummaryMessage {
                        summary: value["summary"].as_str().unwrap_or("").to_string(),
                        tokens_before: value["tokensBefore"].as_u64().unwrap_or(0),
                        timestamp: 0,
                    },
                ));
                messages.extend(kept);
            }
            _ => {}
        }
    }
    Ok(Loaded {
        header,
        messages,
        message_ids,
        model,
        thinking,
        leaf,
        ids,
        skipped_torn_line: torn,
    })
}

/// The entries from the root to `leaf`, in order.
fn path_to<'a>(entries: &'a [Entry], leaf: Option<&str>) -> Vec<&'a Entry> {
    let by_id: HashMap<&str, &Entry> = entries.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut out = Vec::new();
    let mut cur = leaf.and_then(|l| by_id.get(l).copied());
    while let Some(e) = cur {
        out.push(e);
        cur = e.parent.as_deref().and_then(|p| by_id.get(p).copied());
        if out.len() > entries.len() {
            break;
        }
    }
    out.reverse();
    out
}

/// Every user message entry in the file (all branches, file order) with non-empty text.
pub fn user_messages(path: &Path) -> Result<Vec<(String, String)>, String> {
    let (_, entries, _) = read_entries(path)?;
    Ok(entries
        .iter()
        .filter(|e| e.kind == "message")
        .map(|e| (e, e.value()))
        .filter(|(_, v)| v["message"]["role"] == "user")
        .filter_map(|(e, v)| {
            let text = message_text(&v["message"]);
            (!text.is_empty()).then(|| (e.id.clone(), text))
        })
        .collect())
}

fn message_text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Writes a new session file holding the path from the root to the parent of user message
/// `entry_id`; returns the new file and the user message's text.
pub fn branch(
    path: &Path,
    entry_id: &str,
    dir: &Path,
    new_id: &str,
    cwd: &Path,
) -> Result<(PathBuf, String), String> {
    let (_, entries, _) = read_entries(path)?;
    let target = entries
        .iter()
        .find(|e| e.id == entry_id && e.is_user_message());
    let Some(target) = target else {
        return Err("Invalid entry ID for branching".into());
    };
    let text = message_text(&target.value()["message"]);
    let kept = path_to(&entries, target.parent.as_deref());
    let mut store = Store::create(dir, new_id, cwd, Some(&path.display().to_string()));
    store.ensure_on_disk()?;
    let new_path = store.path().map(Path::to_path_buf).unwrap_or_default();
    let mut file = OpenOptions::new()
        .append(true)
        .open(&new_path)
        .map_err(|e| e.to_string())?;
    for e in kept {
        let mut line = e.line.clone();
        line.push(b'\n');
        file.write_all(&line)
            .map_err(|e| format!("cannot write {}: {e}", new_path.display()))?;
    }
    file.sync_all().map_err(|e| e.to_string())?;
    Ok((new_path, text))
}

/// One line of `list_sessions`.
pub fn summary(path: &Path) -> Option<Value> {
    let file = File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    let mut lines = BufReader::new(file).split(b'\n');
    let header: Value = serde_json::from_slice(&lines.next()?.ok()?).ok()?;
    if header["type"] != "session" {
        return None;
    }
    let (mut count, mut first) = (0u64, None);
    for line in lines.map_while(Result::ok) {
        // Cheap pre-filter: only message entries are parsed.
        if !line.windows(16).any(|w| w == b"\"type\":\"message\"") {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if v["type"] != "message" {
            continue;
        }
        count += 1;
        if first.is_none() && v["message"]["role"] == "user" {
            first = Some(message_text(&v["message"]));
        }
    }
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| crate::ids::iso_from_ms(d.as_millis() as u64));
    Some(json!({
        "id": header["id"], "path": path.display().to_string(), "name": header.get("title"),
        "created": header["timestamp"], "modified": modified, "messageCount": count, "firstMessage": first,
        "cwd": header["cwd"], "parentSession": header.get("parentSession"),
    }))
}

/// The folder for sessions of `cwd` under `root` (`~/src/app` → `-src-app`, else `--srv-app--`).
pub fn cwd_dir(root: &Path, cwd: &Path) -> PathBuf {
    let encode = |s: &str| s.replace(['/', '\\', ':'], "-");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let name = match home.as_ref().and_then(|h| cwd.strip_prefix(h).ok()) {
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
pub fn list(root: &Path, dir: &Path, all: bool) -> Vec<Value> {
    let dirs: Vec<PathBuf> = if all {
        std::fs::read_dir(root)
            .map(|r| {
                r.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        vec![dir.to_path_buf()]
    };
    let mut out: Vec<Value> = dirs
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
        })
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| summary(&p))
        .collect();
    out.sort_by(|a, b| b["modified"].as_str().cmp(&a["modified"].as_str()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::UserMessage;

    #[test]
    fn append_load_and_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::create(dir.path(), "sid", dir.path(), None);
        s.append_message(&AgentMessage::User(UserMessage::new("one", &[])))
            .unwrap();
        s.append("thinking_level_change", json!({"thinkingLevel": "high"}))
            .unwrap();
        s.append_message(&AgentMessage::User(UserMessage::new("two", &[])))
            .unwrap();
        let path = s.path().unwrap().to_path_buf();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"type\":\"message\",\"id\":\"x\",\"par")
            .unwrap();
        let loaded = load(&path).unwrap();
        assert!(loaded.skipped_torn_line);
        assert_eq!(loaded.messages.len(), 2);
        assert_eq!(loaded.thinking.as_deref(), Some("high"));
        assert_eq!(user_messages(&path).unwrap().len(), 2);
    }

    #[test]
    fn corrupt_middle_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        std::fs::write(
            &p,
            "{\"type\":\"session\",\"id\":\"a\"}\nnot json\n{\"type\":\"message\"}\n",
        )
        .unwrap();
        assert!(load(&p).unwrap_err().contains("corrupt at line 2"));
        std::fs::write(&p, "garbage\n").unwrap();
        assert!(load(&p).is_err());
    }

    #[test]
    fn cwd_folder_names() {
        let root = Path::new("/r");
        assert_eq!(
            cwd_dir(root, Path::new("/srv/app")),
            PathBuf::from("/r/--srv-app--")
        );
    }
}
