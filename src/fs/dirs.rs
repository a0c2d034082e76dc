//! Folders gjc keeps its own records in under the agent dir (the workflow gate store, the audit
//! trail, the session registry): created private, and refused when one of them is a symbolic
//! link, which would send the records written there anywhere the link points.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// `base/parts[0]/parts[1]/...`, each part created if missing (mode 0700) and required to be a
/// real folder, not a link to one. `base` itself is created with its parents and may be a link
/// (the agent dir often is one, into a dotfiles folder).
pub fn real_dir(base: &Path, parts: &[&str]) -> io::Result<PathBuf> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base)?;
    let mut dir = base.to_path_buf();
    for part in parts {
        dir.push(part);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let meta = std::fs::symlink_metadata(&dir)?;
        if meta.file_type().is_symlink() {
            return Err(io::Error::other(format!(
                "{} is a symbolic link, which is refused",
                dir.display()
            )));
        }
        if !meta.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_made_and_links_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let made = real_dir(&tmp.path().join("base"), &["a", "b"]).unwrap();
        assert!(made.is_dir());
        assert_eq!(made, tmp.path().join("base/a/b"));
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, tmp.path().join("base/l")).unwrap();
        let err = real_dir(&tmp.path().join("base"), &["l", "x"]).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::fs::write(tmp.path().join("base/f"), "").unwrap();
        assert!(real_dir(&tmp.path().join("base"), &["f"]).is_err());
    }
}
