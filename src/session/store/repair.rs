//! Making a loaded file safe to append to. Loading skips a torn last line, but the next entry
//! appended after it would share its line and make the whole file unreadable; so the file is cut
//! back to its last complete line before anything is appended, and a last line that lacks its
//! newline gets one.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// What opening a file for appending changed in it (reported to the host, then forgotten).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repair {
    /// Bytes of a torn last line that were cut off.
    pub dropped_bytes: u64,
    /// A newline was added after a last line that was complete but lacked one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub added_newline: bool,
}

impl Repair {
    pub fn describe(&self, path: &Path) -> String {
        if self.dropped_bytes > 0 {
            format!(
                "{}: dropped a torn last line ({} bytes) so that new entries start on a line of their own",
                path.display(),
                self.dropped_bytes
            )
        } else {
            format!(
                "{}: ended the last line, which lacked its newline",
                path.display()
            )
        }
    }
}

/// Cuts a torn last line (starting at `torn_at`, found when the file was `loaded_len` long) off
/// `file`, opened for appending, and ends an unfinished last line. Returns the file's length
/// afterwards and what was changed, if anything; a change is synced before anything is appended.
pub(super) fn repair_tail(
    file: &mut File,
    loaded_len: u64,
    torn_at: Option<u64>,
) -> io::Result<(u64, Option<Repair>)> {
    let mut len = file.metadata()?.len();
    let mut repair = None;
    if let Some(at) = torn_at {
        if len != loaded_len {
            // Someone else wrote to it since it was read: what is torn now is unknown.
            return Err(io::Error::other(
                "the file changed while it was being loaded; try again",
            ));
        }
        file.set_len(at)?;
        repair = Some(Repair {
            dropped_bytes: len - at,
            added_newline: false,
        });
        len = at;
    }
    let mut last = [0u8];
    if len > 0 {
        file.read_exact_at(&mut last, len - 1)?;
    }
    if len > 0 && last[0] != b'\n' {
        file.write_all(b"\n")?;
        len += 1;
        repair.get_or_insert_with(Repair::default).added_newline = true;
    }
    if repair.is_some() {
        file.sync_data()?;
    }
    Ok((len, repair))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::testing::{saved, texts, user};
    use super::super::{load, Store};

    fn append_raw(path: &std::path::Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(bytes).unwrap();
    }

    /// A session with a torn last line is cut back when opened, so what is appended next lands
    /// on a line of its own and the file still loads.
    #[test]
    fn a_torn_last_line_is_cut_off_before_appending() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = saved(dir.path(), &["one"]);
        let torn = b"{\"type\":\"message\",\"id\":\"to";
        append_raw(&path, torn);
        let mut loaded = load(&path).unwrap();
        let mut store = Store::open(&path, &mut loaded).unwrap();
        assert_eq!(store.repaired().unwrap().dropped_bytes, torn.len() as u64);
        let notices = store.take_notices();
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].level, "warning");
        store.append_message(&user("two")).unwrap();
        assert_eq!(texts(&path), ["one", "two"]);
        let mut again = load(&path).unwrap();
        assert_eq!(again.torn_at, None);
        assert_eq!(Store::open(&path, &mut again).unwrap().repaired(), None);
    }

    /// A complete last line without its newline is ended, not dropped.
    #[test]
    fn a_last_line_without_newline_is_ended() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = saved(dir.path(), &["one"]);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let mut loaded = load(&path).unwrap();
        let mut store = Store::open(&path, &mut loaded).unwrap();
        let repair = store.repaired().unwrap();
        assert_eq!((repair.dropped_bytes, repair.added_newline), (0, true));
        store.append_message(&user("two")).unwrap();
        assert_eq!(texts(&path), ["one", "two"]);
    }

    /// A file that grew after it was read is not cut on the strength of the old reading.
    #[test]
    fn a_file_that_changed_since_loading_is_not_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = saved(dir.path(), &["one"]);
        append_raw(&path, b"{\"torn");
        let mut loaded = load(&path).unwrap();
        append_raw(&path, b"\":1}\n");
        let err = Store::open(&path, &mut loaded).err().unwrap();
        assert!(
            err.to_string()
                .contains("changed while it was being loaded"),
            "{err}"
        );
        assert!(std::fs::read(&path).unwrap().ends_with(b"{\"torn\":1}\n"));
    }
}
