//! Writes confined beneath writable roots, with the kernel's help: a write lands under a root or
//! is refused, whatever the path spells (`..`, an absolute path, `/proc/self/root/…`, a symlink
//! the model planted, a symlinked parent folder).
//!
//! - The path is made absolute by the caller and normalised lexically (`.` and `..` dropped), so
//!   `a/link/../b` is `a/b`. The root holding it is the longest root it starts with (as given or
//!   canonical); a path under none is refused, naming the roots.
//! - The root is opened `O_PATH|O_DIRECTORY`, and every lookup below it is
//!   `openat2(root, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the kernel refuses any walk
//!   that leaves the root (an absolute symlink, one climbing out, a `/proc` magic link), also
//!   when a link is swapped in between two steps.
//! - A symlink as the last component is followed by hand, as long as its target stays beneath
//!   the root (so writing through a link inside the project still replaces its target); one
//!   pointing out is refused.
//! - Changes are `*at` calls on the last component relative to the confined parent directory:
//!   an atomic replace is a temporary file and `renameat` in that directory, which also leaves
//!   a hard link to an outside file untouched. In-place writes refuse multiply-linked files.
//! - Host-served paths (`delegable`) follow the same walk before anything is sent.

use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// The kernel's own limit on links followed in one lookup.
const MAX_LINKS: usize = 40;
/// openat2 answers EAGAIN when a rename raced a `..` walk; a few retries settle it.
const RETRIES: usize = 64;

/// Why a confined path was refused or failed.
#[derive(Debug)]
pub enum BeneathError {
    /// The path is under none of the roots.
    Outside {
        path: PathBuf,
        roots: Vec<PathBuf>,
    },
    /// Resolving it would leave its root (a symlink pointing out, a `/proc` magic link).
    Escapes {
        path: PathBuf,
        root: PathBuf,
    },
    /// The kernel lacks openat2 (Linux 5.6); nothing is written rather than written unconfined.
    Unsupported,
    Io(io::Error),
}

impl fmt::Display for BeneathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BeneathError::Outside { path, roots } if roots.is_empty() => write!(
                f,
                "{} is not writable: nothing is writable in this session",
                path.display()
            ),
            BeneathError::Outside { path, roots } => {
                let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
                write!(
                    f,
                    "{} is outside the writable roots ({})",
                    path.display(),
                    names.join(", ")
                )
            }
            BeneathError::Escapes { path, root } => write!(
                f,
                "{} leads out of the writable root {} (through a symlink or a /proc link)",
                path.display(),
                root.display()
            ),
            BeneathError::Unsupported => f.write_str(
                "this kernel cannot resolve a path beneath a folder (openat2 needs Linux 5.6), so confined writes are refused",
            ),
            BeneathError::Io(e) => match e.kind() {
                io::ErrorKind::NotFound => f.write_str("file not found"),
                io::ErrorKind::PermissionDenied => f.write_str("permission denied"),
                _ => write!(f, "{e}"),
            },
        }
    }
}

impl std::error::Error for BeneathError {}

impl From<io::Error> for BeneathError {
    fn from(e: io::Error) -> BeneathError {
        BeneathError::Io(e)
    }
}

/// An absolute path without `.` or `..` (a `..` at `/` stays at `/`). A relative path is taken
/// from `/`; callers join it to their cwd first.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A file's place beneath a root: its confined parent folder and its name there.
pub struct Target {
    parent: OwnedFd,
    name: OsString,
    path: PathBuf,
}

/// Opens `path` for writing beneath one of `roots` (creating it, and its parent folders, when
/// `create`). A symlink inside the root is followed to its target; only a regular file with no
/// other hard link is opened, since writing in place through a link would reach its other names.
pub fn open_for_write(roots: &[PathBuf], path: &Path, create: bool) -> Result<File, BeneathError> {
    target(roots, path, create)?.open_write(create)
}

/// Creates `dir` and its missing parents beneath one of `roots`.
pub fn create_dir_all_beneath(roots: &[PathBuf], dir: &Path) -> Result<(), BeneathError> {
    let place = Place::locate(roots, dir)?;
    place.create_dirs(&place.rel)
}

