//! Writing entries. Each entry becomes one whole line, queued, then written with a single
//! `write_all` together with anything still queued before it. A write that fails (a full disk, an
//! I/O error) may leave part of what it was writing; that part is cut off at once, so the file
//! always ends with a complete line, and the lines stay queued for the next append or sync that
//! succeeds. The host is told when saving stops and when it resumes.

use std::fs::OpenOptions;

use serde_json::json;

use super::error::{Step, StoreError};
use super::{format, write, EntryId, Store};
use crate::protocol::message::AgentMessage;

/// Queued lines beyond this many bytes are given up: memory is bounded even when the disk stays
/// full for the rest of a long run.
const MAX_PENDING: usize = 64 << 20;

#[derive(serde::Serialize)]
struct MessageFields<'a> {
    message: &'a AgentMessage,
}

/// Where the file ends and what is still to be written to it.
pub(super) struct Tail {
    /// The file's length after the last complete write; a failed write is cut back to it.
    good_len: u64,
    /// Whole lines not in the file yet, oldest first, each the child of the one before.
    pending: Vec<u8>,
    /// The last entry in the file (the leaf runs ahead of it while lines are queued).
    saved_leaf: Option<EntryId>,
    /// A failed write could not be cut back: nothing more is written until it is.
    needs_cut: bool,
    /// This process changed the file since it was last synced. A file only read (a session
    /// switched to) has nothing of ours to keep, and syncing it would wait for whatever its
    /// writer left in the page cache (tens of milliseconds at exit for a fresh long file).
    unsynced: bool,
    max_pending: usize,
}

impl Default for Tail {
    fn default() -> Tail {
        Tail {
            good_len: 0,
            pending: Vec::new(),
            saved_leaf: None,
            needs_cut: false,
            unsynced: false,
            max_pending: MAX_PENDING,
        }
    }
}

impl Tail {
    /// A file `len` bytes long whose last entry is `leaf`.
    pub fn at(len: u64, leaf: Option<EntryId>) -> Tail {
        Tail {
            good_len: len,
            saved_leaf: leaf,
            ..Tail::default()
        }
    }
}

/// Entries still queued are written before the store goes (a session replaced or ended).
impl Drop for Store {
    fn drop(&mut self) {
        if !self.tail.pending.is_empty() {
            self.write_queued();
        }
    }
}

/// Something the host should be told about the session file, as a `notice` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub level: &'static str,
    pub message: String,
}

