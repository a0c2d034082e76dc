//! Reading a session file through: the header, every entry (a corrupt line other than the last is
//! an error, a torn last line is skipped), and the context along the path from the last entry to
//! the root.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde_json::Value;

use super::error::{Step, StoreError};
use super::format::{entry_with, ms_from_iso, Entry};
use super::EntryId;
use crate::protocol::message::{AgentMessage, CompactionSummaryMessage};
use crate::session::context::{Context, Item, Span, Stamp};
use crate::session::scan::{scan, Lines, ScanError};

/// A loaded session: its header, the context along the current path, the model and thinking
/// level the path last set, and the leaf.
#[derive(Debug)]
pub struct Loaded {
    pub header: Value,
    pub context: Context,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub leaf: Option<EntryId>,
    /// The entry ids in the file (all branches) that a new id could collide with.
    pub ids: super::Taken,
    /// The file's length when it was read.
    pub len: u64,
    /// Where a torn last line starts (it was skipped); appending must cut it off first.
    pub torn_at: Option<u64>,
    /// When the last compaction on the path was written (milliseconds since the epoch).
    pub compacted_at: Option<u64>,
    /// The rules that fired along the path (`ttsr_injection` entries).
    pub ttsr: crate::rules::Injections,
}

/// A session file read through: its header, its entries, where a skipped torn last line starts,
/// and the file, still open.
pub(super) struct Entries<B> {
    pub header: Value,
    pub entries: Vec<Entry<B>>,
    pub torn_at: Option<u64>,
    pub file: File,
    /// The file's stamp and length from before it was read.
    pub stamp: Option<Stamp>,
    pub len: u64,
}

/// Reads a session file: checks the header, then hands each entry line to `parse` (on several
/// threads for a long file, see [`crate::session::scan`]). A line that does not parse is a torn
/// write when it is the last one (skipped with a warning) and corruption anywhere else.
pub(super) fn read_entries<B: Send>(
    path: &Path,
    parse: impl Fn(&[u8], u64) -> serde_json::Result<Entry<B>> + Sync,
) -> Result<Entries<B>, StoreError> {
    let file = super::list::open_regular(path).map_err(StoreError::io(Step::OpenSession, path))?;
    let metadata = file.metadata().map_err(StoreError::io(Step::Read, path))?;
    let (stamp, len) = (Some(Stamp::from_metadata(&metadata)), metadata.len());
    let mut lines = Lines::new(&file, 0, len);
    if !lines.advance().map_err(StoreError::io(Step::Read, path))? {
        return Err(StoreError::Empty(path.to_path_buf()));
    }
    let not_session = |detail: String| StoreError::NotSession {
        path: path.to_path_buf(),
        detail,
    };
    let header: Value =
        serde_json::from_slice(&lines.line).map_err(|e| not_session(e.to_string()))?;
    if header["type"] != "session" {
        return Err(not_session("the first line is not a session header".into()));
    }
    // The id becomes the session's and names its files (gate store, registry record).
    if let Some(id) = header.get("id") {
        match id.as_str() {
            Some(id) if crate::ids::is_valid_id(id) => {}
            _ => {
                let id = id.as_str().map_or_else(|| id.to_string(), str::to_string);
                return Err(StoreError::BadId {
                    path: path.to_path_buf(),
                    id,
                });
            }
        }
    }
    let scanned = match scan(&file, lines.position(), len, &parse) {
        Ok(scanned) => scanned,
        Err(ScanError::Io(detail)) => {
            return Err(StoreError::Scan {
                path: path.to_path_buf(),
                detail,
            })
        }
        Err(ScanError::Corrupt { line, error }) => {
            // The header is line 1.
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                line: line + 1,
                detail: error,
            });
        }
    };
    let torn_at = match scanned.torn {
        Some(torn) => {
            log::warn!(
                "{}: skipping a torn last line ({torn} bytes)",
                path.display()
            );
            Some(last_line_start(&file, len).map_err(StoreError::io(Step::Read, path))?)
        }
        None => None,
    };
    Ok(Entries {
        header,
        entries: scanned.items,
        torn_at,
        file,
        stamp,
        len,
    })
}

