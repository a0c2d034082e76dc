//! The gate store: one JSON file per session in the session folder under the agent dir
//! (`<session dir>/workflow-gates/<session id>.json`), rewritten whole on every change (written
//! aside, synced, renamed into place, the folder synced). A file that cannot be read is renamed
//! aside (`.corrupt-<ms>`) and reported; the counters are recovered from the gate ids still
//! legible in it, so no id is ever issued twice.
//!
//! The session id names the file, so it must match [`crate::ids::is_valid_id`]; the file is
//! read without following a link (and only when it is a regular file, at most
//! [`MAX_STORE_BYTES`]), and the `workflow-gates` folder must not be a link either: a store
//! that breaks one of these stays in memory, and the host is told.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fs::atomic;
use crate::fs::bounded::{self, Links};
use crate::ids::IdError;
use crate::protocol::gate::{GateResolution, WorkflowGate};

/// The folder of the stores in a session folder.
const FOLDER: &str = "workflow-gates";
/// A store larger than this is not read (gates are a few hundred bytes each).
pub const MAX_STORE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Accepted,
    /// Answered another way (the UI dialog) or abandoned by its producer (the tool call was
    /// cancelled): no longer listed nor answerable.
    Withdrawn,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub gate: WorkflowGate,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<GateResolution>,
    /// The waiting work was given the answer (or the session applied it, when nothing waited).
    #[serde(default)]
    pub advanced: bool,
    /// Who resolved it: `host` (a `workflow_gate_response`) or `extension_ui`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