/// The file a write to `path` changes, beneath one of `roots`: a last-component symlink is
/// followed while it stays inside. With `create_parents`, missing parent folders are made.
pub fn target(
    roots: &[PathBuf],
    path: &Path,
    create_parents: bool,
) -> Result<Target, BeneathError> {
    let place = Place::locate(roots, path)?;
    let rel = place.final_target()?;
    let Some((dir, name)) = split(&rel) else {
        return Err(is_a_directory());
    };
    if create_parents {
        place.create_dirs(&dir)?;
    }
    let parent = place.open(&dir, libc::O_PATH | libc::O_DIRECTORY)?;
    Ok(Target {
        parent,
        name,
        path: place.root.join(&rel),
    })
}

/// `path`, normalised, when a host may be asked to serve it: it lies beneath one of `roots`, the
/// existing part of it resolves there (links included, walked by the kernel), and a missing part
/// holds no dangling link. What the host does later is its own walk; this keeps gjc from ever
/// naming a path outside the roots, however it is spelled.
pub fn delegable(roots: &[PathBuf], path: &Path) -> Result<PathBuf, BeneathError> {
    let place = Place::locate(roots, path)?;
    let rel = place.final_target()?;
    if let Some((dir, _)) = split(&rel) {
        place.existing_dirs(&dir)?;
    }
    Ok(place.root.join(&place.rel))
}

