//! `grep`: regex (or literal) search over files, respecting `.gitignore`, skipping binary files,
//! on the `ignore` crate's parallel walker. Bounded: `limit` matches (default 100), 50 KB of
//! output, match lines cut at 500 characters, each with a note.

use std::io::{BufRead, BufReader, Read as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use globset::Glob;
use regex::{Regex, RegexBuilder};
use serde_json::{json, Value};

use super::paths::{clip_line, resolve};
use super::{str_arg, uint_arg, Tool, ToolContext};
use crate::protocol::message::ToolOutput;

const DEFAULT_LIMIT: usize = 100;
const MAX_BYTES: usize = 50 * 1024;
const MAX_LINE_CHARS: usize = 500;

pub struct Grep;

struct Query {
    regex: Regex,
    context: usize,
}

/// One file's hits: (line number, text, is_match).
type FileHits = (String, Vec<(usize, String, bool)>);

impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> String {
        format!("Search file contents with a regular expression (or a literal string). Respects .gitignore and skips binary files. At most {DEFAULT_LIMIT} matches unless limit is given; long lines are cut at {MAX_LINE_CHARS} characters.")
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression (or literal text with literal: true)"},
                "path": {"type": "string", "description": "File or directory to search (default: current directory)"},
                "glob": {"type": "string", "description": "Only search files whose name matches this glob, e.g. '*.rs'"},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search"},
                "literal": {"type": "boolean", "description": "Treat pattern as literal text"},
                "context": {"type": "integer", "minimum": 0, "description": "Lines of context around each match"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of matches"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let pattern = str_arg(args, "pattern").unwrap_or("");
        let literal = args
            .get("literal")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let source = if literal {
            regex::escape(pattern)
        } else {
            pattern.to_string()
        };
        let regex = match RegexBuilder::new(&source)
            .case_insensitive(
                args.get("ignoreCase")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            )
            .build()
        {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(format!("Invalid regex: {e}")),
        };
        let glob = match str_arg(args, "glob")
            .map(|g| Glob::new(g).map(|g| g.compile_matcher()))
            .transpose()
        {
            Ok(g) => g,
            Err(e) => return ToolOutput::error(format!("Invalid glob: {e}")),
        };
        let raw = str_arg(args, "path").unwrap_or(".");
        let root = resolve(&ctx.cwd, raw);
        if !root.exists() {
            return ToolOutput::error(format!("{raw} does not exist"));
        }
        let limit = uint_arg(args, "limit")
            .map(|l| l as usize)
            .unwrap_or(DEFAULT_LIMIT);
        let query = Query {
            regex,
            context: uint_arg(args, "context").unwrap_or(0) as usize,
        };
        let (mut files, matches) = search(&root, &query, glob.as_ref(), limit, ctx);
        files.sort_by(|a, b| a.0.cmp(&b.0));
        render(files, matches, limit)
    }
}

fn search(
    root: &std::path::Path,
    q: &Query,
    glob: Option<&globset::GlobMatcher>,
    limit: usize,
    ctx: &ToolContext,
) -> (Vec<FileHits>, usize) {
    let results = Mutex::new(Vec::new());
    let matches = AtomicUsize::new(0);
    let base = if root.is_file() {
        root.parent().unwrap_or(root).to_path_buf()
    } else {
        root.to_path_buf()
    };
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build_parallel();
    walker.run(|| {
        Box::new(|entry| {
            if ctx.is_cancelled() || matches.load(Ordering::Relaxed) >= limit {
                return ignore::WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file())
                || glob.is_some_and(|g| !g.is_match(entry.file_name()))
            {
                return ignore::WalkState::Continue;
            }
            if let Some(hits) = search_file(entry.path(), q) {
                let n = hits.iter().filter(|h| h.2).count();
                matches.fetch_add(n, Ordering::Relaxed);
                let rel = entry
                    .path()
                    .strip_prefix(&base)
                    .unwrap_or(entry.path())
                    .display()
                    .to_string();
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((rel, hits));
            }
            ignore::WalkState::Continue
        })
    });
    (
        results.into_inner().unwrap_or_else(|p| p.into_inner()),
        matches.into_inner(),
    )
}

fn search_file(path: &std::path::Path, q: &Query) -> Option<Vec<(usize, String, bool)>> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut head = [0u8; 1024];
    let n = file.read(&mut head).ok()?;
    if head[..n].contains(&0) {
        return None;
    }
    let reader = BufReader::new(std::io::Cursor::new(head[..n].to_vec()).chain(file));
    let lines: Vec<String> = reader
        .split(b'\n')
        .map_while(Result::ok)
        .map(|l| {
            String::from_utf8_lossy(&l)
                .trim_end_matches('\r')
                .to_string()
        })
        .collect();
    let hit_lines: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| q.regex.is_match(l))
        .map(|(i, _)| i)
        .collect();
    if hit_lines.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    let mut last_shown: Option<usize> = None;
    for &i in &hit_lines {
        let from = i
            .saturating_sub(q.context)
            .max(last_shown.map_or(0, |l| l + 1));
        let to = (i + q.context).min(lines.len() - 1);
        for (j, line) in lines.iter().enumerate().take(to + 1).skip(from) {
            out.push((j + 1, line.clone(), hit_lines.binary_search(&j).is_ok()));
        }
        last_shown = Some(to);
    }
    Some(out)
}

