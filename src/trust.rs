//! Which projects the user trusts to run code: `<agent dir>/trusted-projects.json`.
//!
//! A project's own files that make gjc run programs (today `.gjc/hooks.json`) are loaded only
//! for a trusted project; a cloned repository cannot run anything by being opened. Context files
//! stay text and need no trust. The host decides: `--trust-project`, the `trust_project`
//! command, or in ACP the editor's answer to a permission request. The decision is kept here,
//! in the user's agent dir, so it holds for every later process.
//!
//! A project is named by its canonical folder (symlinks resolved), and only that exact folder
//! counts: a subfolder, even of a trusted project, is a project of its own (a vendored or
//! cloned repository inside a trusted one brings its own `.gjc/hooks.json`, which nobody
//! looked at when the outer one was trusted).
//!
//! The file is read as hostile input: a regular file only (no link, FIFO or device), owned by
//! this user and writable by no one else, at most [`MAX_BYTES`]. Anything wrong with it means
//! "nothing trusted" and a logged warning, never a failure of the session. It is written whole
//! to a private (0600) temporary file, then renamed over the old one, under a lock file so that
//! two processes deciding at once both keep their decision.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The store's file name in the agent dir.
pub const FILE: &str = "trusted-projects.json";
/// A store larger than this is refused (thousands of folder names fit in it).
pub const MAX_BYTES: u64 = 1024 * 1024;
/// The longest a decision waits for another process holding the lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// What the user decided about a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Trusted,
    /// Refused and remembered: nobody is asked again.
    Refused,
    /// Never asked, or the store cannot be used.
    Unknown,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    version: u32,
    #[serde(default)]
    trusted: Vec<String>,
    #[serde(default)]
    refused: Vec<String>,
}

/// Why a decision could not be recorded.
#[derive(Debug)]
pub enum TrustError {
    /// The project is not named by an absolute UTF-8 path (the store keeps such names only).
    NotAbsolute(PathBuf),
    /// The agent dir could not be created.
    CreateDir {
        dir: PathBuf,
        source: io::Error,
    },
    /// The lock file could not be opened.
    LockOpen {
        path: PathBuf,
        source: io::Error,
    },
    /// Something else than a regular file sits where the lock file goes.
    LockNotRegular(PathBuf),
    /// Another process held the lock for longer than gjc waits.
    Busy(PathBuf),
    Encode(serde_json::Error),
    Write {
        path: PathBuf,
        source: io::Error,
    },
}

impl std::fmt::Display for TrustError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustError::NotAbsolute(p) => {
                write!(f, "{} is not an absolute UTF-8 path", p.display())
            }
            TrustError::CreateDir { dir, source } => {
                write!(f, "cannot create {}: {source}", dir.display())
            }
            TrustError::LockOpen { path, source } => {
                write!(f, "cannot open {}: {source}", path.display())
            }
            TrustError::LockNotRegular(p) => write!(f, "{} is not a regular file", p.display()),
            TrustError::Busy(p) => {
                write!(f, "{} is held by another process; try again", p.display())
            }
            TrustError::Encode(e) => write!(f, "{e}"),
            TrustError::Write { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for TrustError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TrustError::CreateDir { source, .. }
            | TrustError::LockOpen { source, .. }
            | TrustError::Write { source, .. } => Some(source),
            TrustError::Encode(e) => Some(e),
            _ => None,
        }
    }
}

/// The trust store of one agent dir.
#[derive(Debug, Clone)]
pub struct TrustStore {
    dir: PathBuf,
}

