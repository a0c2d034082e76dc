//! Whole-file replacement, one way for every writer (session files, gate stores, the registry,
//! the trust store, the file tools): the new content goes to a temporary file beside the target,
//! created exclusively and never through a link (`O_EXCL | O_NOFOLLOW`), is synced when the
//! caller wants it durable, and is renamed over the target; then the folder is synced. A reader
//! sees the old file or the new one, never a mix, and a failure leaves the target as it was and
//! no temporary file behind.
//!
//! A link at the target is replaced by the rename, never written through: callers that mean to
//! write through a link resolve it first (the file tools), or confine the write beneath a root
//! (`beneath.rs`, which shares [`write_temp`] for the content and its mode).

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// How far a replacement is made to last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The rename alone: a crash of gjc leaves the old file or the new one; after a power loss
    /// either may be lost. For records that are stale after a reboot anyway (the registry).
    Renamed,
    /// The file synced before the rename, the folder after it; a folder that cannot be synced
    /// is an error (session files, gate stores, the trust store).
    Synced,
    /// As `Synced`, but a failed folder sync is ignored: the rename happened and nothing written
    /// is lost (the file tools, whose callers see the file changed either way).
    SyncedFolderBestEffort,
}

/// The new file's mode, owner and durability.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// `None`: private (created 0600, less the umask); `Some`: exactly this mode.
    pub mode: Option<u32>,
    /// The owner to give the new file (only root may give a file away; others keep their own).
    pub owner: Option<(u32, u32)>,
    pub durability: Durability,
}

impl Options {
    /// A private file, synced with its folder.
    pub const PRIVATE: Options = Options {
        mode: None,
        owner: None,
        durability: Durability::Synced,
    };

    /// A file that takes the place of `old` keeps its mode and owner; a new one gets the mode
    /// `open` would have given it (0666 less the umask).
    pub fn like(old: Option<&Metadata>, durability: Durability) -> Options {
        Options {
            mode: Some(old.map_or_else(|| 0o666 & !umask(), |m| m.mode() & 0o7777)),
            owner: old.map(|m| (m.uid(), m.gid())),
            durability,
        }
    }
}

/// Replaces `path` with what `fill` writes (see the module's description). `fill` may fail; the
/// target is then untouched and the temporary file removed.
pub fn replace(
    path: &Path,
    options: Options,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let tmp = dir.join(temp_name(&name));
    let renamed = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .and_then(|file| write_temp(file, options, fill))
        .and_then(|()| std::fs::rename(&tmp, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return renamed;
    }
    // The rename is durable once the folder is.
    let sync_folder = || File::open(dir).and_then(|d| d.sync_all());
    match options.durability {
        Durability::Renamed => Ok(()),
        Durability::Synced => sync_folder(),
        Durability::SyncedFolderBestEffort => {
            let _ = sync_folder();
            Ok(())
        }
    }
}

/// Fills a freshly created temporary file, gives it its owner and mode, and syncs it unless
/// only the rename is asked for.
pub fn write_temp(
    file: File,
    options: Options,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut out = BufWriter::new(file);
    fill(&mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    if let Some((uid, gid)) = options.owner {
        // Only root may give a file away; for anyone else the owner is already right.
        let _ = std::os::unix::fs::fchown(&file, Some(uid), Some(gid));
    }
    if let Some(mode) = options.mode {
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    if options.durability != Durability::Renamed {
        file.sync_all()?;
    }
    Ok(())
}

/// Writes `bytes` as the whole content (for [`replace`] and [`write_temp`]).
pub fn bytes(bytes: &[u8]) -> impl FnOnce(&mut BufWriter<File>) -> io::Result<()> + '_ {
    move |out| out.write_all(bytes)
}

/// A private temporary name beside `name`. A name near the 255-byte limit must still leave room
/// for the suffix.
pub fn temp_name(name: &str) -> String {
    let mut short = name.len().min(200);
    while !name.is_char_boundary(short) {
        short -= 1;
    }
    format!(".{}.gjc-{}.tmp", &name[..short], crate::ids::short_id())
}

/// The process umask, read from `/proc` because `umask(2)` can only be read by changing it,
/// which would race with other threads creating files.
pub fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_whole_file_and_leaves_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, "old and longer").unwrap();
        for durability in [
            Durability::Renamed,
            Durability::Synced,
            Durability::SyncedFolderBestEffort,
        ] {
            let options = Options {
                durability,
                ..Options::PRIVATE
            };
            replace(&path, options, bytes(b"new")).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
            assert_eq!(names(dir.path()), ["f.json"]);
        }
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "private: {mode:o}");
    }

    #[test]
    fn a_failed_fill_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "old").unwrap();
        let failed = replace(&path, Options::PRIVATE, |out| {
            out.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        });
        assert_eq!(failed.unwrap_err().to_string(), "disk full");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(names(dir.path()), ["f"]);
        // A target that cannot be renamed over (a folder) fails the same way.
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/x"), "").unwrap();
        assert!(replace(&dir.path().join("d"), Options::PRIVATE, bytes(b"x")).is_err());
        assert_eq!(names(dir.path()), ["d", "f"]);
    }

    /// A link at the target is replaced, not written through: what it pointed to is unchanged.
    #[test]
    fn a_linked_target_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let path = dir.path().join("record.json");
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        replace(&path, Options::PRIVATE, bytes(b"mine")).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
    }

    /// A file in a folder that is gone is an error, and nothing is left anywhere.
    #[test]
    fn a_missing_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone/f");
        assert!(replace(&path, Options::PRIVATE, bytes(b"x")).is_err());
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn like_keeps_the_old_mode_and_gives_a_new_file_the_umask_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        let old = std::fs::metadata(&path).unwrap();
        let options = Options::like(Some(&old), Durability::SyncedFolderBestEffort);
        replace(&path, options, bytes(b"new")).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o751);
        let fresh = dir.path().join("g");
        let options = Options::like(None, Durability::SyncedFolderBestEffort);
        replace(&fresh, options, bytes(b"new")).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o666 & !umask());
    }
}