/// Where the last line holding anything but white space starts. When the scan found a torn last
/// line, that is the torn line: only blank lines may follow it.
fn last_line_start(file: &File, len: u64) -> std::io::Result<u64> {
    let mut block = vec![0u8; 64 * 1024];
    let (mut end, mut in_text) = (len, false);
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let buf = &mut block[..(end - start) as usize];
        file.read_exact_at(buf, start)?;
        for (i, &b) in buf.iter().enumerate().rev() {
            if in_text && b == b'\n' {
                return Ok(start + i as u64 + 1);
            }
            in_text |= !b.is_ascii_whitespace();
        }
        end = start;
    }
    Ok(0)
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

/// The context being rebuilt along the path: messages, their entry ids, and where the entries a
/// compaction may keep sit among them.
struct PathContext {
    messages: Vec<Item>,
    ids: Vec<Option<EntryId>>,
    kept_index: HashMap<EntryId, usize>,
}

impl PathContext {
    /// Only the messages from `firstKeptEntryId` on survive a compaction, after its summary.
    fn compact(&mut self, id: &EntryId, entry: &Value, at_ms: u64) {
        let first = entry["firstKeptEntryId"].as_str().unwrap_or("");
        let kept_from = self
            .kept_index
            .get(first)
            .copied()
            .unwrap_or(self.messages.len());
        let kept: Vec<Item> = self.messages.drain(kept_from..).collect();
        let kept_ids: Vec<Option<EntryId>> =
            self.ids.drain(kept_from.min(self.ids.len())..).collect();
        self.messages.clear();
        self.ids.clear();
        self.ids.push(Some(id.clone()));
        self.ids.extend(kept_ids);
        self.messages
            .push(Item::Parsed(Box::new(AgentMessage::CompactionSummary(
                CompactionSummaryMessage {
                    summary: entry["summary"].as_str().unwrap_or("").to_string(),
                    tokens_before: entry["tokensBefore"].as_u64().unwrap_or(0),
                    timestamp: at_ms,
                },
            ))));
        self.messages.extend(kept);
        // Kept entries now count from just after the summary; the rest were summarised.
        self.kept_index.retain(|_, pos| *pos >= kept_from);
        self.kept_index
            .values_mut()
            .for_each(|pos| *pos = *pos - kept_from + 1);
    }
}