impl Target {
    /// Where the file is, as resolved (its root joined with the path beneath it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's metadata, without following a link; `None` when it does not exist.
    pub fn metadata(&self) -> Result<Option<Metadata>, BeneathError> {
        match self.open_name(libc::O_PATH | libc::O_NOFOLLOW, 0) {
            Ok(fd) => Ok(Some(File::from(fd).metadata()?)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the file for reading, never through a link, without blocking on a FIFO.
    pub fn open_read(&self) -> io::Result<File> {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
        self.open_name(flags, 0).map(File::from)
    }

    /// Opens the file for writing in place (see `open_for_write`).
    pub fn open_write(&self, create: bool) -> Result<File, BeneathError> {
        let mut flags = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
        if create {
            flags |= libc::O_CREAT;
        }
        let file = File::from(self.open_name(flags, 0o666)?);
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(
                io::Error::other(format!("{} is not a regular file", self.path.display())).into(),
            );
        }
        if meta.nlink() > 1 {
            return Err(io::Error::other(format!(
                "{} has other hard links, which may lie outside the writable roots; it is not written in place",
                self.path.display()
            ))
            .into());
        }
        Ok(file)
    }

    /// Replaces the file with `bytes` so that a crash leaves the old file or the new one: a
    /// private temporary file in the same confined folder, written, given the old file's mode
    /// (and owner, when allowed), synced, then renamed over the name. A new file gets the mode
    /// `open` would give it (0666 less the umask).
    pub fn replace(&self, bytes: &[u8], old: Option<&Metadata>) -> Result<(), BeneathError> {
        let tmp = OsString::from(super::atomic::temp_name(&self.name.to_string_lossy()));
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        // The content, mode, owner and sync as for any replacement; the folder's sync below is
        // best effort, as the rename has happened by then.
        let options =
            super::atomic::Options::like(old, super::atomic::Durability::SyncedFolderBestEffort);
        let written = (|| {
            let file = File::from(at_open(self.parent.as_fd(), &tmp, flags, 0o600)?);
            super::atomic::write_temp(file, options, super::atomic::bytes(bytes))?;
            rename_at(self.parent.as_fd(), &tmp, &self.name)
        })();
        if let Err(e) = written {
            let _ = unlink_at(self.parent.as_fd(), &tmp);
            return Err(e.into());
        }
        // The rename is durable once the folder is; a failure here loses nothing written.
        if let Ok(dir) = at_open(
            self.parent.as_fd(),
            OsStr::new("."),
            libc::O_RDONLY | libc::O_DIRECTORY,
            0,
        ) {
            let _ = File::from(dir).sync_all();
        }
        Ok(())
    }

    fn open_name(&self, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        at_open(self.parent.as_fd(), &self.name, flags, mode)
    }
}

/// A path located beneath one root: the root (as it matched), its canonical path, an `O_PATH`
/// descriptor on it, and the normalised path below it.
struct Place {
    root: PathBuf,
    real: PathBuf,
    fd: OwnedFd,
    rel: PathBuf,
}

impl Place {
    fn locate(roots: &[PathBuf], path: &Path) -> Result<Place, BeneathError> {
        let path = normalize(path);
        let outside = || BeneathError::Outside {
            path: path.clone(),
            roots: roots.to_vec(),
        };
        let mut best: Option<(PathBuf, PathBuf)> = None;
        for root in roots.iter().filter(|r| r.is_absolute()) {
            let spelled = normalize(root);
            let real = std::fs::canonicalize(root).unwrap_or_else(|_| spelled.clone());
            for form in [spelled, real] {
                let longer = best
                    .as_ref()
                    .is_none_or(|(b, _)| form.as_os_str().len() > b.as_os_str().len());
                if longer {
                    if let Ok(rel) = path.strip_prefix(&form) {
                        best = Some((form.clone(), rel.to_path_buf()));
                    }
                }
            }
        }
        let (root, rel) = best.ok_or_else(outside)?;
        let fd = open_root(&root)?;
        let real = fd_path(fd.as_fd()).unwrap_or_else(|| root.clone());
        Ok(Place {
            root,
            real,
            fd,
            rel,
        })
    }

    /// Opens `rel` beneath the root; leaving it is `Escapes`.
    fn open(&self, rel: &Path, flags: i32) -> Result<OwnedFd, BeneathError> {
        openat2(self.fd.as_fd(), rel, flags).map_err(|e| self.lookup_error(e, rel))
    }

    fn lookup_error(&self, e: io::Error, rel: &Path) -> BeneathError {
        match e.raw_os_error() {
            Some(libc::EXDEV) => BeneathError::Escapes {
                path: self.root.join(rel),
                root: self.root.clone(),
            },
            Some(libc::ENOSYS) => BeneathError::Unsupported,
            _ => BeneathError::Io(e),
        }
    }

    /// `rel` with its last-component links followed while they stay beneath the root. A link
    /// is read relative to the canonical path of its folder, as the kernel would read it.
    fn final_target(&self) -> Result<PathBuf, BeneathError> {
        let mut rel = self.rel.clone();
        for _ in 0..MAX_LINKS {
            let Some((dir, name)) = split(&rel) else {
                return Ok(rel);
            };
            let dir_fd = match self.open(&dir, libc::O_PATH | libc::O_DIRECTORY) {
                Ok(fd) => fd,
                Err(BeneathError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(rel),
                Err(e) => return Err(e),
            };
            let link = match read_link_at(dir_fd.as_fd(), &name) {
                Ok(link) => link,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) => {
                    return Ok(rel)
                }
                Err(e) => return Err(e.into()),
            };
            let base = fd_path(dir_fd.as_fd()).unwrap_or_else(|| self.real.join(&dir));
            let next = normalize(&base.join(link));
            rel = match next
                .strip_prefix(&self.real)
                .or_else(|_| next.strip_prefix(&self.root))
            {
                Ok(inside) => inside.to_path_buf(),
                Err(_) => {
                    return Err(BeneathError::Escapes {
                        path: self.root.join(&self.rel),
                        root: self.root.clone(),
                    })
                }
            };
        }
        Err(io::Error::from_raw_os_error(libc::ELOOP).into())
    }

    /// Makes each missing folder of `dir`, each step opened beneath the root.
    fn create_dirs(&self, dir: &Path) -> Result<(), BeneathError> {
        let mut prefix = PathBuf::new();
        for part in dir.components() {
            let parent = prefix.clone();
            prefix.push(part);
            match openat2(self.fd.as_fd(), &prefix, libc::O_PATH | libc::O_DIRECTORY) {
                Ok(_) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(self.lookup_error(e, &prefix)),
            }
            let parent_fd = self.open(&parent, libc::O_PATH | libc::O_DIRECTORY)?;
            let name = cstring(part.as_os_str())?;
            // SAFETY: a valid descriptor and a NUL-terminated name.
            if unsafe { libc::mkdirat(parent_fd.as_raw_fd(), name.as_ptr(), 0o777) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e.into());
                }
            }
            // Whatever took the name (another writer, a dangling link) must now open beneath.
            self.open(&prefix, libc::O_PATH | libc::O_DIRECTORY)?;
        }
        Ok(())
    }

