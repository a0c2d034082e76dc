//! The session file format: the header, how an entry line is written, and what the readers take
//! from a line (the fields every entry has, a message left as raw JSON).

use std::path::Path;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::EntryId;

pub(super) fn header(id: &str, cwd: &Path, parent: Option<&str>) -> Value {
    let mut h = json!({"type": "session", "version": 3, "id": id, "timestamp": crate::ids::iso_now(), "cwd": cwd.display().to_string()});
    if let Some(p) = parent {
        h["parentSession"] = json!(p);
    }
    h
}

/// One entry as a whole line, newline included. Lines are written from typed values in
/// declaration order, so a message's `role` and each block's `type` come first, which is what the
/// loader reads fastest (`protocol::tagged`).
pub(super) fn entry_line(
    kind: &str,
    id: &str,
    parent: Option<&str>,
    at_ms: u64,
    fields: impl serde::Serialize,
) -> serde_json::Result<Vec<u8>> {
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
    let entry = EntryLine {
        kind,
        id,
        parent_id: parent,
        timestamp: crate::ids::iso_from_ms(at_ms),
        fields,
    };
    let mut line = serde_json::to_vec(&entry)?;
    line.push(b'\n');
    Ok(line)
}

/// One entry of a session file: the fields every entry has, and what the reader kept of the rest.
pub(super) struct Entry<B> {
    pub id: EntryId,
    pub parent: Option<EntryId>,
    pub body: B,
}

/// The fields every entry line has; a message is left as raw JSON for the caller to read.
#[derive(serde::Deserialize)]
pub(super) struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    pub id: Option<EntryId>,
    #[serde(rename = "parentId", default)]
    pub parent: Option<EntryId>,
    #[serde(borrow, default)]
    pub message: Option<&'a RawValue>,
}

impl Head<'_> {
    pub fn is_user_message(&self) -> bool {
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

    /// The message of a user message entry, parsed as a value.
    pub fn user_message(&self) -> Option<Value> {
        self.is_user_message()
            .then(|| {
                self.message
                    .and_then(|m| serde_json::from_str(m.get()).ok())
            })
            .flatten()
    }
}

/// Reads an entry line's head and keeps what `keep` makes of it.
pub(super) fn entry_with<B>(
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

/// The text of a message value: a string content, or its text blocks joined.
pub(super) fn message_text(m: &Value) -> String {
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

/// Milliseconds since the epoch of an entry timestamp (`2026-06-05T05:00:00.000Z`).
pub(super) use crate::ids::ms_from_iso;