impl Store {
    /// Creates the file with its header if it does not exist yet. Errors name the path.
    pub fn ensure_on_disk(&mut self) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if self.file.is_some() {
            return Ok(());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            write::create_dir(dir)?;
        }
        let mut file = write::create_file(path).map_err(StoreError::io(Step::CreateFile, path))?;
        let mut line = serde_json::to_vec(&self.header).map_err(StoreError::Encode)?;
        line.push(b'\n');
        if let Err(e) = write::append_all(&mut file, &line) {
            // The file is new and ours: remove what there is of it, so the next try starts clean.
            let _ = std::fs::remove_file(path);
            return Err(StoreError::io(Step::Write, path)(e));
        }
        self.tail.good_len = line.len() as u64;
        self.tail.unsynced = true;
        self.file = Some(file);
        Ok(())
    }

    /// Appends an entry of `kind` with `fields` (a map); returns its id. The entry is in the file
    /// when this returns, or queued behind a failed write (then `error` says why); `Err` means it
    /// was given up.
    pub fn append(
        &mut self,
        kind: &str,
        fields: impl serde::Serialize,
    ) -> Result<EntryId, StoreError> {
        let id = self.queue(kind, fields)?;
        self.settle().map(|()| id)
    }

    pub fn append_message(&mut self, message: &AgentMessage) -> Result<EntryId, StoreError> {
        self.append("message", MessageFields { message })
    }

    /// Queues a message entry without writing it: `write_queued` (or the next `append`)
    /// writes it with whatever else is queued. The session queues a step's entries and writes
    /// them after it has handed the next request to its thread, before the step's frames go
    /// out, so the file still has every entry a frame announces.
    pub fn queue_message(&mut self, message: &AgentMessage) -> Result<EntryId, StoreError> {
        self.queue("message", MessageFields { message })
    }

    /// Writes the queued entries (see `append` for a write that fails).
    pub fn write_queued(&mut self) {
        let _ = self.settle();
    }

    /// Makes the entry's line and queues it; returns its id.
    fn queue(&mut self, kind: &str, fields: impl serde::Serialize) -> Result<EntryId, StoreError> {
        let id = self.new_id();
        let at_ms = crate::ids::now_ms();
        self.last_kind = Some(kind.to_string());
        if kind == "compaction" {
            self.compacted_at = Some(at_ms);
        }
        if self.path.is_none() {
            self.leaf = Some(id.clone());
            return Ok(id);
        }
        let line = format::entry_line(kind, &id, self.leaf.as_deref(), at_ms, fields)
            .map_err(StoreError::Encode)?;
        self.tail.pending.extend_from_slice(&line);
        self.leaf = Some(id.clone());
        Ok(id)
    }

    /// Writes what is queued; a failure keeps it queued unless too much waits, which is
    /// given up (`Err`).
    fn settle(&mut self) -> Result<(), StoreError> {
        match self.flush() {
            Ok(()) => Ok(()),
            Err(_) if self.tail.pending.len() <= self.tail.max_pending => Ok(()),
            Err(e) => {
                self.give_up_pending();
                Err(e)
            }
        }
    }

    /// Sets the title in the header, rewriting the file atomically when it exists.
    pub fn set_title(&mut self, title: &str) -> Result<(), StoreError> {
        self.header["title"] = json!(title);
        self.header["titleSource"] = json!("user");
        let (Some(path), Some(_)) = (&self.path, &self.file) else {
            return Ok(());
        };
        let len = write::rewrite_header(path, &self.header, self.tail.good_len)
            .map_err(StoreError::io(Step::Rewrite, path))?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(StoreError::io(Step::Open, path))?;
        // The new file holds exactly the complete lines: nothing is left to cut.
        self.file = Some(file);
        self.tail.good_len = len;
        self.tail.needs_cut = false;
        Ok(())
    }

    /// Writes what is queued, then asks the disk to keep the file (before a session is left).
    pub fn sync(&mut self) {
        let _ = self.flush();
        if let Some(f) = self.file.as_ref().filter(|_| self.tail.unsynced) {
            if f.sync_data().is_ok() {
                self.tail.unsynced = false;
            }
        }
    }

    /// Like `sync`, but creates the file if there is none yet and fails instead of carrying on:
    /// a handoff checkpoint must not vouch for a file that lacks entries or is not on the disk.
    pub fn sync_or_fail(&mut self) -> Result<(), StoreError> {
        self.ensure_on_disk()?;
        self.flush()?;
        // Entries given up after failed writes are missing from the file even when the queue
        // is empty now; the error stays until a write succeeds.
        if let Some(e) = &self.error {
            return Err(StoreError::NotSaving(e.clone()));
        }
        let file = self.file.as_ref().ok_or(StoreError::NotOpen)?;
        file.sync_all()
            .map_err(StoreError::io_unnamed(Step::Sync))?;
        self.tail.unsynced = false;
        Ok(())
    }

    /// Writes the queued lines. Saving stopping and resuming are each noted for the host once.
    fn flush(&mut self) -> Result<(), StoreError> {
        if self.tail.pending.is_empty() {
            return Ok(());
        }
        let waiting = memchr::memchr_iter(b'\n', &self.tail.pending).count();
        let result = self.ensure_on_disk().and_then(|()| self.write_pending());
        match &result {
            Ok(()) => {
                if self.error.take().is_some() {
                    let message =
                        format!("The session is being saved again: {waiting} entries written");
                    log::warn!("{message}");
                    self.notify("info", message);
                }
            }
            Err(e) if self.error.is_none() => {
                log::error!("{e}");
                self.error = Some(e.to_string());
                self.notify("error", format!("The session is not being saved: {e}"));
            }
            Err(_) => {}
        }
        result
    }

    fn write_pending(&mut self) -> Result<(), StoreError> {
        let file = self.file.as_mut().ok_or(StoreError::NotOpen)?;
        let tail = &mut self.tail;
        tail.unsynced = true;
        if tail.needs_cut {
            file.set_len(tail.good_len)
                .map_err(StoreError::io_unnamed(Step::Cut))?;
            tail.needs_cut = false;
        }
        if let Err(e) = write::append_all(file, &tail.pending) {
            // Whatever part reached the file goes: it must end with a whole line, and the lines
            // are written again from the start.
            tail.needs_cut = file.set_len(tail.good_len).is_err();
            return Err(StoreError::io_unnamed(Step::Write)(e));
        }
        tail.good_len += tail.pending.len() as u64;
        if tail.pending.capacity() > 1 << 20 {
            tail.pending = Vec::new();
        } else {
            tail.pending.clear();
        }
        tail.saved_leaf = self.leaf.clone();
        Ok(())
    }

    /// Drops the queued lines (too many waited); the next entry hangs off the last saved one.
    fn give_up_pending(&mut self) {
        let lost = memchr::memchr_iter(b'\n', &self.tail.pending).count();
        self.tail.pending = Vec::new();
        self.leaf = self.tail.saved_leaf.clone();
        let message = format!(
            "{lost} entries waiting to be saved were dropped; the session file goes on from its last saved entry"
        );
        log::error!("{message}");
        self.notify("error", message);
    }
}