    /// Walks `dir` as far as it exists, beneath the root; the first missing name must not be a
    /// (dangling) link, which whoever creates the rest would follow.
    fn existing_dirs(&self, dir: &Path) -> Result<(), BeneathError> {
        let mut prefix = PathBuf::new();
        for part in dir.components() {
            let parent = prefix.clone();
            prefix.push(part);
            match openat2(self.fd.as_fd(), &prefix, libc::O_PATH | libc::O_DIRECTORY) {
                Ok(_) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    let parent_fd = self.open(&parent, libc::O_PATH | libc::O_DIRECTORY)?;
                    let flags = libc::O_PATH | libc::O_NOFOLLOW;
                    return match at_open(parent_fd.as_fd(), part.as_os_str(), flags, 0) {
                        Ok(_) => Err(BeneathError::Escapes {
                            path: self.root.join(&prefix),
                            root: self.root.clone(),
                        }),
                        Err(_) => Ok(()),
                    };
                }
                Err(e) => return Err(self.lookup_error(e, &prefix)),
            }
        }
        Ok(())
    }
}

/// The folder and the last name of a relative path; `None` for the root itself.
fn split(rel: &Path) -> Option<(PathBuf, OsString)> {
    let name = rel.file_name()?.to_os_string();
    let dir = rel.parent().map(Path::to_path_buf).unwrap_or_default();
    Some((dir, name))
}

fn is_a_directory() -> BeneathError {
    io::Error::from_raw_os_error(libc::EISDIR).into()
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

fn open_root(root: &Path) -> Result<OwnedFd, BeneathError> {
    let c = cstring(root.as_os_str())?;
    // SAFETY: a NUL-terminated path; the descriptor returned is owned here.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: a descriptor just opened and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; an empty `rel` is `dir`.
fn openat2(dir: BorrowedFd, rel: &Path, flags: i32) -> io::Result<OwnedFd> {
    let spelled = if rel.as_os_str().is_empty() {
        OsStr::new(".")
    } else {
        rel.as_os_str()
    };
    let c = cstring(spelled)?;
    // SAFETY: `open_how` is plain integers, for which zero is valid; it is non_exhaustive, so
    // it cannot be built as a literal.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    for _ in 0..RETRIES {
        // SAFETY: valid descriptor, NUL-terminated path, and an `open_how` of the size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a descriptor just opened and owned by no one else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
            return Err(e);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

/// `openat` of one name in `dir` (no `/` in it, so nothing is walked but that name).
fn at_open(dir: BorrowedFd, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: a valid descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_link_at(dir: BorrowedFd, name: &OsStr) -> io::Result<PathBuf> {
    let c = cstring(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: a valid descriptor, a NUL-terminated name and a buffer of the length given.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

fn rename_at(dir: BorrowedFd, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (from, to) = (cstring(from)?, cstring(to)?);
    // SAFETY: a valid descriptor and NUL-terminated names.
    if unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn unlink_at(dir: BorrowedFd, name: &OsStr) -> io::Result<()> {
    let c = cstring(name)?;
    // SAFETY: a valid descriptor and a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The canonical path of an open descriptor, as the kernel names it; `None` without `/proc`.
fn fd_path(fd: BorrowedFd) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
        .filter(|p| p.is_absolute())
}

#[cfg(test)]
#[path = "beneath_tests.rs"]
mod tests;
