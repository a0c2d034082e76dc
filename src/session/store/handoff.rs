//! The session file at a handoff checkpoint: everything written, the file and its folder synced,
//! then its bytes hashed, so that the receipt names exactly what another process will read.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::{Step, StoreError};
use super::Store;

/// The synced file: its absolute path and the SHA-256 (lower-case hex) of its bytes.
pub struct Synced {
    pub path: PathBuf,
    pub digest: String,
}

impl Store {
    /// Writes and syncs the session file (creating it when nothing was saved yet), syncs its
    /// folder so that its name survives a crash too, and hashes it.
    pub fn checkpoint(&mut self) -> Result<Synced, StoreError> {
        let path = self.path.clone().ok_or(StoreError::InMemory)?;
        self.sync_or_fail()?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(StoreError::io(Step::SyncFolder, dir))?;
        let digest = self.digest(&path)?;
        let path = if path.is_absolute() {
            path
        } else {
            std::fs::canonicalize(&path).map_err(StoreError::io(Step::Resolve, &path))?
        };
        Ok(Synced { path, digest })
    }

    /// Hashes the file at `path`, which must be the very file this store writes (not a link,
    /// not something put in its place since it was opened).
    fn digest(&self, path: &Path) -> Result<String, StoreError> {
        let cannot = |e| StoreError::io(Step::Read, path)(e);
        let ours = self
            .file
            .as_ref()
            .ok_or(StoreError::NotOpen)?
            .metadata()
            .map_err(cannot)?;
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        if !meta.is_file() || meta.dev() != ours.dev() || meta.ino() != ours.ino() {
            return Err(StoreError::Replaced(path.to_path_buf()));
        }
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => hasher.update(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(cannot(e)),
            }
        }
        Ok(crate::gates::canonical::hex(&hasher.finalize()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::saved;
    use super::*;

    #[test]
    fn checkpoint_hashes_the_synced_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one", "two"]);
        let synced = s.checkpoint().unwrap();
        assert_eq!(synced.path, path);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            synced.digest,
            crate::gates::canonical::hex(&Sha256::digest(&bytes))
        );
    }

    #[test]
    fn a_file_put_in_its_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, path) = saved(dir.path(), &["one"]);
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, "{}\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let e = s.checkpoint().err().expect("refused");
        assert!(e.to_string().contains("no longer the file"), "{e}");
        assert!(matches!(e, StoreError::Replaced(p) if p == path));
    }

    #[test]
    fn an_in_memory_session_has_no_checkpoint() {
        let mut s = Store::in_memory("id", Path::new("/tmp"));
        assert!(matches!(s.checkpoint(), Err(StoreError::InMemory)));
    }
}
