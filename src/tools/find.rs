//! `find`: files matching a glob under a directory, respecting `.gitignore`, with a parallel
//! walker (the `ignore` crate) so large trees stay fast. A pattern without `/` matches file names;
//! with `/` it matches the path relative to the search directory.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use globset::{GlobBuilder, GlobMatcher};
use serde_json::{json, Value};

use super::{str_arg, uint_arg, Tool, ToolContext};
use crate::protocol::message::ToolOutput;

const DEFAULT_LIMIT: usize = 1000;
const MAX_BYTES: usize = 50 * 1024;

pub struct Find;

impl Tool for Find {
    fn name(&self) -> &'static str {
        "find"
    }

    fn description(&self) -> String {
        format!("Find files by glob pattern (e.g. '*.rs' or 'src/**/*.ts'). Respects .gitignore. Paths are relative to the search directory; at most {DEFAULT_LIMIT} results unless limit is given.")
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match"},
                "path": {"type": "string", "description": "Directory to search (default: current directory)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of results"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let pattern = str_arg(args, "pattern").unwrap_or("");
        let raw = str_arg(args, "path").unwrap_or(".");
        let limit = uint_arg(args, "limit")
            .map(|l| l as usize)
            .unwrap_or(DEFAULT_LIMIT);
        let root = match ctx.local_only("find", raw) {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(e),
        };
        if !root.is_dir() {
            return ToolOutput::error(format!("{raw} is not a directory"));
        }
        let matcher = match GlobBuilder::new(pattern)
            .literal_separator(pattern.contains('/'))
            .build()
        {
            Ok(g) => g.compile_matcher(),
            Err(e) => return ToolOutput::error(format!("Invalid glob {pattern:?}: {e}")),
        };
        let (mut found, hit_limit) = walk(&root, &matcher, pattern.contains('/'), limit, ctx);
        if ctx.is_cancelled() {
            return ToolOutput::error(format!("The search of {raw} was aborted"));
        }
        found.sort();
        let total = found.len();
        let mut out = String::new();
        for p in &found {
            if out.len() + p.len() + 1 > MAX_BYTES {
                break;
            }
            out.push_str(p);
            out.push('\n');
        }
        if total == 0 {
            out.push_str("No files found matching the pattern");
        } else if hit_limit || out.lines().count() < total {
            out.push_str(&format!(
                "\n[Results truncated at {} entries. Narrow the pattern or raise limit.]",
                out.lines().count()
            ));
        }
        ToolOutput::text(out).with_details(json!({"count": total, "truncated": hit_limit}))
    }
}

fn walk(
    root: &std::path::Path,
    matcher: &GlobMatcher,
    full_path: bool,
    limit: usize,
    ctx: &ToolContext,
) -> (Vec<String>, bool) {
    let found = Mutex::new(Vec::new());
    let count = AtomicUsize::new(0);
    // What is kept is bounded by the output limit as well as by `limit`: no more than can be shown.
    let kept_bytes = AtomicUsize::new(0);
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build_parallel();
    walker.run(|| {
        Box::new(|entry| {
            if ctx.is_cancelled()
                || count.load(Ordering::Relaxed) > limit
                || kept_bytes.load(Ordering::Relaxed) > MAX_BYTES
            {
                return ignore::WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            if entry.depth() == 0 {
                return ignore::WalkState::Continue;
            }
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            let hit = if full_path {
                matcher.is_match(rel)
            } else {
                matcher.is_match(entry.file_name())
            };
            if hit && count.fetch_add(1, Ordering::Relaxed) < limit {
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                let shown = format!("{}{}", rel.display(), if is_dir { "/" } else { "" });
                kept_bytes.fetch_add(shown.len() + 1, Ordering::Relaxed);
                found.lock().unwrap_or_else(|p| p.into_inner()).push(shown);
            }
            ignore::WalkState::Continue
        })
    });
    let hit_limit =
        count.load(Ordering::Relaxed) > limit || kept_bytes.load(Ordering::Relaxed) > MAX_BYTES;
    (
        found.into_inner().unwrap_or_else(|p| p.into_inner()),
        hit_limit,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tests::{ctx, text};

    #[test]
    fn respects_gitignore_and_limit() {
        let (dir, c) = ctx();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        std::process::Command::new("git")
            .arg("init")
            .arg("-q")
            .current_dir(dir.path())
            .status()
            .ok();
        for f in ["src/a.rs", "src/deep/b.rs", "target/c.rs", "d.txt"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let out = Find.execute(&json!({"pattern": "*.rs"}), &c);
        assert_eq!(text(&out), "src/a.rs\nsrc/deep/b.rs\n");
        let out = Find.execute(&json!({"pattern": "src/*.rs"}), &c);
        assert_eq!(text(&out), "src/a.rs\n");
        let out = Find.execute(&json!({"pattern": "*.rs", "limit": 1}), &c);
        assert!(text(&out).contains("Results truncated"), "{}", text(&out));
    }

    #[test]
    fn unicode_names_in_paths_with_spaces_and_missing_roots() {
        let (dir, c) = ctx();
        std::fs::create_dir_all(dir.path().join("my docs/日本")).unwrap();
        std::fs::write(dir.path().join("my docs/日本/ノート 1.md"), "").unwrap();
        std::fs::write(dir.path().join("my docs/other.txt"), "").unwrap();
        let out = Find.execute(&json!({"pattern": "*.md"}), &c);
        assert_eq!(text(&out), "my docs/日本/ノート 1.md\n");
        let out = Find.execute(&json!({"pattern": "ノート*", "path": "my docs"}), &c);
        assert!(text(&out).contains("ノート 1.md"), "{}", text(&out));
        assert!(
            Find.execute(&json!({"pattern": "*", "path": "no such dir"}), &c)
                .is_error
        );
    }
}
