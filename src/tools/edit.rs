//! `edit`: exact-text replacements. Every `oldText` must match exactly once in the original file,
//! edits may not overlap, and all of them are applied at once (or none). Line endings and a BOM are
//! preserved; the file is replaced atomically (through a symlink, its target); the result carries
//! a unified diff. Only regular files of up to 16 MB are edited.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::confine;
use super::files::{self, OpenError};
use super::paths;
use super::read::io_reason;
use super::{str_arg, Tool, ToolContext};
use crate::fs::beneath;
use crate::protocol::message::ToolOutput;

pub struct Edit;

/// The largest file edit reads (the text is held a few times over while it is changed).
const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

impl Tool for Edit {
    fn name(&self) -> &'static str {
        "edit"
    }

    fn description(&self) -> String {
        "Edit a file by replacing exact text. Each edits[].oldText must match exactly one place in the original file (include enough context to make it unique); all edits are applied together.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": {"type": "string", "minLength": 1, "description": "Exact text to find"},
                            "newText": {"type": "string", "description": "Replacement text"}
                        },
                        "required": ["oldText", "newText"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["path", "edits"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let raw = str_arg(args, "path").unwrap_or("");
        match ctx.host_scheme(raw) {
            Err(e) => return ToolOutput::error(e),
            Ok(Some(scheme)) => return ToolOutput::error(format!(
                "edit does not change host-owned files ({}://). Read {raw}, then use the write tool with the complete new content.",
                scheme.scheme
            )),
            Ok(None) => {}
        }
        let path = ctx.resolve(raw);
        let (original, dest) = match source(&path, raw, ctx) {
            Ok(found) => found,
            Err(e) => return ToolOutput::error(e),
        };
        let Ok(text) = String::from_utf8(original) else {
            return ToolOutput::error(format!("Cannot edit {raw}: it is not UTF-8 text"));
        };
        let edits: Vec<(String, String)> = args["edits"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    lf(str_arg(e, "oldText").unwrap_or("")),
                    lf(str_arg(e, "newText").unwrap_or("")),
                )
            })
            .collect();
        let (bom, body) = match text.strip_prefix('\u{feff}') {
            Some(rest) => ("\u{feff}", rest),
            None => ("", text.as_str()),
        };
        let crlf = body.contains("\r\n");
        let normalized = lf(body);
        let updated = match apply(&normalized, &edits, raw) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        // A deadline bounds the diff of a large, much-changed file (it then gets coarser).
        let diff = similar::TextDiff::configure()
            .timeout(DIFF_TIMEOUT)
            .diff_lines(&normalized, &updated)
            .unified_diff()
            .context_radius(3)
            .header(raw, raw)
            .to_string();
        let restored = if crlf {
            updated.replace('\n', "\r\n")
        } else {
            updated
        };
        if ctx.is_cancelled() {
            return ToolOutput::error(format!(
                "The edit of {raw} was aborted; the file is unchanged"
            ));
        }
        let new_text = format!("{bom}{restored}");
        if let Err(e) = dest.write(&path, raw, &new_text, ctx) {
            return ToolOutput::error(e);
        }
        let n = edits.len();
        ToolOutput::text(format!(
            "Successfully applied {n} edit{} to {raw}",
            if n == 1 { "" } else { "s" }
        ))
        .with_details(json!({"diff": diff}))
    }
}

fn lf(s: &str) -> String {
    s.replace("\r\n", "\n")
}

