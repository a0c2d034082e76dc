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
) -> Result<Vec<u8>, String> {
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
    let mut line = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
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

/// Milliseconds since the epoch of an entry timestamp (`2026-06-05T05:00:00.000Z`, fraction
/// optional, UTC only), the form gjc and the reference write.
pub(super) fn ms_from_iso(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| num_str(s.get(from..from + len)?);
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if b.len() < 20 || separators.iter().any(|&(i, c)| b[i] != c) || b[b.len() - 1] != b'Z' {
        return None;
    }
    let (y, m, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, min, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let millis = match &s[19..s.len() - 1] {
        "" => 0,
        frac => {
            let digits = frac.strip_prefix('.')?;
            let padded = format!("{:0<3}", digits.get(..digits.len().min(3))?);
            num_str(&padded)?
        }
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || min > 59 || sec > 60 {
        return None;
    }
    let secs = days_from_civil(y, m, d) * 86_400 + h * 3600 + min * 60 + sec;
    u64::try_from(secs * 1000 + millis).ok()
}

/// A run of ASCII digits (no sign, unlike `str::parse`).
fn num_str(s: &str) -> Option<i64> {
    s.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| s.parse().ok())?
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of `ids::civil_from_days`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_timestamps_read_back_to_their_milliseconds() {
        for ms in [0, 951_782_400_123, 1_700_000_000_000, 4_102_444_800_999] {
            assert_eq!(ms_from_iso(&crate::ids::iso_from_ms(ms)), Some(ms));
        }
        assert_eq!(ms_from_iso("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(ms_from_iso("1970-01-01T00:00:00.5Z"), Some(500));
        for bad in [
            "",
            "2026-06-05",
            "2026-06-05T05:00:00.000",
            "2026-13-05T05:00:00Z",
        ] {
            assert_eq!(ms_from_iso(bad), None, "{bad}");
        }
    }
}