#[cfg(test)]
mod tests {
    use super::super::load::load;
    use super::super::testing::{saved, texts, user};
    use super::super::write::test_disk;

    /// Queued messages reach the file with the next write, in order and chained, and a store
    /// dropped with messages still queued writes them.
    #[test]
    fn queued_messages_are_written_by_the_next_write_or_the_drop() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one"]);
        s.queue_message(&user("two")).unwrap();
        s.queue_message(&user("three")).unwrap();
        assert_eq!(texts(&path), ["one"], "queued, not written yet");
        s.write_queued();
        assert_eq!(texts(&path), ["one", "two", "three"]);
        s.queue_message(&user("four")).unwrap();
        drop(s);
        assert_eq!(texts(&path), ["one", "two", "three", "four"]);
    }

    /// A write cut short by a full disk leaves the file loadable, keeps the entry queued, and
    /// the first write after space is freed puts it back in order and clears the error.
    #[test]
    fn a_full_disk_leaves_whole_lines_and_saving_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one"]);
        let size = std::fs::metadata(&path).unwrap().len();
        test_disk::fill(10);
        let queued = s.append_message(&user(&"x".repeat(500)));
        assert!(queued.is_ok(), "queued, not given up: {queued:?}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size, "cut back");
        assert_eq!(texts(&path), ["one"]);
        assert!(s.error.as_deref().unwrap().contains("No space left"));
        let failed = s.take_notices();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].level, "error");
        s.append_message(&user("three")).unwrap();
        assert!(s.take_notices().is_empty(), "the failure is told once");
        test_disk::free();
        s.append_message(&user("four")).unwrap();
        assert_eq!(s.error, None);
        let resumed = s.take_notices();
        assert_eq!(resumed.len(), 1);
        assert_eq!(resumed[0].level, "info");
        assert!(
            resumed[0].message.contains("3 entries written"),
            "{resumed:?}"
        );
        assert_eq!(texts(&path), ["one", &"x".repeat(500), "three", "four"]);
    }

    /// A header cut short is removed, so the next attempt writes a whole one.
    #[test]
    fn a_failed_creation_leaves_no_half_header() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &[]);
        test_disk::fill(5);
        assert!(s.ensure_on_disk().is_err());
        assert!(!path.exists());
        s.append_message(&user("one")).unwrap();
        test_disk::free();
        s.append_message(&user("two")).unwrap();
        assert_eq!(texts(&path), ["one", "two"]);
    }

    /// Past the bound, queued entries are dropped and the chain goes on from the saved leaf.
    #[test]
    fn queued_entries_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one"]);
        s.tail.max_pending = 300;
        test_disk::fill(0);
        s.append_message(&user("two")).unwrap();
        assert!(s.append_message(&user(&"y".repeat(400))).is_err());
        let notices = s.take_notices();
        assert!(notices[1].message.starts_with("2 entries"), "{notices:?}");
        test_disk::free();
        s.append_message(&user("four")).unwrap();
        assert_eq!(texts(&path), ["one", "four"]);
    }

    /// Only what this process wrote is synced: a file opened and left untouched is not.
    #[test]
    fn sync_waits_only_for_what_was_written_here() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one"]);
        assert!(s.tail.unsynced, "a new file is ours to sync");
        s.sync();
        assert!(!s.tail.unsynced);
        let mut opened = super::Store::open(&path, &mut load(&path).unwrap()).unwrap();
        assert!(!opened.tail.unsynced, "opening writes nothing");
        opened.append_message(&user("two")).unwrap();
        assert!(opened.tail.unsynced);
        opened.sync();
        assert!(!opened.tail.unsynced);
        assert_eq!(texts(&path), ["one", "two"]);
    }

    /// The header rewrite keeps only complete lines and leaves a private file.
    #[test]
    fn renaming_keeps_the_entries_and_the_file_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one"]);
        s.set_title("named").unwrap();
        s.append_message(&user("two")).unwrap();
        assert_eq!(texts(&path), ["one", "two"]);
        assert_eq!(load(&path).unwrap().header["title"], "named");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
    }
}
