//! Confined file writes through the real binary: under `--sandbox workspace-write` (its writable roots), the
//! model's `write` and `edit` calls land beneath them or are refused, whatever the path spells,
//! including through a symlink the model has just made with a bash call.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::gjc;

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"type": "toolCall", "id": id, "name": name, "arguments": args})
}

fn text(end: &Value) -> &str {
    end["result"]["content"][0]["text"].as_str().unwrap_or("")
}

/// Every entry under `dir` with its contents (links as their targets), to compare before/after.
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            seen.push((path.clone(), "dir".into()));
            seen.extend(snapshot(&path));
        } else {
            seen.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    seen.sort();
    seen
}

#[test]
fn writes_and_edits_stay_beneath_the_write_roots() {
    let base = tempfile::tempdir().unwrap();
    let base_path = base.path().canonicalize().unwrap();
    let (ws, tmp, out) = (
        base_path.join("ws"),
        base_path.join("tmp"),
        base_path.join("out"),
    );
    for dir in [&ws, &tmp, &out] {
        std::fs::create_dir(dir).unwrap();
    }
    std::fs::write(out.join("secret"), "untouched\n").unwrap();
    std::fs::create_dir(out.join("inner")).unwrap();
    let before = snapshot(&out);
    let secret = out.join("secret").display().to_string();
    let proc_root = format!("/proc/self/root{secret}");
    let plant = format!(
        "ln -s {secret} abs_link && ln -s ../out/secret rel_link && ln -s {} dir_link",
        out.display()
    );
    let w = |id: &str, path: &str| call(id, "write", json!({"path": path, "content": "pwned\n"}));
    let e = |id: &str, path: &str| {
        call(
            id,
            "edit",
            json!({"path": path, "edits": [{"oldText": "untouched", "newText": "pwned"}]}),
        )
    };
    let refused = vec![
        w("dotdot", "../out/secret"),
        w("absolute", &secret),
        w("proc", &proc_root),
        w("abs_link", "abs_link"),
        w("rel_link", "rel_link"),
        w("dir_link", "dir_link/new"),
        w("dir_link_deep", "dir_link/inner/new"),
        e("edit_dotdot", "../out/secret"),
        e("edit_link", "rel_link"),
        e("edit_dir_link", "dir_link/secret"),
    ];
    let n_refused = refused.len();
    let mut calls = vec![call("plant", "bash", json!({"command": plant}))];
    calls.extend(refused);
    calls.push(w("inside", "sub/ok.txt"));
    calls.push(call(
        "edit_inside",
        "edit",
        json!({"path": "sub/ok.txt", "edits": [{"oldText": "pwned", "newText": "edited"}]}),
    ));
    calls.push(w("temp", &tmp.join("scratch.txt").display().to_string()));
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": calls},
            {"content": [{"type": "text", "text": "done"}]}
        ]}))
        .args(&["--cwd", &ws.display().to_string()])
        .args(&[
            "--sandbox",
            "workspace-write",
            "--writable-root",
            &tmp.display().to_string(),
        ])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let planted = g.event("tool_execution_end");
    assert_eq!(planted["isError"], false, "{planted}");
    for _ in 0..n_refused {
        let end = g.event("tool_execution_end");
        assert_eq!(
            end["isError"], true,
            "{} was not refused: {end}",
            end["toolCallId"]
        );
        let said = text(&end);
        assert!(
            said.contains("outside the writable roots")
                || said.contains("leads out of the writable root"),
            "{}: {said}",
            end["toolCallId"]
        );
    }
    for _ in 0..3 {
        let end = g.event("tool_execution_end");
        assert_eq!(end["isError"], false, "{end}");
    }
    assert_eq!(snapshot(&out), before, "nothing outside changed");
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/ok.txt")).unwrap(),
        "edited\n"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.join("scratch.txt")).unwrap(),
        "pwned\n"
    );
}
