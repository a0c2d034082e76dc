//! The write rule for the file tools (`write`, `edit`, and `read` when the host serves files).
//!
//! - Local writes: with `write_roots` set, a write lands beneath a root or is refused, resolved
//!   with the kernel's help (`crate::fs::beneath`); `None` writes anywhere, as before.
//! - Host-served files (`file://` host URIs, an ACP editor's `fs/*`): the path is normalised
//!   (never sent as `<cwd>/../../etc/passwd`) and walked beneath the session's roots the same
//!   way before anything is sent. Writes go to the write roots when set, else to the session
//!   cwd only; reads to the cwd and the write roots. A write elsewhere is the tool's error; a
//!   read elsewhere is served from disk, so the host is never asked about it.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::files;
use super::ToolContext;
use crate::fs::beneath::{self, BeneathError};
use crate::protocol::message::ToolOutput;

impl ToolContext {
    /// The `file://` URL a host may be asked to write `path` at, or the tool's error.
    pub fn delegated_write(&self, path: &Path, raw: &str) -> Result<String, String> {
        let roots = match &self.sandbox.write_roots {
            Some(roots) => roots.to_vec(),
            None => vec![self.cwd.clone()],
        };
        beneath::delegable(&roots, path)
            .map(|p| format!("file://{}", p.display()))
            .map_err(|e| format!("Cannot write {raw}: {e}; it was not sent to the host"))
    }

    /// The `file://` URL a host may be asked to read `path` at; `None` when it lies outside the
    /// session's roots, and is read from disk instead.
    pub fn delegated_read(&self, path: &Path) -> Option<String> {
        let mut roots = vec![self.cwd.clone()];
        roots.extend(
            self.sandbox
                .write_roots
                .iter()
                .flat_map(|r| r.iter().cloned()),
        );
        let found = beneath::delegable(&roots, path);
        found.ok().map(|p| format!("file://{}", p.display()))
    }
}

/// Writes `content` to `path` beneath `roots`, atomically, creating parent folders; through a
/// link inside a root, its target.
pub fn write(roots: &[PathBuf], path: &Path, raw: &str, content: &str) -> ToolOutput {
    let fail = |e: BeneathError| ToolOutput::error(format!("Cannot write {raw}: {e}"));
    let target = match beneath::target(roots, path, true) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let old = match target.metadata() {
        Ok(old) => old,
        Err(e) => return fail(e),
    };
    match &old {
        Some(m) if m.is_dir() => return ToolOutput::error(format!("{raw} is a directory")),
        Some(m) if !m.is_file() => {
            let kind = files::special_kind(m.file_type());
            return ToolOutput::error(files::special_message(raw, kind));
        }
        _ => {}
    }
    match target.replace(content.as_bytes(), old.as_ref()) {
        Ok(()) => ToolOutput::text(format!(
            "Successfully wrote {} bytes to {raw}",
            content.len()
        ))
        .with_details(json!({"bytes": content.len()})),
        Err(e) => fail(e),
    }
}

