//! Session files: append-only JSONL in the reference's format (a `session` header line, then
//! entries with `id`/`parentId` forming a tree).
//!
//! - `format`: the header, entry lines, and what readers take from a line.
//! - `append`: writing entries, and getting back on track after a failed write.
//! - `write`: how bytes reach the disk (private files, whole-line appends, atomic replacement).
//! - `repair`: cutting a torn last line off a loaded file before appending to it.
//! - `load`: reading a file through and rebuilding the context along the current path.
//! - `branch`: user messages and branching into a new file.
//! - `list`: session folders and `list_sessions` summaries.
//! - `taken`: the entry ids in use, so that new ones are unique.
//! - `handoff`: the file synced with its folder and hashed, for a handoff checkpoint.

mod append;
mod branch;
mod error;
mod format;
mod handoff;
mod list;
mod load;
mod repair;
mod taken;
#[cfg(test)]
mod testing;
pub(crate) mod write;

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use append::Notice;
pub use branch::{branch, user_messages};
pub use error::{Step, StoreError};
pub use list::{cwd_dir, find, folders, list, stored_in, summary, Stored};
pub use load::{load, Loaded};
pub use repair::Repair;
pub use taken::{hex_id, Taken};

/// An entry's id. gjc and the reference write eight hex digits, which this keeps inline: loading
/// a long session makes no allocation per entry for ids, and copying one costs nothing.
pub type EntryId = smol_str::SmolStr;

pub struct Store {
    /// `None` with `--no-session`.
    path: Option<PathBuf>,
    file: Option<File>,
    pub header: Value,
    /// The last entry appended; its line may still be waiting in `tail.pending`.
    leaf: Option<EntryId>,
    ids: Taken,
    /// Why the last write failed; cleared by the next write that succeeds.
    pub error: Option<String>,
    /// The type of the last entry appended (a second `compact` in a row is refused).
    pub last_kind: Option<String>,
    tail: append::Tail,
    /// What the host has not been told yet (failed and resumed saving, a repaired file).
    notices: Vec<Notice>,
    /// What opening the file changed in it.
    repaired: Option<Repair>,
    /// When the last compaction on the current path was written (milliseconds since the epoch).
    compacted_at: Option<u64>,
    /// Which rules fired in this session; it goes with the file, so a new or switched session
    /// starts from what its own file says.
    pub ttsr: crate::rules::Injections,
}

impl Store {
    fn new(path: Option<PathBuf>, header: Value) -> Store {
        Store {
            path,
            file: None,
            header,
            leaf: None,
            ids: Taken::default(),
            error: None,
            last_kind: None,
            tail: append::Tail::default(),
            notices: Vec::new(),
            repaired: None,
            compacted_at: None,
            ttsr: Default::default(),
        }
    }

    pub fn in_memory(id: &str, cwd: &Path) -> Store {
        Store::new(None, format::header(id, cwd, None))
    }

    /// A new session file in `dir` (created when the first entry is written).
    pub fn create(dir: &Path, id: &str, cwd: &Path, parent: Option<&str>) -> Store {
        let header = format::header(id, cwd, parent);
        let ts = header["timestamp"]
            .as_str()
            .unwrap_or("")
            .replace([':', '.'], "-");
        let path = dir.join(format!("{ts}_{id}.jsonl"));
        Store::new(Some(path), header)
    }

    /// Appends to a loaded session file; takes the loaded entry ids over. A torn last line is cut
    /// off first (see [`repair`]); [`Store::repaired`] and a notice tell what changed.
    pub fn open(path: &Path, loaded: &mut Loaded) -> Result<Store, StoreError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(StoreError::io(Step::Open, path))?;
        let (len, repaired) = repair::repair_tail(&mut file, loaded.len, loaded.torn_at)
            .map_err(StoreError::io(Step::Repair, path))?;
        let mut store = Store::new(Some(path.to_path_buf()), loaded.header.clone());
        store.file = Some(file);
        store.leaf = loaded.leaf.clone();
        store.ids = std::mem::take(&mut loaded.ids);
        store.tail = append::Tail::at(len, loaded.leaf.clone());
        store.compacted_at = loaded.compacted_at;
        store.ttsr = std::mem::take(&mut loaded.ttsr);
        if let Some(r) = repaired {
            log::warn!("{}", r.describe(path));
            store.notify("warning", r.describe(path));
        }
        store.repaired = repaired;
        Ok(store)
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

    /// What opening the file changed in it (a torn last line cut off), for the host.
    pub fn repaired(&self) -> Option<Repair> {
        self.repaired
    }

    /// When the last compaction on the current path was written (milliseconds since the epoch):
    /// model usage reported before then counted a context that no longer exists.
    pub fn compacted_at(&self) -> Option<u64> {
        self.compacted_at
    }

    /// The notices the host has not been given yet, oldest first; each is handed out once.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    fn notify(&mut self, level: &'static str, message: String) {
        // Only changes of state are noted; the cap keeps a host that never asks from growing it.
        if self.notices.len() >= 8 {
            self.notices.remove(0);
        }
        self.notices.push(Notice { level, message });
    }

    fn new_id(&mut self) -> EntryId {
        self.ids.make(|| crate::ids::next_u64() as u32)
    }
}
