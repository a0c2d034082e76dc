//! File delegation to the editor (`fs/*`) keeps to the session's roots: paths are sent
//! normalised, a write outside the session's cwd (spelled with `..` or through a symlink leading
//! out) is the tool's error and is never sent, and a read outside is served from disk.

use serde_json::json;

use super::{acp, first_text, updates};

#[test]
fn delegated_paths_are_normalised_and_never_leave_the_project() {
    let mut g = acp(json!({"turns": [
        {"content": [
            {"type": "toolCall", "name": "write", "id": "dotdot", "arguments": {"path": "../outside/secret", "content": "pwned"}},
            {"type": "toolCall", "name": "write", "id": "link", "arguments": {"path": "link/new.txt", "content": "pwned"}},
            {"type": "toolCall", "name": "edit", "id": "edit_link", "arguments": {"path": "link/secret", "edits": [{"oldText": "untouched", "newText": "pwned"}]}},
            {"type": "toolCall", "name": "read", "id": "read_out", "arguments": {"path": "../outside/secret"}},
            {"type": "toolCall", "name": "write", "id": "inside", "arguments": {"path": "sub/../ok.txt", "content": "fine"}}
        ]},
        {"content": [{"type": "text", "text": "ok"}]}
    ]}));
    let outside = g.home.path().canonicalize().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), "untouched\n").unwrap();
    std::os::unix::fs::symlink(&outside, g.project.join("link")).unwrap();
    g.initialize(json!({"fs": {"readTextFile": true, "writeTextFile": true}}));
    let session = g.new_session();
    g.allow_all(&session);
    let id = g.prompt(&session, "go");
    let mut seen = g.until(|m| {
        m["method"]
            .as_str()
            .is_some_and(|method| method.starts_with("fs/"))
    });
    let write = seen.last().unwrap().clone();
    assert_eq!(write["method"], "fs/write_text_file", "{write}");
    assert_eq!(
        write["params"]["path"],
        g.project.join("ok.txt").display().to_string(),
        "the only path sent is the normalised one inside the project"
    );
    g.answer(&write["id"], json!({}));
    let (reason, after) = g.stop_reason(id);
    assert_eq!(reason, "end_turn");
    seen.extend(after);
    let fs_requests = seen
        .iter()
        .filter(|m| m["method"].as_str().is_some_and(|s| s.starts_with("fs/")))
        .count();
    assert_eq!(fs_requests, 1, "refused paths never reach the editor");
    let ups = updates(&seen);
    let end = |call: &str| {
        ups.iter()
            .find(|u| {
                u["toolCallId"] == call
                    && matches!(u["status"].as_str(), Some("completed" | "failed"))
            })
            .unwrap_or_else(|| panic!("no end for {call}"))
            .clone()
    };
    for (call, why) in [
        ("dotdot", "outside the writable roots"),
        ("link", "leads out of the writable root"),
        ("edit_link", "leads out of the writable root"),
    ] {
        let done = end(call);
        assert_eq!(done["status"], "failed", "{done}");
        assert!(first_text(&done).contains(why), "{call}: {done}");
    }
    let read = end("read_out");
    assert_eq!(read["status"], "completed");
    assert!(first_text(&read).contains("untouched"), "{read}");
    assert_eq!(end("inside")["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "untouched\n"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
}
