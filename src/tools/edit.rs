//! `edit`: exact-text replacements. Every `oldText` must match exactly once in the original file,
//! edits may not overlap, and all of them are applied at once (or none). Line endings and a BOM are
//! preserved; the file is replaced atomically; the result carries a unified diff.

use serde_json::{json, Value};

use super::paths::resolve;
use super::read::io_reason;
use super::{str_arg, Tool, ToolContext};
use crate::protocol::message::ToolOutput;

pub struct Edit;

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
        if let Some(scheme) = ctx.host_scheme(raw) {
            return ToolOutput::error(format!(
                "edit does not change host-owned files ({}://). Read {raw}, then use the write tool with the complete new content.",
                scheme.scheme
            ));
        }
        let path = resolve(&ctx.cwd, raw);
        let original = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => return ToolOutput::error(format!("Cannot edit {raw}: {}", io_reason(&e))),
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
        let diff = similar::TextDiff::from_lines(&normalized, &updated)
            .unified_diff()
            .context_radius(3)
            .header(raw, raw)
            .to_string();
        let restored = if crlf {
            updated.replace('\n', "\r\n")
        } else {
            updated
        };
        if let Err(e) = replace_file(&path, format!("{bom}{restored}").as_bytes()) {
            return ToolOutput::error(format!("Cannot write {raw}: {}", io_reason(&e)));
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

/// Writes beside the file and renames over it, keeping its permissions: no partial file on failure.
fn replace_file(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let perms = std::fs::metadata(path)?.permissions();
    let tmp = path.with_file_name(format!(
        ".{}.gjc-edit-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let result = std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::set_permissions(&tmp, perms))
        .and_then(|_| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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
