//! `read`: text files with `offset`/`limit` and head truncation (2000 lines or 50 KB, with a note
//! telling the model how to read on), images as image content, binary files and directories
//! refused with a hint.

use std::io::{BufRead, BufReader, Read as _};

use serde_json::{json, Value};

use super::paths::{self, resolve};
use super::{str_arg, uint_arg, Tool, ToolContext};
use crate::protocol::message::{Content, ToolOutput};

pub const MAX_LINES: usize = 2000;
pub const MAX_BYTES: usize = 50 * 1024;
/// Images larger than this are refused rather than sent to the model.
const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;

pub struct Read;

impl Tool for Read {
    fn name(&self) -> &'static str {
        "read"
    }

    fn description(&self) -> String {
        format!(
            "Read a file. Text output is truncated to {MAX_LINES} lines or {}KB, whichever comes first; use offset and limit to read large files in parts. Images (png, jpeg, gif, webp) are returned as images.",
            MAX_BYTES / 1024
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
                "offset": {"type": "integer", "minimum": 1, "description": "Line number to start from (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read"}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let raw = str_arg(args, "path").unwrap_or("");
        if ctx.host_scheme(raw).is_some() {
            return read_host(raw, ctx);
        }
        let path = resolve(&ctx.cwd, raw);
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) => return ToolOutput::error(format!("Cannot read {raw}: {}", io_reason(&e))),
        };
        if meta.is_dir() {
            return ToolOutput::error(format!(
                "{raw} is a directory. Use the ls tool to list it, or find to search it."
            ));
        }
        let mut head = [0u8; 16];
        let n = match std::fs::File::open(&path).and_then(|mut f| f.read(&mut head)) {
            Ok(n) => n,
            Err(e) => return ToolOutput::error(format!("Cannot read {raw}: {}", io_reason(&e))),
        };
        if let Some(mime) = image_mime(&head[..n]) {
            return read_image(&path, raw, mime, meta.len());
        }
        let offset = uint_arg(args, "offset").unwrap_or(1).max(1) as usize;
        let limit = uint_arg(args, "limit").map(|l| l as usize);
        read_text(&path, raw, offset, limit)
    }
}

/// A host-owned URI: the host answers with the content.
fn read_host(url: &str, ctx: &ToolContext) -> ToolOutput {
    let Some(host) = &ctx.host else {
        return ToolOutput::error(format!("No host is attached to read {url}"));
    };
    match crate::host::uri::request(host, url, None, &|| ctx.is_cancelled()) {
        Ok(r) => {
            let mut text = r.content.unwrap_or_default();
            for note in &r.notes {
                text.push_str(&format!("\n[{note}]"));
            }
            ToolOutput::text(text).with_details(json!({"url": url, "contentType": r.content_type, "notes": r.notes, "immutable": r.immutable}))
        }
        Err(e) => ToolOutput::error(format!("Cannot read {url}: {e}")),
    }
}

pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "file not found".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn image_mime(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn read_image(path: &std::path::Path, raw: &str, mime: &str, len: u64) -> ToolOutput {
    if len > MAX_IMAGE_BYTES {
        return ToolOutput::error(format!(
            "{raw} is an image of {}, over the {} limit",
            paths::size(len),
            paths::size(MAX_IMAGE_BYTES)
        ));
    }
    match std::fs::read(path) {
        Ok(bytes) => ToolOutput {
            content: vec![
                Content::text(format!("Read image file [{mime}]")),
                Content::Image {
                    data: paths::base64(&bytes),
                    mime_type: mime.into(),
                },
            ],
            details: Some(json!({"mimeType": mime, "bytes": len})),
            is_error: false,
        },
        Err(e) => ToolOutput::error(format!("Cannot read {raw}: {}", io_reason(&e))),
    }
}

/// Streams the file: only the requested window is kept, the rest is counted.
fn read_text(path: &std::path::Path, raw: &str, offset: usize, limit: Option<usize>) -> ToolOutput {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return ToolOutput::error(format!("Cannot read {raw}: {}", io_reason(&e))),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let want = limit.unwrap_or(MAX_LINES).min(MAX_LINES);
    let (mut out, mut bytes, mut total, mut shown) = (String::new(), 0usize, 0usize, 0usize);
    let mut cut_by_bytes = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return ToolOutput::error(format!("Cannot read {raw}: {e}")),
        }
        if total == 0 && line.contains(&0) {
            return ToolOutput::error(format!("{raw} is a binary file; it cannot be shown as text. Use bash (e.g. xxd or file) to inspect it."));
        }
        total += 1;
        if total < offset || shown >= want || cut_by_bytes {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        if bytes + text.len() + 1 > MAX_BYTES {
            if shown == 0 {
                return ToolOutput::error(format!(
                    "Line {offset} of {raw} is longer than {}KB. Use bash to read part of it, e.g. head -c 2000.",
                    MAX_BYTES / 1024
                ));
            }
            cut_by_bytes = true;
            continue;
        }
        bytes += text.len() + 1;
        out.push_str(text);
        out.push('\n');
        shown += 1;
    }
    if total > 0 && offset > total {
        return ToolOutput::error(format!(
            "Offset {offset} is beyond the end of {raw} ({total} lines)"
        ));
    }
    let end = offset + shown - 1;
    let more = end < total;
    let details = json!({"totalLines": total, "startLine": offset, "endLine": end, "truncated": more && limit.is_none_or(|l| shown < l)});
    if more {
        let why = if cut_by_bytes {
            format!("{}KB limit", MAX_BYTES / 1024)
        } else if limit.is_some_and(|l| shown == l) {
            "limit".into()
        } else {
            format!("{MAX_LINES}-line limit")
        };
        out.push_str(&format!(
            "\n[Showing lines {offset}-{end} of {total} ({why}). Use offset={} to continue.]",
            end + 1
        ));
    }
    if total == 0 {
        out.push_str("(empty file)");
    }
    ToolOutput::text(out).with_details(details)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tests::ctx;

    #[test]
    fn offset_limit_and_continuation_note() {
        let (dir, c) = ctx();
        let text: String = (1..=10).map(|i| format!("line {i}\r\n")).collect();
        std::fs::write(dir.path().join("a b.txt"), text).unwrap();
        let out = Read.execute(&json!({"path": "a b.txt", "offset": 3, "limit": 2}), &c);
        let t = crate::tools::tests::text(&out);
        assert!(t.starts_with("line 3\nline 4\n"), "{t}");
        assert!(t.contains("Use offset=5 to continue"), "{t}");
        let out = Read.execute(&json!({"path": "a b.txt", "offset": 11}), &c);
        assert!(out.is_error);
    }

    #[test]
    fn refuses_dirs_binaries_and_missing_files() {
        let (dir, c) = ctx();
        assert!(Read.execute(&json!({"path": "."}), &c).is_error);
        std::fs::write(dir.path().join("bin"), [0u8, 1, 2, 3]).unwrap();
        let out = Read.execute(&json!({"path": "bin"}), &c);
        assert!(out.is_error && crate::tools::tests::text(&out).contains("binary"));
        let out = Read.execute(&json!({"path": "nope"}), &c);
        assert!(crate::tools::tests::text(&out).contains("file not found"));
    }

    #[test]
    fn images_become_image_content() {
        let (dir, c) = ctx();
        std::fs::write(dir.path().join("i.png"), b"\x89PNG\r\n\x1a\n0000").unwrap();
        let out = Read.execute(&json!({"path": "i.png"}), &c);
        assert!(
            matches!(out.content[1], Content::Image { ref mime_type, .. } if mime_type == "image/png")
        );
    }

    #[test]
    fn head_truncation_by_lines() {
        let (dir, c) = ctx();
        let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.path().join("big"), text).unwrap();
        let out = Read.execute(&json!({"path": "big"}), &c);
        let t = crate::tools::tests::text(&out);
        assert!(
            t.contains("[Showing lines 1-2000 of 2500"),
            "{}",
            &t[t.len() - 100..]
        );
    }

    #[test]
    fn huge_unicode_files_are_cut_on_a_character_and_read_on_by_offset() {
        let (dir, c) = ctx();
        // ~12 MB of lines mixing 2-, 3- and 4-byte characters; any byte cut lands mid-character.
        let line = "é日本語😀 ünïcödé ".repeat(6);
        let text: String = (1..=100_000).map(|i| format!("{i} {line}\n")).collect();
        let dir_with_space = dir.path().join("dir with space");
        std::fs::create_dir(&dir_with_space).unwrap();
        std::fs::write(dir_with_space.join("große datei.txt"), &text).unwrap();

        let out = Read.execute(&json!({"path": "dir with space/große datei.txt"}), &c);
        assert!(!out.is_error);
        let t = crate::tools::tests::text(&out);
        let (body, note) = t.rsplit_once("\n[Showing lines 1-").unwrap();
        assert!(body.len() <= 50 * 1024, "{} bytes", body.len());
        assert!(body.lines().all(|l| l.ends_with(&line)), "a line was cut");
        assert!(
            note.contains("of 100000") && note.contains("Use offset="),
            "{note}"
        );

        let out = Read.execute(
            &json!({"path": "dir with space/große datei.txt", "offset": 99_999}),
            &c,
        );
        let t = crate::tools::tests::text(&out);
        assert!(t.starts_with("99999 é日本語😀"), "{}", &t[..40]);
        assert!(t.contains("100000 é日本語😀"));
    }
}