/// Applies every edit against the original text, or explains why none was applied.
fn apply(text: &str, edits: &[(String, String)], path: &str) -> Result<String, String> {
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    for (i, (old, new)) in edits.iter().enumerate() {
        let which = if edits.len() > 1 {
            format!("edits[{i}]: ")
        } else {
            String::new()
        };
        if old.is_empty() {
            return Err(format!("{which}oldText must not be empty"));
        }
        let mut found = text.match_indices(old.as_str());
        let Some((at, _)) = found.next() else {
            return Err(format!("{which}Could not find the exact text in {path}. The oldText must match the file exactly, including whitespace and indentation."));
        };
        let more = found.count();
        if more > 0 {
            return Err(format!("{which}Found {} occurrences of the text in {path}. The oldText must be unique: include more surrounding context.", more + 1));
        }
        spans.push((at, at + old.len(), new.as_str()));
    }
    spans.sort_by_key(|s| s.0);
    if let Some(w) = spans.windows(2).find(|w| w[0].1 > w[1].0) {
        return Err(format!(
            "Edits overlap in {path} (at bytes {} and {}); merge them into one edit.",
            w[0].0, w[1].0
        ));
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for (start, end, new) in spans {
        out.push_str(&text[pos..start]);
        out.push_str(new);
        pos = end;
    }
    out.push_str(&text[pos..]);
    if out == text {
        return Err(format!("The edits leave {path} unchanged"));
    }
    Ok(out)
}

/// Where the edited text goes back to.
enum Dest {
    /// The host serves the file at this `file://` URL.
    Host(String),
    /// The local file, unconfined; through a symlink its target is replaced, and the link stays.
    Disk(std::fs::Metadata),
    /// The local file beneath the write roots, replaced in its confined folder.
    Confined(beneath::Target, std::fs::Metadata),
}

/// Reads the file to edit. Through the host only when it serves both reads and writes:
/// reading its buffer and then writing the disk under it would lose what the user has not saved.
fn source(path: &Path, raw: &str, ctx: &ToolContext) -> Result<(Vec<u8>, Dest), String> {
    if ctx.policy.host_reads && ctx.policy.host_writes {
        let url = ctx.delegated_write(path, raw)?;
        let text = host_file(&url, raw, None, ctx)?;
        return Ok((text.into_bytes(), Dest::Host(url)));
    }
    if let Some(roots) = &ctx.sandbox.write_roots {
        let (target, file, meta) = confine::open_for_edit(roots, path, raw)?;
        let bytes = read_capped(file, &meta, raw)?;
        return Ok((bytes, Dest::Confined(target, meta)));
    }
    let (file, meta) = match files::open_regular(path) {
        Ok(f) => f,
        Err(OpenError::Io(e)) => return Err(format!("Cannot edit {raw}: {}", io_reason(&e))),
        Err(e) => return Err(e.describe(raw)),
    };
    let bytes = read_capped(file, &meta, raw)?;
    Ok((bytes, Dest::Disk(meta)))
}

impl Dest {
    fn write(self, path: &Path, raw: &str, text: &str, ctx: &ToolContext) -> Result<(), String> {
        let io = |e: std::io::Error| format!("Cannot write {raw}: {}", io_reason(&e));
        match self {
            Dest::Host(url) => host_file(&url, raw, Some(text), ctx).map(drop),
            Dest::Disk(meta) => files::write_target(path)
                .and_then(|target| files::replace_file(&target, text.as_bytes(), Some(&meta)))
                .map_err(io),
            Dest::Confined(target, meta) => target
                .replace(text.as_bytes(), Some(&meta))
                .map_err(|e| format!("Cannot write {raw}: {e}")),
        }
    }
}

/// Reads (`content` None) or writes a local file through the host, at a URL already checked
/// against the session's roots (`ToolContext::delegated_write`).
fn host_file(
    url: &str,
    raw: &str,
    content: Option<&str>,
    ctx: &ToolContext,
) -> Result<String, String> {
    let host = ctx
        .host
        .as_ref()
        .ok_or_else(|| format!("No host is attached to edit {raw}"))?;
    let verb = if content.is_some() { "write" } else { "edit" };
    crate::host::uri::request(host, url, content, &|| ctx.is_cancelled())
        .map(|reply| reply.content.unwrap_or_default())
        .map_err(|e| format!("Cannot {verb} {raw}: {e}"))
}

/// The file's text, up to `MAX_EDIT_BYTES` (a regular file, already opened).
fn read_capped(
    file: std::fs::File,
    meta: &std::fs::Metadata,
    raw: &str,
) -> Result<Vec<u8>, String> {
    let too_big = |size: u64| {
        format!(
            "{raw} is {}; edit works on files up to {}. Use bash (e.g. sed -i) to change it.",
            paths::size(size),
            paths::size(MAX_EDIT_BYTES)
        )
    };
    if meta.len() > MAX_EDIT_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // `take` also bounds a file that grows while it is read.
    if let Err(e) = file.take(MAX_EDIT_BYTES + 1).read_to_end(&mut bytes) {
        return Err(format!("Cannot edit {raw}: {}", io_reason(&e)));
    }
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tests::{ctx, text};

    #[test]
    fn several_edits_apply_atomically_and_keep_crlf_and_bom() {
        let (dir, c) = ctx();
        let p = dir.path().join("f.txt");
        std::fs::write(&p, "\u{feff}one\r\ntwo\r\nthree\r\n").unwrap();
        let out = Edit.execute(&json!({"path":"f.txt","edits":[{"oldText":"one","newText":"1"},{"oldText":"three\n","newText":"3\n"}]}), &c);
        assert!(!out.is_error, "{}", text(&out));
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "\u{feff}1\r\ntwo\r\n3\r\n"
        );
        assert!(out.details.unwrap()["diff"]
            .as_str()
            .unwrap()
            .contains("-one"));
    }

    #[test]
    fn no_match_or_many_matches_changes_nothing() {
        let (dir, c) = ctx();
        let p = dir.path().join("f.txt");
        std::fs::write(&p, "a a b").unwrap();
        let out = Edit.execute(&json!({"path":"f.txt","edits":[{"oldText":"b","newText":"c"},{"oldText":"a","newText":"x"}]}), &c);
        assert!(text(&out).contains("Found 2 occurrences"));
        let out = Edit.execute(
            &json!({"path":"f.txt","edits":[{"oldText":"zzz","newText":"c"}]}),
            &c,
        );
        assert!(text(&out).contains("Could not find"));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a a b");
    }

    #[test]
    fn files_over_the_size_limit_are_refused_unread() {
        let (dir, c) = ctx();
        let p = dir.path().join("big.txt");
        std::fs::write(&p, "a").unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(MAX_EDIT_BYTES + 1).unwrap();
        let out = Edit.execute(
            &json!({"path": "big.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
            &c,
        );
        assert!(
            out.is_error && text(&out).contains("edit works on files up to 16.0MB"),
            "{}",
            text(&out)
        );
    }

    #[test]
    fn overlapping_edits_are_refused() {
        assert!(apply(
            "abcdef",
            &[("abc".into(), "x".into()), ("cde".into(), "y".into())],
            "f"
        )
        .unwrap_err()
        .contains("overlap"));
    }

    #[test]
    fn unicode_text_in_paths_with_spaces_and_missing_files() {
        let (dir, c) = ctx();
        std::fs::create_dir(dir.path().join("a dir")).unwrap();
        let p = dir.path().join("a dir/naïve café.txt");
        std::fs::write(&p, "let s = \"日本語\";\nlet e = \"😀\";\n").unwrap();
        let out = Edit.execute(
            &json!({"path": "a dir/naïve café.txt", "edits": [{"oldText": "\"日本語\"", "newText": "\"にほんご\""}]}),
            &c,
        );
        assert!(!out.is_error, "{}", text(&out));
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "let s = \"にほんご\";\nlet e = \"😀\";\n"
        );
        let out = Edit.execute(
            &json!({"path": "a dir/missing.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
            &c,
        );
        assert!(out.is_error);
        assert!(!dir.path().join("a dir/missing.txt").exists());
    }
}
