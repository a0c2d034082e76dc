//! `grep`: regex (or literal) search over files, respecting `.gitignore`, skipping binary files,
//! on the `ignore` crate's parallel walker. Bounded: `limit` matches (default 100), 50 KB of
//! output, match lines cut at 500 characters, each with a note. Files are read line by line and
//! only the first 1 MB of a line is searched, so a file without newlines costs no more memory.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use globset::Glob;
use regex::{Regex, RegexBuilder};
use serde_json::{json, Value};

use super::files::{self, Lines};
use super::paths::clip_line;
use super::{str_arg, uint_arg, Tool, ToolContext};
use crate::protocol::message::ToolOutput;

const DEFAULT_LIMIT: usize = 100;
const MAX_BYTES: usize = 50 * 1024;
const MAX_LINE_CHARS: usize = 500;
/// Room left after the lines for the notes, so the whole result fits in `MAX_BYTES`.
const NOTE_ROOM: usize = 1024;
/// How much of one line is searched: a file with no newlines costs this, not its size.
const MAX_SCAN_LINE: usize = 1024 * 1024;

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
        let root = match ctx.local_only("grep", raw) {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(e),
        };
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
        let budget = Budget {
            limit,
            matches: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            long_lines: AtomicBool::new(false),
        };
        let mut files = search(&root, &query, glob.as_ref(), &budget, ctx);
        if ctx.is_cancelled() {
            return ToolOutput::error("The search was aborted");
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        render(files, &budget)
    }
}

/// Shared by the walker's threads: what has been collected so far, against the limits.
struct Budget {
    limit: usize,
    matches: AtomicUsize,
    /// Bytes of collected lines: no more is kept than the output can show.
    bytes: AtomicUsize,
    /// A line longer than `MAX_SCAN_LINE` was searched only in its head.
    long_lines: AtomicBool,
}

impl Budget {
    fn spent(&self) -> bool {
        self.matches.load(Ordering::Relaxed) >= self.limit
            || self.bytes.load(Ordering::Relaxed) > MAX_BYTES
    }
}

fn search(
    root: &std::path::Path,
    q: &Query,
    glob: Option<&globset::GlobMatcher>,
    budget: &Budget,
    ctx: &ToolContext,
) -> Vec<FileHits> {
    let results = Mutex::new(Vec::new());
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
            if ctx.is_cancelled() || budget.spent() {
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
            if let Some(hits) = search_file(entry.path(), q, budget, ctx) {
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
    results.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// Collects one file's matches with their context, line by line: each line is read up to
/// `MAX_SCAN_LINE` bytes, kept only when it is shown (cut at `MAX_LINE_CHARS`), and reading
/// stops at the match limit, the output limit or cancellation.
fn search_file(
    path: &std::path::Path,
    q: &Query,
    budget: &Budget,
    ctx: &ToolContext,
) -> Option<Vec<(usize, String, bool)>> {
    let (file, _) = files::open_regular(path).ok()?;
    let cancelled = || ctx.is_cancelled();
    let mut lines = Lines::new(file, &cancelled);
    let head = lines.peek().ok()?;
    if head[..head.len().min(1024)].contains(&0) {
        return None;
    }
    let mut out = Vec::new();
    let mut keep = |line_no: usize, text: &str, is_match: bool| {
        let (text, _) = clip_line(text, MAX_LINE_CHARS);
        budget.bytes.fetch_add(text.len() + 16, Ordering::Relaxed);
        out.push((line_no, text, is_match));
    };
    // The lines before the next match that may become its leading context.
    let mut before: VecDeque<(usize, String)> = VecDeque::new();
    let (mut before_bytes, mut after, mut line_no) = (0usize, 0usize, 0usize);
    let mut buf = Vec::new();
    while let Ok(Some(len)) = lines.next(&mut buf, MAX_SCAN_LINE) {
        line_no += 1;
        if len > buf.len() as u64 {
            budget.long_lines.store(true, Ordering::Relaxed);
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches('\r');
        if q.regex.is_match(text) {
            if budget.matches.fetch_add(1, Ordering::Relaxed) >= budget.limit {
                break;
            }
            for (n, t) in before.drain(..) {
                keep(n, &t, false);
            }
            before_bytes = 0;
            keep(line_no, text, true);
            after = q.context;
        } else if after > 0 {
            keep(line_no, text, false);
            after -= 1;
        } else if q.context > 0 {
            let (clipped, _) = clip_line(text, MAX_LINE_CHARS);
            before_bytes += clipped.len();
            before.push_back((line_no, clipped));
            while before.len() > q.context || before_bytes > MAX_BYTES {
                let (_, dropped) = before.pop_front().unwrap_or_default();
                before_bytes -= dropped.len();
            }
        }
        if budget.bytes.load(Ordering::Relaxed) > MAX_BYTES || (after == 0 && budget.spent()) {
            break;
        }
    }
    out.iter().any(|h| h.2).then_some(out)
}

fn render(files: Vec<FileHits>, budget: &Budget) -> ToolOutput {
    let limit = budget.limit;
    let total_matches = budget.matches.load(Ordering::Relaxed);
    let (mut out, mut shown, mut clipped) = (String::new(), 0usize, false);
    let mut cut = budget.bytes.load(Ordering::Relaxed) > MAX_BYTES;
    'files: for (path, hits) in &files {
        for (line_no, text, is_match) in hits {
            if *is_match && shown >= limit {
                break 'files;
            }
            let (text, was_clipped) = clip_line(text, MAX_LINE_CHARS);
            clipped |= was_clipped;
            let sep = if *is_match { ':' } else { '-' };
            let line = format!("{path}{sep}{line_no}{sep} {text}\n");
            if out.len() + line.len() > MAX_BYTES - NOTE_ROOM {
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
    let limited = total_matches >= limit;
    if cut {
        out.push_str(&format!("\n[{shown} matches shown; the output reached the {}KB limit. Refine the pattern or use path/glob to narrow it.]", MAX_BYTES / 1024));
    } else if limited {
        out.push_str(&format!("\n[{shown} matches shown; the search stopped at the limit of {limit}. Refine the pattern or use path/glob to narrow it.]"));
    }
    if clipped {
        out.push_str(&format!(
            "\n[Some lines were cut at {MAX_LINE_CHARS} characters. Use read to see them whole.]"
        ));
    }
    if budget.long_lines.load(Ordering::Relaxed) {
        out.push_str(&format!(
            "\n[Lines longer than {}MB were searched only in their first {}MB.]",
            MAX_SCAN_LINE >> 20,
            MAX_SCAN_LINE >> 20
        ));
    }
    ToolOutput::text(out).with_details(json!({"matches": shown, "truncated": limited || cut}))
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
