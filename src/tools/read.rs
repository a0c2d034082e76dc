//! `read`: text files with `offset`/`limit` and head truncation (2000 lines or 50 KB, with a note
//! telling the model how to read on), images as image content, binary files and directories
//! refused with a hint.

use std::io::Read as _;

use serde_json::{json, Value};

use super::files::{self, Lines, OpenError, Stop};
use super::paths;
use super::{str_arg, uint_arg, Tool, ToolContext};
use crate::protocol::message::{Content, ToolOutput};

pub const MAX_LINES: usize = 2000;
pub const MAX_BYTES: usize = 50 * 1024;
/// Images larger than this are refused rather than sent to the model.
const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;
/// Room left after the shown lines for the notes, so the whole result fits in `MAX_BYTES`.
const NOTE_ROOM: usize = 1024;
/// How far past the shown lines the rest of the file is still counted for the "of N lines"
/// total; a bigger file is described by its size instead of being read to the end.
const COUNT_AHEAD: u64 = 32 * 1024 * 1024;
/// A NUL in this much of the file's head marks it as binary.
const BINARY_SNIFF: usize = 8 * 1024;

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
        match ctx.host_scheme(raw) {
            Err(e) => return ToolOutput::error(e),
            Ok(Some(_)) => return read_host(raw, ctx),
            Ok(None) => {}
        }
        let path = ctx.resolve(raw);
        let window = || Window {
            offset: uint_arg(args, "offset").unwrap_or(1).max(1) as usize,
            limit: uint_arg(args, "limit").map(|l| l as usize),
        };
        // A path outside the session's roots is read from disk: the host is never asked.
        if let Some(url) = ctx
            .policy
            .host_reads
            .then(|| ctx.delegated_read(&path))
            .flatten()
        {
            return read_through_host(&url, raw, window(), ctx);
        }
        let (file, meta) = match files::open_regular(&path) {
            Ok(f) => f,
            Err(OpenError::Directory) => {
                return ToolOutput::error(format!(
                    "{raw} is a directory. Use the ls tool to list it, or find to search it."
                ))
            }
            Err(e) => return ToolOutput::error(e.describe(raw)),
        };
        let cancelled = || ctx.is_cancelled();
        let mut lines = Lines::new(file, &cancelled);
        let head = match lines.peek() {
            Ok(h) => h,
            Err(e) => return ToolOutput::error(format!("Cannot read {raw}: {}", io_reason(&e))),
        };
        if let Some(mime) = image_mime(&head[..head.len().min(16)]) {
            return read_image(lines, raw, mime, meta.len());
        }
        if head[..head.len().min(BINARY_SNIFF)].contains(&0) {
            return ToolOutput::error(format!("{raw} is a binary file; it cannot be shown as text. Use bash (e.g. xxd or file) to inspect it."));
        }
        read_text(lines, raw, window(), meta.len())
    }
}

/// A local file the host serves (an editor's buffer, saved or not), windowed and capped as a
/// file read from disk is.
fn read_through_host(url: &str, raw: &str, w: Window, ctx: &ToolContext) -> ToolOutput {
    let Some(host) = &ctx.host else {
        return ToolOutput::error(format!("No host is attached to read {raw}"));
    };
    let text = match crate::host::uri::request(host, url, None, &|| ctx.is_cancelled()) {
        Ok(reply) => reply.content.unwrap_or_default(),
        Err(e) => return ToolOutput::error(format!("Cannot read {raw}: {e}")),
    };
    read_buffer(&text, raw, w)
}

