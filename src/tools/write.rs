//! `write`: creates parent folders and replaces the file atomically (through a symlink, its
//! target); reports the bytes written. Only regular files are written. With write roots set,
//! the write lands beneath one of them or is refused (`confine.rs`).

use std::path::Path;

use serde_json::{json, Value};

use super::files;
use super::read::io_reason;
use super::{str_arg, Tool, ToolContext};
use crate::host::uri::UriScheme;
use crate::protocol::message::ToolOutput;

pub struct Write;

impl Tool for Write {
    fn name(&self) -> &'static str {
        "write"
    }

    fn description(&self) -> String {
        "Write content to a file. Creates the file if it does not exist, overwrites it if it does, and creates parent directories.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
                "content": {"type": "string", "description": "Content to write"}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let raw = str_arg(args, "path").unwrap_or("");
        let content = str_arg(args, "content").unwrap_or("");
        match ctx.host_scheme(raw) {
            Err(e) => ToolOutput::error(e),
            Ok(Some(scheme)) => write_host(raw, content, scheme, ctx),
            Ok(None) if ctx.policy.host_writes => {
                match ctx.delegated_write(&ctx.resolve(raw), raw) {
                    Ok(url) => write_through_host(&url, raw, content, ctx),
                    Err(e) => ToolOutput::error(e),
                }
            }
            Ok(None) => match &ctx.sandbox.write_roots {
                Some(roots) => super::confine::write(roots, &ctx.resolve(raw), raw, content),
                None => write_local(&ctx.resolve(raw), raw, content),
            },
        }
    }
}

/// A host-owned URI: the host stores the content.
fn write_host(raw: &str, content: &str, scheme: &UriScheme, ctx: &ToolContext) -> ToolOutput {
    if !scheme.writable || scheme.immutable {
        return ToolOutput::error(format!(
            "{raw} cannot be written: the host registered {}:// as read-only",
            scheme.scheme
        ));
    }
    let Some(host) = &ctx.host else {
        return ToolOutput::error(format!("No host is attached to write {raw}"));
    };
    match crate::host::uri::request(host, raw, Some(content), &|| ctx.is_cancelled()) {
        Ok(_) => ToolOutput::text(format!(
            "Successfully wrote {} bytes to {raw}",
            content.len()
        ))
        .with_details(json!({"bytes": content.len(), "url": raw})),
        Err(e) => ToolOutput::error(format!("Cannot write {raw}: {e}")),
    }
}

/// A local file the host writes (an editor saves it through its buffer), at a URL already
/// checked against the session's roots.
fn write_through_host(url: &str, raw: &str, content: &str, ctx: &ToolContext) -> ToolOutput {
    let Some(host) = &ctx.host else {
        return ToolOutput::error(format!("No host is attached to write {raw}"));
    };
    match crate::host::uri::request(host, url, Some(content), &|| ctx.is_cancelled()) {
        Ok(_) => ToolOutput::text(format!(
            "Successfully wrote {} bytes to {raw}",
            content.len()
        ))
        .with_details(json!({"bytes": content.len()})),
        Err(e) => ToolOutput::error(format!("Cannot write {raw}: {e}")),
    }
}

/// A local file, replaced atomically; through a symlink, the link's target is replaced.
fn write_local(path: &Path, raw: &str, content: &str) -> ToolOutput {
    let fail =
        |e: std::io::Error| ToolOutput::error(format!("Cannot write {raw}: {}", io_reason(&e)));
    let target = match files::write_target(path) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let old = match std::fs::symlink_metadata(&target) {
        Ok(m) if m.is_dir() => return ToolOutput::error(format!("{raw} is a directory")),
        Ok(m) if !m.is_file() => {
            return ToolOutput::error(files::special_message(
                raw,
                files::special_kind(m.file_type()),
            ))
        }
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return fail(e),
    };
    if let Some(parent) = target.parent() {
        if let Err(e) = std::fs::create_dir_all(parent) {
            return ToolOutput::error(format!(
                "Cannot create {}: {}",
                parent.display(),
                io_reason(&e)
            ));
        }
    }
    match files::replace_file(&target, content.as_bytes(), old.as_ref()) {
        Ok(()) => ToolOutput::text(format!(
            "Successfully wrote {} bytes to {raw}",
            content.len()
        ))
        .with_details(json!({"bytes": content.len()})),
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tests::{ctx, text};

    #[test]
    fn creates_parents_and_reports_bytes() {
        let (dir, c) = ctx();
        let out = Write.execute(&json!({"path": "a/b c/d.txt", "content": "héllo"}), &c);
        assert_eq!(text(&out), "Successfully wrote 6 bytes to a/b c/d.txt");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b c/d.txt")).unwrap(),
            "héllo"
        );
    }

    #[test]
    fn permission_denied_is_an_error() {
        let (dir, c) = ctx();
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
        let out = Write.execute(&json!({"path": "ro/x", "content": "x"}), &c);
        // Root ignores directory permissions; the check only holds for ordinary users.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                out.is_error && text(&out).contains("permission denied"),
                "{}",
                text(&out)
            );
        }
    }
}
