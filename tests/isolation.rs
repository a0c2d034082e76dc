//! No test touches the real home: every test that starts gjc itself (not through
//! `support::gjc`) gives it a home and agent dir of its own (`support::isolate`), so `cargo test`
//! leaves no session files or `rpc-sessions` records in `~/.gjc`.

use std::path::Path;

/// The body of the function around byte `at` of `text` (from its `fn` to the first line that
/// closes a top-level item after `at`).
fn enclosing_fn(text: &str, at: usize) -> &str {
    let start = text[..at].rfind("fn ").unwrap_or(0);
    let end = text[at..].find("\n}\n").map_or(text.len(), |e| at + e);
    &text[start..end]
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_test_that_starts_gjc_gives_it_its_own_agent_dir() {
    let needle = concat!("CARGO_BIN_EXE", "_gjc");
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        &mut files,
    );
    let mut bare = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices(needle) {
            let body = enclosing_fn(&text, at);
            if !body.contains("isolate(") && !body.contains("GJC_CODING_AGENT_DIR") {
                let line = text[..at].lines().count();
                bare.push(format!("{}:{line}", file.display()));
            }
        }
    }
    assert!(
        bare.is_empty(),
        "gjc started with the real home (use support::isolate): {bare:?}"
    );
}