fn render(files: Vec<FileHits>, total_matches: usize, limit: usize) -> ToolOutput {
    let (mut out, mut shown, mut clipped, mut cut) = (String::new(), 0usize, false, false);
    'files: for (path, hits) in &files {
        for (line_no, text, is_match) in hits {
            if *is_match && shown >= limit {
                break 'files;
            }
            let (text, was_clipped) = clip_line(text, MAX_LINE_CHARS);
            clipped |= was_clipped;
            let sep = if *is_match { ':' } else { '-' };
            let line = format!("{path}{sep}{line_no}{sep} {text}\n");
            if out.len() + line.len() > MAX_BYTES {
                cut = true;
                break 'files;
            }
            out.push_str(&line);
            shown += usize::from(*is_match);
        }
    }
    if files.is_empty() {
        return ToolOutput::text("No matches found").with_details(json!({"matches": 0}));
    }
    if total_matches > shown || cut {
        out.push_str(&format!("\n[{shown} matches shown; the search stopped at the limit of {limit}. Refine the pattern or use path/glob to narrow it.]"));
    }
    if clipped {
        out.push_str(&format!(
            "\n[Some lines were cut at {MAX_LINE_CHARS} characters. Use read to see them whole.]"
        ));
    }
    ToolOutput::text(out)
        .with_details(json!({"matches": shown, "truncated": total_matches > shown || cut}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tests::{ctx, text};

    #[test]
    fn finds_matches_with_context_and_skips_binary() {
        let (dir, c) = ctx();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo needle\nthree\n").unwrap();
        std::fs::write(dir.path().join("b.bin"), b"needle\0").unwrap();
        let out = Grep.execute(&json!({"pattern": "needle", "context": 1}), &c);
        assert_eq!(
            text(&out),
            "a.txt-1- one\na.txt:2: two needle\na.txt-3- three\n"
        );
        let out = Grep.execute(
            &json!({"pattern": "NEEDLE", "ignoreCase": true, "glob": "*.txt"}),
            &c,
        );
        assert_eq!(text(&out), "a.txt:2: two needle\n");
        let out = Grep.execute(&json!({"pattern": "(", "literal": true}), &c);
        assert_eq!(text(&out), "No matches found");
        assert!(Grep.execute(&json!({"pattern": "("}), &c).is_error);
    }

    #[test]
    fn limits_matches_and_line_length() {
        let (dir, c) = ctx();
        let long = "x".repeat(600);
        let body: String = (0..50).map(|_| format!("hit {long}\n")).collect();
        std::fs::write(dir.path().join("f"), body).unwrap();
        let out = Grep.execute(&json!({"pattern": "hit", "limit": 3}), &c);
        let t = text(&out);
        assert_eq!(t.lines().filter(|l| l.starts_with("f:")).count(), 3);
        assert!(
            t.contains("stopped at the limit of 3") && t.contains("cut at 500"),
            "{t}"
        );
    }

    #[test]
    fn unicode_names_and_text_in_paths_with_spaces() {
        let (dir, c) = ctx();
        std::fs::create_dir(dir.path().join("my docs")).unwrap();
        std::fs::write(
            dir.path().join("my docs/résumé.md"),
            "naïve\ncafé ☕ ok\r\n",
        )
        .unwrap();
        let out = Grep.execute(&json!({"pattern": "café ☕"}), &c);
        assert_eq!(text(&out), "my docs/résumé.md:2: café ☕ ok\n");
        let out = Grep.execute(
            &json!({"pattern": "NAÏVE", "ignoreCase": true, "path": "my docs"}),
            &c,
        );
        assert!(text(&out).contains("résumé.md:1: naïve"), "{}", text(&out));
        assert!(
            Grep.execute(&json!({"pattern": "x", "path": "no such dir"}), &c)
                .is_error
        );
    }
}
