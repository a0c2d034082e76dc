//! Session files: append-only JSONL in the reference's format (a `session` header line, then
//! entries with `id`/`parentId` forming a tree). Each entry is written with one `write` call before
//! the event that announces it is sent; loading streams the file, skips a torn last line, and
//! rebuilds the context along the path from the last entry to the root.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::context::{Context, Item, Span, Stamp};
use super::scan::{scan, Lines, ScanError};
use crate::protocol::message::AgentMessage;

/// An entry's id. gjc and the reference write eight hex digits, which this keeps inline: loading
/// a long session makes no allocation per entry for ids, and copying one costs nothing.
pub type EntryId = smol_str::SmolStr;

pub struct Store {
    /// `None` with `--no-session`.
    path: Option<PathBuf>,
    file: Option<File>,
    pub header: Value,
    leaf: Option<EntryId>,
    ids: Ids,
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
    pub context: Context,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub leaf: Option<EntryId>,
    /// Every entry id in the file, all branches.
    pub ids: Vec<EntryId>,
    pub skipped_torn_line: bool,
}

/// The entry ids of a session, to keep new ones unique. A loaded session hands over a plain
/// list; the set is built when the first new id is made, so a switch does not wait for it.
#[derive(Default)]
struct Ids {
    loaded: Vec<EntryId>,
    set: HashSet<EntryId>,
}

impl Ids {
    /// Adds `id`; false if it was there already.
    fn insert(&mut self, id: EntryId) -> bool {
        if !self.loaded.is_empty() {
            self.set.extend(std::mem::take(&mut self.loaded));
        }
        self.set.insert(id)
    }
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