/// Loads a session: the context is the path from the last entry back to the root.
pub fn load(path: &Path) -> Result<Loaded, StoreError> {
    let Entries {
        header,
        mut entries,
        torn_at,
        file,
        stamp,
        len,
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
    let (mut model, mut thinking, mut compacted_at) = (None, None, None);
    let mut ttsr = crate::rules::Injections::default();
    let mut context = PathContext {
        messages: Vec::with_capacity(path_indices.len()),
        ids: Vec::with_capacity(path_indices.len()),
        kept_index: HashMap::new(),
    };
    for i in path_indices {
        let e = &mut entries[i];
        if first_kept.contains(&e.id) {
            context
                .kept_index
                .insert(e.id.clone(), context.messages.len());
        }
        let body = std::mem::replace(&mut e.body, Loadable::Other(Value::Null));
        let v = match body {
            Loadable::Message(Some(m)) => {
                context.messages.push(m);
                context.ids.push(Some(e.id.clone()));
                continue;
            }
            Loadable::Message(None) => continue,
            Loadable::Other(v) => v,
        };
        match v["type"].as_str().unwrap_or("") {
            "model_change" => model = v["model"].as_str().map(str::to_string),
            "thinking_level_change" => thinking = v["thinkingLevel"].as_str().map(str::to_string),
            "compaction" => {
                let at = v["timestamp"].as_str().and_then(ms_from_iso);
                compacted_at = Some(at.unwrap_or(0));
                context.compact(&e.id, &v, at.unwrap_or(0));
            }
            "ttsr_injection" => ttsr.restore(&v),
            _ => {}
        }
    }
    let ids = super::Taken::from_loaded(entries.iter().map(|e| &e.id));
    // Freed now, while the switch runs, rather than held until exit: it is the largest block
    // the load made (an id, a parent and a body per entry).
    drop(entries);
    Ok(Loaded {
        header,
        context: Context::from_file(file, stamp, context.messages, context.ids),
        model,
        thinking,
        leaf,
        ids,
        len,
        torn_at,
        compacted_at,
        ttsr,
    })
}

/// The indices of the entries from the root to `leaf`, in order.
pub(super) fn path_to<B>(entries: &[Entry<B>], leaf: Option<&str>) -> Vec<usize> {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{saved, texts, user};
    use super::*;
    use crate::session::store::Store;
    use serde_json::json;
    use std::io::Write;

    #[test]
    fn append_load_and_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one"]);
        s.append("thinking_level_change", json!({"thinkingLevel": "high"}))
            .unwrap();
        s.append_message(&user("two")).unwrap();
        let complete = std::fs::metadata(&path).unwrap().len();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"type\":\"message\",\"id\":\"x\",\"par  \n \n")
            .unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.torn_at, Some(complete), "the torn line starts there");
        assert_eq!(loaded.thinking.as_deref(), Some("high"));
        assert_eq!(texts(&path), ["one", "two"]);
        assert_eq!(super::super::user_messages(&path).unwrap().len(), 2);
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
        let e = load(&p).unwrap_err();
        assert!(e.to_string().contains("corrupt at line 2"), "{e}");
        assert!(matches!(e, StoreError::Corrupt { line: 2, .. }), "{e:?}");
        std::fs::write(&p, "garbage\n").unwrap();
        assert!(load(&p).is_err());
    }

    /// Each way a file fails to load is its own variant, carrying the path (and the io error).
    #[test]
    fn load_failures_say_what_failed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let e = load(&p).err().unwrap();
        assert!(
            matches!(&e, StoreError::Io { step: Step::OpenSession, path: Some(at), source }
                if at == &p && source.kind() == std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("cannot open session "), "{e}");
        std::fs::write(&p, "").unwrap();
        assert!(matches!(load(&p), Err(StoreError::Empty(at)) if at == p));
        std::fs::write(&p, "{\"type\":\"session\",\"id\":\"../x\"}\n").unwrap();
        let e = load(&p).err().unwrap();
        assert!(
            matches!(&e, StoreError::BadId { id, .. } if id == "../x"),
            "{e:?}"
        );
        assert!(e
            .to_string()
            .contains("is not a session file gjc opens: invalid header id"));
        std::fs::write(&p, "{\"type\":\"message\"}\n").unwrap();
        let e = load(&p).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is not a session file: the first line is not a session header",
                p.display()
            )
        );
    }

    /// Ids are usually eight hex digits, but older files use UUIDs (too long to keep inline) and a
    /// writer may escape characters; the path must be followed either way, and new ids appended.
    #[test]
    fn long_and_escaped_ids_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let uuid = "0192f0c4-3b1e-7c55-9a3e-5d2b1f4e8a01";
        let body = |text: &str| {
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
                body("one"),
                body("two"),
                body("three")
            ),
        )
        .unwrap();
        let mut loaded = load(&p).unwrap();
        assert_eq!(loaded.leaf.as_deref(), Some("c3"));
        assert_eq!(texts(&p), ["one", "two", "three"]);
        let mut store = Store::open(&p, &mut loaded).unwrap();
        let id = store.append_message(&user("four")).unwrap();
        let reloaded = load(&p).unwrap();
        assert_eq!(reloaded.leaf, Some(id));
        assert_eq!(reloaded.context.len(), 4);
    }

    /// The summary and the time of the last compaction on the path come back from the file.
    #[test]
    fn compaction_time_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &[]);
        let first = s.append_message(&user("one")).unwrap();
        s.append_message(&user("two")).unwrap();
        s.append(
            "compaction",
            json!({"summary": "S", "firstKeptEntryId": first, "tokensBefore": 9}),
        )
        .unwrap();
        let at = s.compacted_at().expect("the store notes its compaction");
        let mut loaded = load(&path).unwrap();
        assert_eq!(loaded.compacted_at, Some(at));
        let messages = loaded.context.messages().unwrap();
        assert_eq!(messages.len(), 3, "summary, one, two");
        assert!(
            matches!(&messages[0], AgentMessage::CompactionSummary(c) if c.timestamp == at && c.summary == "S")
        );
    }
}