impl TrustStore {
    pub fn new(agent_dir: &Path) -> TrustStore {
        TrustStore {
            dir: agent_dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// The decision about `project` (a canonical folder). A store that cannot be used is logged
    /// and trusts nothing.
    pub fn decision(&self, project: &Path) -> Decision {
        let stored = match self.read() {
            Ok(stored) => stored,
            Err(e) => {
                log::warn!("{}: {e}; no project is trusted", self.path().display());
                return Decision::Unknown;
            }
        };
        let Some(name) = project.to_str() else {
            return Decision::Unknown;
        };
        // Listed both ways (edited by hand): refusal wins.
        if stored.refused.iter().any(|p| p == name) {
            Decision::Refused
        } else if stored.trusted.iter().any(|p| p == name) {
            Decision::Trusted
        } else {
            Decision::Unknown
        }
    }

    pub fn is_trusted(&self, project: &Path) -> bool {
        self.decision(project) == Decision::Trusted
    }

    /// Records that `project` (a canonical folder) is trusted, or refused. A store that could not
    /// be read is replaced (it trusted nothing anyway).
    pub fn remember(&self, project: &Path, trusted: bool) -> Result<(), TrustError> {
        let name = project
            .to_str()
            .filter(|_| project.is_absolute())
            .ok_or_else(|| TrustError::NotAbsolute(project.to_path_buf()))?;
        std::fs::create_dir_all(&self.dir).map_err(|source| TrustError::CreateDir {
            dir: self.dir.clone(),
            source,
        })?;
        let _lock = self.lock()?;
        let mut stored = self.read().unwrap_or_else(|e| {
            log::warn!("{}: {e}; replacing it", self.path().display());
            Stored::default()
        });
        stored.version = 1;
        stored.trusted.retain(|p| p != name);
        stored.refused.retain(|p| p != name);
        let list = if trusted {
            &mut stored.trusted
        } else {
            &mut stored.refused
        };
        list.push(name.to_string());
        let text = serde_json::to_vec_pretty(&stored).map_err(TrustError::Encode)?;
        self.replace(&text).map_err(|source| TrustError::Write {
            path: self.path(),
            source,
        })
    }

    /// The store's contents; a missing file is an empty store.
    fn read(&self) -> Result<Stored, String> {
        let Some(bytes) = read_private(&self.path())? else {
            return Ok(Stored::default());
        };
        let stored: Stored =
            serde_json::from_slice(&bytes).map_err(|e| format!("not a trust store: {e}"))?;
        if stored.version != 1 {
            return Err(format!("unknown version {}", stored.version));
        }
        let entries = stored.trusted.iter().chain(&stored.refused);
        if let Some(bad) = entries.into_iter().find(|p| !Path::new(p).is_absolute()) {
            return Err(format!("{bad:?} is not an absolute path"));
        }
        Ok(stored)
    }

    /// Writes `text` to a private temporary file beside the store, then renames it over the
    /// store (`crate::fs::atomic`): a reader sees the old list or the new one, never half of one.
    fn replace(&self, text: &[u8]) -> std::io::Result<()> {
        let options = crate::fs::atomic::Options::PRIVATE;
        crate::fs::atomic::replace(&self.path(), options, crate::fs::atomic::bytes(text))
    }

    /// An exclusive lock on `<store>.lock`, waited for at most [`LOCK_WAIT`]; released when the
    /// file is dropped (closed).
    fn lock(&self) -> Result<File, TrustError> {
        let path = self.dir.join(format!("{FILE}.lock"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|source| TrustError::LockOpen {
                path: path.clone(),
                source,
            })?;
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        if !regular {
            return Err(TrustError::LockNotRegular(path));
        }
        let deadline = Instant::now() + LOCK_WAIT;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns.
        while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            if Instant::now() >= deadline {
                return Err(TrustError::Busy(path));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(file)
    }
}

/// The bytes of `path` if it is a regular file of this user that no one else may write, at most
/// [`MAX_BYTES`]; `None` when it does not exist. Opened without following a link and without
/// blocking (`fs::bounded`), then checked on the open file.
fn read_private(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use crate::fs::bounded::{self, Links, ReadError};
    let file = match bounded::open_regular(path, Links::Refuse) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(ReadError::Link) => return Err("is a symbolic link".into()),
        Err(e) => return Err(e.to_string()),
    };
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    // SAFETY: geteuid has no preconditions.
    if meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o022 != 0 {
        return Err("owned by another user or writable by others".into());
    }
    bounded::read_file(file, MAX_BYTES)
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn store() -> (tempfile::TempDir, TrustStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::new(&dir.path().join("agent"));
        (dir, store)
    }

    #[test]
    fn decisions_are_remembered_and_replaced() {
        let (_dir, store) = store();
        let a = Path::new("/srv/a");
        assert_eq!(store.decision(a), Decision::Unknown);
        store.remember(a, true).unwrap();
        store.remember(Path::new("/srv/b"), false).unwrap();
        assert_eq!(store.decision(a), Decision::Trusted);
        assert_eq!(store.decision(Path::new("/srv/b")), Decision::Refused);
        // Only the folder itself: neither a subfolder nor a parent.
        assert_eq!(store.decision(Path::new("/srv/a/sub")), Decision::Unknown);
        assert_eq!(store.decision(Path::new("/srv")), Decision::Unknown);
        store.remember(a, false).unwrap();
        assert_eq!(store.decision(a), Decision::Refused);
        let meta = std::fs::metadata(store.path()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(matches!(
            store.remember(Path::new("relative"), true),
            Err(TrustError::NotAbsolute(p)) if p == Path::new("relative")
        ));
    }

    /// A folder where the lock file goes is told as such, and the store is left alone.
    #[test]
    fn a_lock_that_is_no_file_is_refused() {
        let (_dir, store) = store();
        std::fs::create_dir_all(store.dir.join(format!("{FILE}.lock"))).unwrap();
        let e = store.remember(Path::new("/srv/a"), true).unwrap_err();
        assert!(
            matches!(
                &e,
                TrustError::LockOpen { .. } | TrustError::LockNotRegular(_)
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains(".lock"), "{e}");
        assert!(!store.path().exists());
    }

    #[test]
    fn a_hostile_or_corrupt_store_trusts_nothing() {
        let (_dir, store) = store();
        let a = Path::new("/srv/a");
        store.remember(a, true).unwrap();
        let path = store.path();
        let hostile: [(&str, &dyn Fn()); 6] = [
            ("garbage", &|| std::fs::write(&path, "{not json").unwrap()),
            ("unknown key", &|| {
                std::fs::write(&path, r#"{"version":1,"trusted":["/srv/a"],"x":1}"#).unwrap()
            }),
            ("relative", &|| {
                std::fs::write(&path, r#"{"version":1,"trusted":["/srv/a","b"]}"#).unwrap()
            }),
            ("symlink", &|| {
                std::fs::remove_file(&path).unwrap();
                std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
            }),
            ("fifo", &|| {
                std::fs::remove_file(&path).unwrap();
                let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
                // SAFETY: a valid C string.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }),
            ("world-writable", &|| {
                std::fs::remove_file(&path).unwrap();
                std::fs::write(&path, r#"{"version":1,"trusted":["/srv/a"]}"#).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
            }),
        ];
        for (what, make) in hostile {
            make();
            assert_eq!(store.decision(a), Decision::Unknown, "{what}");
            // A new decision replaces the unusable store.
            store.remember(a, true).unwrap();
            assert_eq!(store.decision(a), Decision::Trusted, "{what}");
        }
        let big = vec![b' '; MAX_BYTES as usize + 1];
        std::fs::write(&path, big).unwrap();
        assert_eq!(store.decision(a), Decision::Unknown);
    }
}