/// The file `edit` changes beneath `roots`, opened for reading: a regular file only.
pub fn open_for_edit(
    roots: &[PathBuf],
    path: &Path,
    raw: &str,
) -> Result<(beneath::Target, std::fs::File, std::fs::Metadata), String> {
    let io = |e: std::io::Error| format!("Cannot edit {raw}: {}", super::read::io_reason(&e));
    let target = beneath::target(roots, path, false).map_err(|e| match e {
        BeneathError::Io(e) => io(e),
        e => format!("Cannot edit {raw}: {e}"),
    })?;
    let file = target.open_read().map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(files::OpenError::Directory.describe(raw));
    }
    if !meta.is_file() {
        let kind = files::special_kind(meta.file_type());
        return Err(files::OpenError::Special(kind).describe(raw));
    }
    Ok((target, file, meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::edit::Edit;
    use crate::tools::tests::{ctx, text};
    use crate::tools::write::Write;
    use crate::tools::Tool;
    use std::os::unix::fs::symlink;

    /// A confined context (its cwd the only root) and a folder outside with a file in it.
    fn confined() -> (tempfile::TempDir, ToolContext, PathBuf, PathBuf) {
        let (dir, mut c) = ctx();
        let base = dir.path().canonicalize().unwrap();
        let (ws, out) = (base.join("ws"), base.join("out"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("secret"), "untouched").unwrap();
        c.cwd = ws.clone();
        c.sandbox.write_roots = Some(vec![ws.clone()].into());
        (dir, c, ws, out)
    }

    fn unchanged(out: &Path) {
        assert_eq!(
            std::fs::read_to_string(out.join("secret")).unwrap(),
            "untouched"
        );
        assert_eq!(
            std::fs::read_dir(out).unwrap().count(),
            1,
            "nothing new outside"
        );
    }

    #[test]
    fn write_and_edit_land_inside_or_are_refused() {
        let (_dir, c, ws, out) = confined();
        let out_abs = out.join("secret").display().to_string();
        let proc_root = format!("/proc/self/root{out_abs}");
        symlink(out.join("secret"), ws.join("abs")).unwrap();
        symlink("../out/secret", ws.join("rel")).unwrap();
        symlink(&out, ws.join("dir")).unwrap();
        let ways_out = [
            "../out/secret",
            "../out/new",
            out_abs.as_str(),
            proc_root.as_str(),
            "abs",
            "rel",
            "dir/secret",
            "dir/new",
        ];
        for path in ways_out {
            let w = Write.execute(&json!({"path": path, "content": "x"}), &c);
            assert!(w.is_error, "write {path}: {}", text(&w));
            assert!(
                text(&w).starts_with(&format!("Cannot write {path}: ")),
                "{}",
                text(&w)
            );
            let e = Edit.execute(
                &json!({"path": path, "edits": [{"oldText": "untouched", "newText": "x"}]}),
                &c,
            );
            assert!(e.is_error, "edit {path}: {}", text(&e));
        }
        unchanged(&out);
        let w = Write.execute(&json!({"path": "sub/new.txt", "content": "one two"}), &c);
        assert!(!w.is_error, "{}", text(&w));
        let e = Edit.execute(
            &json!({"path": "sub/new.txt", "edits": [{"oldText": "two", "newText": "2"}]}),
            &c,
        );
        assert!(!e.is_error, "{}", text(&e));
        assert_eq!(
            std::fs::read_to_string(ws.join("sub/new.txt")).unwrap(),
            "one 2"
        );
    }

    #[test]
    fn the_temp_root_is_writable_and_no_roots_means_read_only() {
        let (_dir, mut c, ws, out) = confined();
        let tmp = out.parent().unwrap().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        c.sandbox.write_roots = Some(vec![ws.clone(), tmp.clone()].into());
        let into_tmp = tmp.join("scratch").display().to_string();
        let w = Write.execute(&json!({"path": into_tmp, "content": "s"}), &c);
        assert!(!w.is_error, "{}", text(&w));
        c.sandbox.write_roots = Some(Vec::new().into());
        let w = Write.execute(&json!({"path": "a.txt", "content": "s"}), &c);
        assert!(text(&w).contains("nothing is writable"), "{}", text(&w));
        assert!(!ws.join("a.txt").exists());
    }

    #[test]
    fn delegated_paths_are_normalised_and_kept_to_the_roots() {
        let (_dir, mut c, ws, out) = confined();
        c.sandbox.write_roots = None;
        let url = c
            .delegated_write(&ws.join("a/../b.txt"), "a/../b.txt")
            .unwrap();
        assert_eq!(url, format!("file://{}", ws.join("b.txt").display()));
        let err = c
            .delegated_write(&ws.join("../../etc/passwd"), "x")
            .unwrap_err();
        assert!(err.contains("outside the writable roots"), "{err}");
        symlink(&out, ws.join("link")).unwrap();
        let err = c.delegated_write(&ws.join("link/secret"), "x").unwrap_err();
        assert!(err.contains("leads out"), "{err}");
        assert_eq!(c.delegated_read(&ws.join("link/secret")), None);
        assert_eq!(c.delegated_read(&out.join("secret")), None);
        assert!(c
            .delegated_read(&ws.join("x/../y"))
            .unwrap()
            .ends_with("/ws/y"));
        // Read-only: nothing may be written through the host either.
        c.sandbox.write_roots = Some(Vec::new().into());
        assert!(c.delegated_write(&ws.join("b.txt"), "b.txt").is_err());
    }
}
