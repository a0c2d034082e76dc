//! `ls`: a directory's entries, sorted, `/` after directories, dotfiles included, bounded.

use serde_json::{json, Value};

use super::read::io_reason;
use super::{str_arg, uint_arg, Tool, ToolContext};
use crate::protocol::message::ToolOutput;

const DEFAULT_LIMIT: usize = 500;
const MAX_BYTES: usize = 50 * 1024;
/// The most entries read from one directory.
const MAX_SCAN: usize = 100_000;

pub struct Ls;

impl Tool for Ls {
    fn name(&self) -> &'static str {
        "ls"
    }

    fn description(&self) -> String {
        format!("List a directory's entries sorted by name, with '/' after directories. Includes dotfiles. At most {DEFAULT_LIMIT} entries unless limit is given.")
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: current directory)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of entries"}
            },
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let raw = str_arg(args, "path").unwrap_or(".");
        let limit = uint_arg(args, "limit")
            .map(|l| l as usize)
            .unwrap_or(DEFAULT_LIMIT);
        let dir = match ctx.local_only("ls", raw) {
            Ok(d) => d,
            Err(e) => return ToolOutput::error(e),
        };
        let read = match std::fs::read_dir(&dir) {
            Ok(r) => r,
            Err(e) if dir.is_file() => {
                return ToolOutput::error(format!("{raw} is a file, not a directory ({e})"))
            }
            Err(e) => return ToolOutput::error(format!("Cannot list {raw}: {}", io_reason(&e))),
        };
        // Sorting needs every name; a directory of millions keeps only the first MAX_SCAN read.
        let mut scanned = 0usize;
        let mut names: Vec<String> = read
            .take_while(|_| {
                scanned += 1;
                scanned <= MAX_SCAN && !ctx.is_cancelled()
            })
            .filter_map(Result::ok)
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let is_dir =
                    e.file_type().map(|t| t.is_dir()).unwrap_or(false) || e.path().is_dir();
                if is_dir {
                    format!("{name}/")
                } else {
                    name
                }
            })
            .collect();
        if ctx.is_cancelled() {
            return ToolOutput::error(format!("Listing {raw} was aborted"));
        }
        names.sort_by_key(|n| n.to_lowercase());
        let total = names.len();
        let (mut out, mut shown) = (String::new(), 0);
        for name in names.iter().take(limit) {
            if out.len() + name.len() + 1 > MAX_BYTES {
                break;
            }
            out.push_str(name);
            out.push('\n');
            shown += 1;
        }
        if total == 0 {
            out.push_str("(empty directory)");
        } else if scanned > MAX_SCAN {
            out.push_str(&format!("\n[{shown} entries shown, sorted from the first {MAX_SCAN} the directory returned; it has more. Use find with a pattern to narrow it down.]"));
        } else if shown < total {
            out.push_str(&format!("\n[{shown} of {total} entries shown. Use a larger limit or find to narrow it down.]"));
        }
        ToolOutput::text(out).with_details(json!({"entries": total, "shown": shown}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tests::{ctx, text};

    #[test]
    fn sorted_with_slashes_and_limit() {
        let (dir, c) = ctx();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join(".hidden"), "").unwrap();
        std::fs::write(dir.path().join("B.txt"), "").unwrap();
        let out = Ls.execute(&json!({}), &c);
        assert_eq!(text(&out), ".hidden\nB.txt\nsub/\n");
        let out = Ls.execute(&json!({"limit": 1}), &c);
        assert!(text(&out).contains("[1 of 3 entries shown"));
        assert!(Ls.execute(&json!({"path": "missing"}), &c).is_error);
    }

    #[test]
    fn unicode_names_in_paths_with_spaces() {
        let (dir, c) = ctx();
        std::fs::create_dir_all(dir.path().join("a b/ça va")).unwrap();
        std::fs::write(dir.path().join("a b/日本.txt"), "").unwrap();
        let out = Ls.execute(&json!({"path": "a b"}), &c);
        assert_eq!(text(&out), "ça va/\n日本.txt\n");
    }
}