impl Record {
    /// A gate just issued: pending, unanswered.
    pub fn pending(gate: WorkflowGate) -> Record {
        Record {
            gate,
            status: Status::Pending,
            idempotency_key: None,
            response_hash: None,
            answer: None,
            resolution: None,
            advanced: false,
            origin: None,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoreFile {
    #[serde(default = "version")]
    pub version: u32,
    /// The last sequence number issued per stage.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    #[serde(default)]
    pub gates: BTreeMap<String, Record>,
    /// The workflow stage in progress (`crate::workflow::StageState`), null when none.
    #[serde(default)]
    pub workflow: Value,
}

fn version() -> u32 {
    1
}

pub struct GateStore {
    path: Option<PathBuf>,
    pub data: StoreFile,
}

/// Why a gate store has no file or could not be written.
#[derive(Debug)]
pub enum GateError {
    /// The session id cannot name the store's file.
    NoStore(IdError),
    /// The folder or the file could not be written.
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    Encode(serde_json::Error),
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::NoStore(e) => write!(f, "no workflow gate store for this session: {e}"),
            GateError::Write { path, source } => write!(
                f,
                "cannot write the workflow gate store {}: {source}",
                path.display()
            ),
            GateError::Encode(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for GateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GateError::NoStore(e) => Some(e),
            GateError::Write { source, .. } => Some(source),
            GateError::Encode(e) => Some(e),
        }
    }
}

impl GateStore {
    pub fn in_memory() -> GateStore {
        GateStore {
            path: None,
            data: StoreFile {
                version: 1,
                ..StoreFile::default()
            },
        }
    }

    /// `<session dir>/workflow-gates/<session id>.json`, or why `session_id` cannot name it.
    pub fn path_for(session_dir: &Path, session_id: &str) -> Result<PathBuf, GateError> {
        crate::ids::join_id(&session_dir.join(FOLDER), session_id, ".json")
            .map_err(GateError::NoStore)
    }

    /// Loads the store at `path` (a missing file is an empty store). A corrupt file is moved
    /// aside; the second value then says where, for the host to be told.
    pub fn load(path: PathBuf) -> (GateStore, Option<String>) {
        let mut store = GateStore {
            path: Some(path.clone()),
            data: StoreFile {
                version: 1,
                ..StoreFile::default()
            },
        };
        let bytes = match bounded::read(&path, MAX_STORE_BYTES, Links::Refuse) {
            Ok(b) => b,
            // No store yet (or no session folder at all: a save will say why when a gate opens).
            Err(e) if e.is_not_found() => return (store, None),
            Err(e) => {
                let notice = format!(
                    "cannot read the workflow gate store {}: {e}",
                    path.display()
                );
                // Unreadable but present: writing over it would lose it, so stay in memory.
                store.path = None;
                return (store, Some(notice));
            }
        };
        match serde_json::from_slice::<StoreFile>(&bytes) {
            Ok(mut data) => {
                reconcile(&mut data);
                store.data = data;
                (store, None)
            }
            Err(e) => {
                store.data.counters = salvage_counters(&String::from_utf8_lossy(&bytes));
                let aside = path.with_extension(format!("json.corrupt-{}", crate::ids::now_ms()));
                let moved = std::fs::rename(&path, &aside);
                let notice = match moved {
                    Ok(()) => format!(
                        "the workflow gate store {} was corrupt ({e}); it was kept as {} and a new store started",
                        path.display(),
                        aside.display()
                    ),
                    Err(re) => {
                        store.path = None;
                        format!(
                            "the workflow gate store {} is corrupt ({e}) and could not be moved aside ({re}); gates of this session are kept in memory only",
                            path.display()
                        )
                    }
                };
                (store, Some(notice))
            }
        }
    }

    pub fn is_durable(&self) -> bool {
        self.path.is_some()
    }

    /// Writes the whole store atomically (private file, private folder).
    pub fn save(&self) -> Result<(), GateError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let failed = |source| GateError::Write {
            path: path.clone(),
            source,
        };
        if let Some(session_dir) = path.parent().and_then(Path::parent) {
            crate::fs::dirs::real_dir(session_dir, &[FOLDER]).map_err(failed)?;
        }
        let bytes = serde_json::to_vec_pretty(&self.data).map_err(GateError::Encode)?;
        atomic::replace(path, atomic::Options::PRIVATE, atomic::bytes(&bytes)).map_err(failed)
    }
}

/// The highest sequence number per stage among the gate ids found in `text`, and in what is
/// legible of its `counters` object. The counter is zero-padded to six digits but may be
/// wider, so every digit is read: reading only six would put a counter past 999,999 back to a
/// number already issued.
fn salvage_counters(text: &str) -> BTreeMap<String, u64> {
    let mut counters = BTreeMap::new();
    let ids = regex::Regex::new(r"wg_[A-Za-z0-9]{1,8}_(deep-interview|ralplan|ultragoal)_([0-9]+)")
        .expect("a valid pattern");
    let counted = regex::Regex::new(r#""(deep-interview|ralplan|ultragoal)"\s*:\s*([0-9]+)"#)
        .expect("a valid pattern");
    let found = ids.captures_iter(text).chain(counted.captures_iter(text));
    for c in found {
        // Too many digits for a counter: the stage is spent, nothing below it may be issued.
        let seq: u64 = c[2].parse().unwrap_or(u64::MAX);
        raise(&mut counters, &c[1], seq);
    }
    counters
}

/// Keeps the larger of the stage's counter and `seq`.
fn raise(counters: &mut BTreeMap<String, u64>, stage: &str, seq: u64) {
    let entry = counters.entry(stage.to_string()).or_insert(0);
    *entry = (*entry).max(seq);
}

/// The sequence number a gate id ends with, every digit of it.
pub fn seq_of(gate_id: &str) -> Option<(&str, u64)> {
    let (rest, digits) = gate_id.rsplit_once('_')?;
    let stage = rest.strip_prefix("wg_")?.split_once('_')?.1;
    Some((stage, digits.parse().ok()?))
}

/// A store whose counters lag behind its own gate ids (edited, or written by an older
/// version) still never issues an id twice: each counter is at least the highest it issued.
fn reconcile(data: &mut StoreFile) {
    let seen: Vec<(String, u64)> = data
        .gates
        .keys()
        .filter_map(|id| seq_of(id).map(|(stage, seq)| (stage.to_string(), seq)))
        .collect();
    for (stage, seq) in seen {
        raise(&mut data.counters, &stage, seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn saved_private_and_loaded_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = GateStore::path_for(tmp.path(), "s1").unwrap();
        let (mut store, notice) = GateStore::load(path.clone());
        assert!(notice.is_none());
        store.data.counters.insert("ralplan".into(), 3);
        store.save().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (back, _) = GateStore::load(path);
        assert_eq!(back.data.counters["ralplan"], 3);
    }

    #[test]
    fn a_corrupt_store_is_kept_aside_and_its_counters_recovered() {
        let tmp = tempfile::tempdir().unwrap();
        let path = GateStore::path_for(tmp.path(), "s1").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"gates\":{\"wg_abcd1234_ralplan_000007\": {tru").unwrap();
        let (store, notice) = GateStore::load(path.clone());
        assert!(notice.unwrap().contains("corrupt"));
        assert_eq!(store.data.counters["ralplan"], 7);
        assert!(!path.exists());
        let aside: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(aside.len(), 1);
    }

    #[test]
    fn counters_wider_than_six_digits_are_salvaged_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let path = GateStore::path_for(tmp.path(), "s1").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = "{\"counters\": {\"ultragoal\": 2000000, \"ralplan\": 12}, \"gates\": {\"wg_abcd1234_ralplan_1234567\": {\"gate\": {\"gate_id\": \"wg_abcd1234_deep-interview_99999999999999999999999\", tru";
        std::fs::write(&path, text).unwrap();
        let (store, notice) = GateStore::load(path);
        assert!(notice.unwrap().contains("corrupt"));
        let c = &store.data.counters;
        assert_eq!(c["ralplan"], 1_234_567);
        assert_eq!(c["ultragoal"], 2_000_000);
        assert_eq!(c["deep-interview"], u64::MAX, "too wide to count: spent");
    }

    #[test]
    fn counters_behind_their_own_gate_ids_catch_up_on_load() {
        let tmp = tempfile::tempdir().unwrap();
        let path = GateStore::path_for(tmp.path(), "s1").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (mut store, _) = GateStore::load(path.clone());
        store.data.counters.insert("ralplan".into(), 3);
        let gate: WorkflowGate = serde_json::from_value(serde_json::json!({
            "gate_id": "wg_abcd1234_ralplan_1000000", "stage": "ralplan", "kind": "approval",
            "schema": {"type": "object"}, "schema_hash": "00", "context": {},
            "created_at": "2026-01-01T00:00:00.000Z", "required": true}))
        .unwrap();
        let record = Record::pending(gate);
        store
            .data
            .gates
            .insert("wg_abcd1234_ralplan_1000000".into(), record);
        store.save().unwrap();
        let (back, _) = GateStore::load(path);
        assert_eq!(back.data.counters["ralplan"], 1_000_000);
        assert_eq!(
            seq_of("wg_abcd1234_deep-interview_000042"),
            Some(("deep-interview", 42))
        );
    }

    #[test]
    fn ids_that_leave_the_folder_name_no_store() {
        let tmp = tempfile::tempdir().unwrap();
        for id in ["/etc/x", "../../x", "..", "a/b", ""] {
            let err = GateStore::path_for(tmp.path(), id).unwrap_err();
            assert!(matches!(&err, GateError::NoStore(IdError::Invalid(bad)) if bad == id));
            assert!(err.to_string().contains("invalid id"), "{id:?}: {err}");
        }
    }

    #[test]
    fn a_planted_link_is_refused_and_nothing_outside_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("victim"), "keep").unwrap();
        // The store itself a link to a file elsewhere: not read, not written over.
        let session = tmp.path().join("session");
        let path = GateStore::path_for(&session, "s1").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), &path).unwrap();
        let (store, notice) = GateStore::load(path.clone());
        assert!(notice.unwrap().contains("symbolic link"));
        assert!(!store.is_durable());
        store.save().unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "keep"
        );
        // The folder a link: saving refuses it.
        let other = tmp.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::os::unix::fs::symlink(&outside, other.join("workflow-gates")).unwrap();
        let (store, notice) = GateStore::load(GateStore::path_for(&other, "s2").unwrap());
        assert!(notice.is_none());
        let err = store.save().unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(matches!(&err, GateError::Write { path, .. } if path.starts_with(&other)));
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    }
}
