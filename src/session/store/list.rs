//! Finding sessions: the folder of a working directory, and the summaries `list_sessions` shows.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::format::message_text;
use crate::protocol::reply::SessionSummary;

/// One line of `list_sessions`.
pub fn summary(path: &Path) -> Option<SessionSummary> {
    let file = File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    let mut lines = BufReader::new(file).split(b'\n');
    let header: Value = serde_json::from_slice(&lines.next()?.ok()?).ok()?;
    if header["type"] != "session" {
        return None;
    }
    let (mut count, mut first) = (0u64, None);
    for line in lines.map_while(Result::ok) {
        // Cheap pre-filter: only message entries are parsed.
        if !line.windows(16).any(|w| w == b"\"type\":\"message\"") {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if v["type"] != "message" {
            continue;
        }
        count += 1;
        if first.is_none() && v["message"]["role"] == "user" {
            first = Some(message_text(&v["message"]));
        }
    }
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| crate::ids::iso_from_ms(d.as_millis() as u64));
    let text = |key: &str| header.get(key).and_then(Value::as_str).map(str::to_string);
    Some(SessionSummary {
        id: text("id")?,
        path: path.display().to_string(),
        name: text("title"),
        created: text("timestamp"),
        modified,
        message_count: count,
        first_message: first,
        cwd: text("cwd"),
        parent_session: text("parentSession"),
    })
}

/// The folder for sessions of `cwd` under `root` (`~/src/app` → `-src-app`, else `--srv-app--`).
pub fn cwd_dir(root: &Path, cwd: &Path) -> PathBuf {
    let encode = |s: &str| s.replace(['/', '\\', ':'], "-");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let name = match home.as_ref().and_then(|h| cwd.strip_prefix(h).ok()) {
        Some(rel) if rel.as_os_str().is_empty() => "-".to_string(),
        Some(rel) => format!("-{}", encode(&rel.display().to_string())),
        None => format!(
            "--{}--",
            encode(cwd.display().to_string().trim_start_matches('/'))
        ),
    };
    root.join(name)
}

/// Session files under `dir` (or every folder under `root` with `all`), newest first.
pub fn list(root: &Path, dir: &Path, all: bool) -> Vec<SessionSummary> {
    let dirs: Vec<PathBuf> = if all {
        std::fs::read_dir(root)
            .map(|r| {
                r.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        vec![dir.to_path_buf()]
    };
    let mut out: Vec<SessionSummary> = dirs
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
        })
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| summary(&p))
        .collect();
    out.sort_by(|a, b| b.modified.cmp(&a.modified));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_folder_names() {
        let root = Path::new("/r");
        assert_eq!(
            cwd_dir(root, Path::new("/srv/app")),
            PathBuf::from("/r/--srv-app--")
        );
    }
}