fn read_buffer(text: &str, raw: &str, w: Window) -> ToolOutput {
    let want = w.limit.unwrap_or(MAX_LINES).min(MAX_LINES);
    let budget = MAX_BYTES - NOTE_ROOM;
    let mut shown = Shown::default();
    let mut total = 0usize;
    let body = text.strip_suffix('\n').unwrap_or(text);
    if !text.is_empty() {
        for line in body.split('\n') {
            total += 1;
            if total >= w.offset && shown.lines < want && !shown.full {
                take_line(
                    &mut shown,
                    total,
                    line.as_bytes(),
                    line.len() as u64,
                    budget,
                );
            }
        }
    }
    if total > 0 && w.offset > total {
        return ToolOutput::error(format!(
            "Offset {} is beyond the end of {raw} ({total} lines)",
            w.offset
        ));
    }
    finish(shown, raw, &w, Some(total), text.len() as u64)
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

fn read_image(lines: Lines, raw: &str, mime: &str, len: u64) -> ToolOutput {
    if len > MAX_IMAGE_BYTES {
        return ToolOutput::error(format!(
            "{raw} is an image of {}, over the {} limit",
            paths::size(len),
            paths::size(MAX_IMAGE_BYTES)
        ));
    }
    let mut bytes = Vec::new();
    // The size was checked on the open file; `take` also bounds a file that grew since.
    let read = lines
        .into_inner()
        .take(MAX_IMAGE_BYTES + 1)
        .read_to_end(&mut bytes);
    match read {
        Ok(_) if bytes.len() as u64 > MAX_IMAGE_BYTES => ToolOutput::error(format!(
            "{raw} grew past the {} image limit while being read",
            paths::size(MAX_IMAGE_BYTES)
        )),
        Ok(_) => ToolOutput {
            content: vec![
                Content::text(format!("Read image file [{mime}]")),
                Content::Image {
                    data: paths::base64(&bytes),
                    mime_type: mime.into(),
                },
            ],
            details: Some(json!({"mimeType": mime, "bytes": bytes.len()})),
            is_error: false,
        },
        Err(e) => ToolOutput::error(format!("Cannot read {raw}: {}", io_reason(&e))),
    }
}

/// The lines asked for: from `offset` (1-based), at most `limit`.
struct Window {
    offset: usize,
    limit: Option<usize>,
}

/// What was read for the window.
#[derive(Default)]
struct Shown {
    text: String,
    lines: usize,
    /// The byte budget ended the window before the line limit.
    full: bool,
    /// The first line shown was too long and only its head is shown: (line, whole length, bytes
    /// shown).
    cut: Option<(usize, u64, usize)>,
}

/// Streams the file: only the window is kept (each line capped at what still fits), the lines
/// before it are skipped, and the lines after it are counted for a while.
fn read_text(mut lines: Lines, raw: &str, w: Window, size: u64) -> ToolOutput {
    let want = w.limit.unwrap_or(MAX_LINES).min(MAX_LINES);
    let budget = MAX_BYTES - NOTE_ROOM;
    let mut shown = Shown::default();
    let (mut total, mut known) = (0usize, true);
    let mut buf = Vec::new();
    loop {
        let line_no = total + 1;
        let in_window = line_no >= w.offset && shown.lines < want && !shown.full;
        if line_no >= w.offset && !in_window && lines.until == u64::MAX {
            lines.until = lines.offset.saturating_add(COUNT_AHEAD);
        }
        let cap = if in_window {
            budget - shown.text.len()
        } else {
            0
        };
        let len = match lines.next(&mut buf, cap) {
            Ok(Some(n)) => n,
            Ok(None) => break,
            Err(Stop::Limit) => {
                known = false;
                break;
            }
            Err(Stop::Cancelled) => return ToolOutput::error(format!("Reading {raw} was aborted")),
            Err(Stop::Io(e)) => {
                return ToolOutput::error(format!("Cannot read {raw}: {}", io_reason(&e)))
            }
        };
        total += 1;
        if in_window {
            take_line(&mut shown, line_no, &buf, len, budget);
        }
    }
    if known && total > 0 && w.offset > total {
        return ToolOutput::error(format!(
            "Offset {} is beyond the end of {raw} ({total} lines)",
            w.offset
        ));
    }
    finish(shown, raw, &w, known.then_some(total), size)
}

/// Adds one line of the window to what is shown, or ends the window when it does not fit. A
/// first line too long for the budget is cut, on a character boundary.
fn take_line(shown: &mut Shown, line_no: usize, buf: &[u8], len: u64, budget: usize) {
    let whole = len == buf.len() as u64;
    let bytes = if whole {
        buf.strip_suffix(b"\r").unwrap_or(buf)
    } else {
        files::whole_chars(buf)
    };
    let text = String::from_utf8_lossy(bytes);
    let room = budget - shown.text.len();
    if whole && text.len() < room {
        shown.text.push_str(&text);
        shown.text.push('\n');
        shown.lines += 1;
        return;
    }
    shown.full = true;
    if shown.lines > 0 {
        return;
    }
    let mut end = text.len().min(room - 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    shown.text.push_str(&text[..end]);
    shown.text.push('\n');
    shown.lines = 1;
    shown.cut = Some((line_no, len, end));
}

/// The shown lines and the notes that say what was left out and how to read on.
fn finish(shown: Shown, raw: &str, w: &Window, total: Option<usize>, size: u64) -> ToolOutput {
    let Shown {
        mut text,
        lines,
        full,
        cut,
    } = shown;
    let (offset, end) = (w.offset, w.offset + lines - 1);
    let more = total.is_none_or(|t| end < t);
    let details = json!({"totalLines": total, "startLine": offset, "endLine": end, "bytes": size,
        "truncated": (more && w.limit.is_none_or(|l| lines < l)) || cut.is_some()});
    if let Some((line, len, kept)) = cut {
        // The note must fit in NOTE_ROOM: a very long path is not repeated in it.
        let file = if raw.len() <= 200 && !raw.contains('\'') {
            format!("'{raw}'")
        } else {
            "FILE".into()
        };
        text.push_str(&format!(
            "\n[Line {line} is {} long; only its first {} are shown. Use bash to read the rest of it, e.g. sed -n '{line}p' {file} | cut -b {}-{}]",
            paths::size(len),
            paths::size(kept as u64),
            kept + 1,
            kept + 40_000
        ));
    }
    if more {
        let why = if full {
            format!("{}KB limit", MAX_BYTES / 1024)
        } else if w.limit.is_some_and(|l| lines == l) {
            "limit".into()
        } else {
            format!("{MAX_LINES}-line limit")
        };
        let of = match total {
            Some(t) => format!("of {t}"),
            None => format!("of a {} file", paths::size(size)),
        };
        text.push_str(&format!(
            "\n[Showing lines {offset}-{end} {of} ({why}). Use offset={} to continue.]",
            end + 1
        ));
    }
    if total == Some(0) {
        text.push_str("(empty file)");
    }
    ToolOutput::text(text).with_details(details)
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
    fn a_cancelled_read_stops_with_an_error() {
        let (dir, c) = ctx();
        std::fs::write(dir.path().join("f"), "a\nb\n").unwrap();
        c.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        let out = Read.execute(&json!({"path": "f"}), &c);
        assert!(out.is_error, "{}", crate::tools::tests::text(&out));
        assert!(crate::tools::tests::text(&out).contains("aborted"));
    }

    #[test]
    fn a_file_too_long_to_count_is_described_by_its_size() {
        let (dir, c) = ctx();
        let p = dir.path().join("log");
        let head: String = (1..=3000).map(|i| format!("{i}\n")).collect();
        std::fs::write(&p, head).unwrap();
        let f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        // A hole reads as one long line of zeros, past the counting horizon.
        f.set_len(COUNT_AHEAD * 2).unwrap();
        let out = Read.execute(&json!({"path": "log"}), &c);
        let t = crate::tools::tests::text(&out);
        assert!(
            t.ends_with("[Showing lines 1-2000 of a 64.0MB file (2000-line limit). Use offset=2001 to continue.]"),
            "{}",
            &t[t.len() - 120..]
        );
        assert_eq!(out.details.unwrap()["totalLines"], Value::Null);
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