    /// Appends to a loaded session file; takes the loaded entry ids over.
    pub fn open(path: &Path, loaded: &mut Loaded) -> Result<Store, String> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        Ok(Store {
            path: Some(path.to_path_buf()),
            file: Some(file),
            header: loaded.header.clone(),
            leaf: loaded.leaf.clone(),
            ids: Ids {
                loaded: std::mem::take(&mut loaded.ids),
                set: HashSet::new(),
            },
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

    /// Appends an entry of `kind` with `fields` (a map); returns its id. Lines are written from
    /// typed values in declaration order, so a message's `role` and each block's `type` come
    /// first, which is what the loader reads fastest (`protocol::tagged`).
    pub fn append(&mut self, kind: &str, fields: impl serde::Serialize) -> Result<EntryId, String> {
        #[derive(serde::Serialize)]
        struct EntryLine<'a, F> {
            #[serde(rename = "type")]
            kind: &'a str,
            id: &'a str,
            #[serde(rename = "parentId")]
            parent_id: Option<&'a str>,
            timestamp: String,
            #[serde(flatten)]
            fields: F,
        }
        let id = self.new_id();
        self.last_kind = Some(kind.to_string());
        if self.path.is_none() {
            self.leaf = Some(id.clone());
            return Ok(id);
        }
        let entry = EntryLine {
            kind,
            id: &id,
            parent_id: self.leaf.as_deref(),
            timestamp: crate::ids::iso_now(),
            fields,
        };
        let mut line = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let result = self.ensure_on_disk().and_then(|_| {
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

    pub fn append_message(&mut self, message: &AgentMessage) -> Result<EntryId, String> {
        #[derive(serde::Serialize)]
        struct MessageFields<'a> {
            message: &'a AgentMessage,
        }
        self.append("message", MessageFields { message })
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

    fn new_id(&mut self) -> EntryId {
        loop {
            let id = smol_str::format_smolstr!("{:08x}", crate::ids::next_u64() as u32);
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

/// One entry of a session file: the fields every entry has, and what the reader kept of the rest.
struct Entry<B> {
    id: EntryId,
    parent: Option<EntryId>,
    body: B,
}

/// The fields every entry line has; a message is left as raw JSON for the caller to read.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    id: Option<EntryId>,
    #[serde(rename = "parentId", default)]
    parent: Option<EntryId>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
}

impl Head<'_> {
    fn is_user_message(&self) -> bool {
        #[derive(serde::Deserialize)]
        struct Role<'a> {
            #[serde(borrow)]
            role: Option<std::borrow::Cow<'a, str>>,
        }
        self.kind == "message"
            && self
                .message
                .and_then(|m| serde_json::from_str::<Role>(m.get()).ok())
                .is_some_and(|r| r.role.as_deref() == Some("user"))
    }
}

/// Reads an entry line's head and keeps what `keep` makes of it.
fn entry_with<B>(
    line: &[u8],
    keep: impl FnOnce(&Head, &[u8]) -> B,
) -> serde_json::Result<Entry<B>> {
    let head: Head = serde_json::from_slice(line)?;
    let body = keep(&head, line);
    Ok(Entry {
        id: head.id.unwrap_or_default(),
        parent: head.parent,
        body,
    })
}

/// Reads a session file: checks the header, then hands each entry line to `parse` (on several
/// threads for a long file, see [`super::scan`]). A line that does not parse is a torn write
/// when it is the last one (skipped with a warning) and corruption anywhere else.
fn read_entries<B: Send>(
    path: &Path,
    parse: impl Fn(&[u8], u64) -> serde_json::Result<Entry<B>> + Sync,
) -> Result<Entries<B>, String> {
    let file =
        File::open(path).map_err(|e| format!("cannot open session {}: {e}", path.display()))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (stamp, len) = (Some(Stamp::from_metadata(&metadata)), metadata.len());
    let mut lines = Lines::new(&file, 0, len);
    if !lines.advance().map_err(|e| e.to_string())? {
        return Err(format!("{} is empty, not a session file", path.display()));
    }
    let header: Value = serde_json::from_slice(&lines.line)
        .map_err(|e| format!("{} is not a session file: {e}", path.display()))?;
    if header["type"] != "session" {
        return Err(format!(
            "{} is not a session file: the first line is not a session header",
            path.display()
        ));
    }
    let scanned = match scan(&file, lines.position(), len, &parse) {
        Ok(scanned) => scanned,
        Err(ScanError::Io(e)) => return Err(format!("cannot read {}: {e}", path.display())),
        Err(ScanError::Corrupt { line, error }) => {
            // The header is line 1.
            let line = line + 1;
            return Err(format!(
                "{} is corrupt at line {line}: {error}",
                path.display()
            ));
        }
    };
    if let Some(len) = scanned.torn {
        log::warn!(
            "{}: skipping a torn last line ({len} bytes)",
            path.display()
        );
    }
    Ok(Entries {
        header,
        entries: scanned.items,
        torn: scanned.torn.is_some(),
        file,
        stamp,
    })
}

/// A session file read through: its header, its entries, whether a torn last line was skipped,
/// and the file, still open.
struct Entries<B> {
    header: Value,
    entries: Vec<Entry<B>>,
    torn: bool,
    file: File,
    /// The file's stamp from before it was read.
    stamp: Option<Stamp>,
}

/// What `load` keeps of an entry: where a message sits in the file (or the message, when its
/// role could not be seen without parsing it), anything else as a value.
enum Loadable {
    Message(Option<Item>),
    Other(Value),
}

/// The roles gjc reads (`AgentMessage`'s tags).
const ROLES: [&str; 5] = [
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "compactionSummary",
];

/// Reads an entry's head; a message's body is only checked to be JSON and located, not parsed.
/// A message whose `role` opens it (gjc and the reference both write it first) is judged by that
/// role: an unknown one is skipped with a warning, as is a message gjc cannot parse when the
/// role comes later and the body has to be read to know.
fn loadable(line: &[u8], offset: u64) -> serde_json::Result<Entry<Loadable>> {
    entry_with(line, |head, line| match head.message {
        Some(raw) if head.kind == "message" => {
            let id = head.id.as_deref().unwrap_or("");
            let item = match leading_role(raw.get()) {
                Some(role) if ROLES.contains(&role) => Some(Item::Stored(Span {
                    offset: offset + (raw.get().as_ptr() as usize - line.as_ptr() as usize) as u64,
                    len: raw.get().len(),
                })),
                Some(role) => {
                    log::warn!("skipping entry {id}: gjc does not read {role:?} messages");
                    None
                }
                None => serde_json::from_str(raw.get())
                    .map(|m| Item::Parsed(Box::new(m)))
                    .map_err(|err| {
                        log::warn!("skipping entry {id} of an unknown message shape: {err}")
                    })
                    .ok(),
            };
            Loadable::Message(item)
        }
        _ => Loadable::Other(serde_json::from_slice(line).unwrap_or(Value::Null)),
    })
}

/// The role of a message written as `{"role":"…"` (a plain string, no escapes), if so.
fn leading_role(json: &str) -> Option<&str> {
    let rest = json.strip_prefix("{\"role\":\"")?;
    let end = rest.find(['"', '\\'])?;
    (rest.as_bytes()[end] == b'"').then(|| &rest[..end])
}

/// Loads a session: the context is the path from the last entry back to the root.
pub fn load(path: &Path) -> Result<Loaded, String> {
    let Entries {
        header,
        mut entries,
        torn,
        file,
        stamp,
    } = read_entries(path, loadable)?;
    let leaf = entries.last().map(|e| e.id.clone());
    let path_indices = path_to(&entries, leaf.as_deref());
    // Compactions name the entry their kept region starts at; only those ids need positions.
    let first_kept: HashSet<EntryId> = path_indices
        .iter()
        .filter_map(|&i| match &entries[i].body {
            Loadable::Other(v) if v["type"] == "compaction" => {
                v["firstKeptEntryId"].as_str().map(EntryId::from)
            }
            _ => None,
        })
        .collect();
    let (mut model, mut thinking) = (None, None);
    let mut messages = Vec::with_capacity(path_indices.len());
    let mut message_ids: Vec<Option<EntryId>> = Vec::with_capacity(path_indices.len());
    let mut kept_index: HashMap<EntryId, usize> = HashMap::new();
    for i in path_indices {
        let e = &mut entries[i];
        if first_kept.contains(&e.id) {
            kept_index.insert(e.id.clone(), messages.len());
        }
        let body = std::mem::replace(&mut e.body, Loadable::Other(Value::Null));
        let v = match body {
            Loadable::Message(Some(m)) => {
                messages.push(m);
                message_ids.push(Some(e.id.clone()));
                continue;
            }
            Loadable::Message(None) => continue,
            Loadable::Other(v) => v,
        };
        match v["type"].as_str().unwrap_or("") {
            "model_change" => model = v["model"].as_str().map(str::to_string),
            "thinking_level_change" => thinking = v["thinkingLevel"].as_str().map(str::to_string),
            "compaction" => {
                // Only the messages from firstKeptEntryId on survive a compaction.
                let first = v["firstKeptEntryId"].as_str().unwrap_or("");
                let kept_from = kept_index.get(first).copied().unwrap_or(messages.len());
                let kept: Vec<Item> = messages.drain(kept_from..).collect();
                let kept_ids: Vec<Option<EntryId>> = message_ids
                    .drain(kept_from.min(message_ids.len())..)
                    .collect();
                messages.clear();
                message_ids.clear();
                message_ids.push(Some(e.id.clone()));
                message_ids.extend(kept_ids);
                messages.push(Item::Parsed(Box::new(AgentMessage::CompactionSummary(
                    crate::protocol::message::CompactionSummaryMessage {
                        summary: v["summary"].as_str().unwrap_or("").to_string(),
                        tokens_before: v["tokensBefore"].as_u64().unwrap_or(0),
                        timestamp: 0,
                    },
                ))));
                messages.extend(kept);
                // Kept entries now count from just after the summary; the rest were summarised.
                kept_index.retain(|_, pos| *pos >= kept_from);
                kept_index
                    .values_mut()
                    .for_each(|pos| *pos = *pos - kept_from + 1);
            }
            _ => {}
        }
    }
    Ok(Loaded {
        header,
        context: Context::from_file(file, stamp, messages, message_ids),
        model,
        thinking,
        leaf,
        ids: entries.into_iter().map(|e| e.id).collect(),
        skipped_torn_line: torn,
    })
}

/// The indices of the entries from the root to `leaf`, in order.
fn path_to<B>(entries: &[Entry<B>], leaf: Option<&str>) -> Vec<usize> {
    // Mostly an entry's parent is the entry written just before it: that chain is walked
    // without an index, which is built only if the path jumps (the file has branches).
    let mut by_id: Option<HashMap<&str, usize>> = None;
    let mut find = |id: &str, before: usize| -> Option<usize> {
        if before > 0 && entries[before - 1].id == id {
            return Some(before - 1);
        }
        by_id
            .get_or_insert_with(|| {
                entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (e.id.as_str(), i))
                    .collect()
            })
            .get(id)
            .copied()
    };
    let mut out = Vec::new();
    let mut cur = leaf.and_then(|l| find(l, entries.len()));
    while let Some(i) = cur {
        out.push(i);
        cur = entries[i].parent.as_deref().and_then(|p| find(p, i));
        if out.len() > entries.len() {
            break;
        }
    }
    out.reverse();
    out
}

/// Every user message entry in the file (all branches, file order) with non-empty text.
pub fn user_messages(path: &Path) -> Result<Vec<(String, String)>, String> {
    let Entries { entries, .. } = read_entries(path, |line, _| {
        entry_with(line, |head, _| {
            head.is_user_message()
                .then(|| {
                    head.message
                        .and_then(|m| serde_json::from_str::<Value>(m.get()).ok())
                })
                .flatten()
        })
    })?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            let text = message_text(&e.body?);
            (!text.is_empty()).then_some((e.id.to_string(), text))
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
    struct Kept {
        /// Copied to the new file as written.
        line: Vec<u8>,
        user_message: Option<Value>,
    }
    let Entries { entries, .. } = read_entries(path, |line, _| {
        entry_with(line, |head, line| Kept {
            line: line.to_vec(),
            user_message: head
                .is_user_message()
                .then(|| {
                    head.message
                        .and_then(|m| serde_json::from_str(m.get()).ok())
                })
                .flatten(),
        })
    })?;
    let Some((target, message)) = entries
        .iter()
        .filter(|e| e.id == entry_id)
        .find_map(|e| Some((e, e.body.user_message.as_ref()?)))
    else {
        return Err("Invalid entry ID for branching".into());
    };
    let text = message_text(message);
    let kept = path_to(&entries, target.parent.as_deref());
    let mut store = Store::create(dir, new_id, cwd, Some(&path.display().to_string()));
    store.ensure_on_disk()?;
    let new_path = store.path().map(Path::to_path_buf).unwrap_or_default();
    let mut file = OpenOptions::new()
        .append(true)
        .open(&new_path)
        .map_err(|e| e.to_string())?;
    for i in kept {
        let mut line = entries[i].body.line.clone();
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
        assert_eq!(loaded.context.len(), 2);
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

    /// Ids are usually eight hex digits, but older files use UUIDs (too long to keep inline) and a
    /// writer may escape characters; the path must be followed either way, and new ids appended.
    #[test]
    fn long_and_escaped_ids_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let uuid = "0192f0c4-3b1e-7c55-9a3e-5d2b1f4e8a01";
        let user = |text: &str| {
            format!(
                r#"{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"timestamp":0}}"#
            )
        };
        std::fs::write(
            &p,
            format!(
                "{{\"type\":\"session\",\"id\":\"s\"}}\n\
                 {{\"type\":\"message\",\"id\":\"{uuid}\",\"parentId\":null,\"message\":{}}}\n\
                 {{\"type\":\"message\",\"id\":\"b\\u0032\",\"parentId\":\"{uuid}\",\"message\":{}}}\n\
                 {{\"type\":\"message\",\"id\":\"c3\",\"parentId\":\"\\u00622\",\"message\":{}}}\n",
                user("one"),
                user("two"),
                user("three")
            ),
        )
        .unwrap();
        let mut loaded = load(&p).unwrap();
        assert_eq!(loaded.leaf.as_deref(), Some("c3"));
        assert_eq!(loaded.ids, [uuid, "b2", "c3"]);
        let texts: Vec<String> = loaded
            .context
            .messages()
            .unwrap()
            .iter()
            .map(|m| match m {
                AgentMessage::User(u) => match &u.content[..] {
                    [crate::protocol::message::Content::Text { text, .. }] => text.clone(),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["one", "two", "three"]);
        let mut store = Store::open(&p, &mut loaded).unwrap();
        let id = store
            .append_message(&AgentMessage::User(UserMessage::new("four", &[])))
            .unwrap();
        let reloaded = load(&p).unwrap();
        assert_eq!(reloaded.leaf, Some(id));
        assert_eq!(reloaded.context.len(), 4);
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
