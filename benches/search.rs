//! `grep` and `find` tools on a generated 100,000-file tree, beside `rg` and `find` when they are
//! installed, in the same run.
//!
//! Run: `cargo bench --bench search [-- files]`

mod common;

use std::path::Path;
use std::time::Instant;

use common::*;
use gjc::tools::{Tool, ToolContext};
use serde_json::json;

fn generate(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("d{:03}/s{:02}", i / 1000, (i / 100) % 10));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let body = if i % 997 == 0 {
            format!("fn needle_{i}() {{}}\n")
        } else {
            format!("fn item_{i}() -> u32 {{ {i} }}\n")
        };
        std::fs::write(dir.join(format!("f{i}.rs")), body).unwrap();
    }
}

fn time_runs(mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            ms(t.elapsed())
        })
        .collect();
    median(&mut v)
}

fn have(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok()
}

fn main() {
    let files: usize = args()
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let tree = tempfile::tempdir().unwrap();
    let started = Instant::now();
    generate(tree.path(), files);
    println!(
        "generated {files} files in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let spill = tree.path().join(".spill");
    let (bash, _thread) = gjc::exec::spawn(spill, false, None).unwrap();
    let ctx = ToolContext::new(tree.path().to_path_buf(), "bench".into(), bash);

    let grep = time_runs(|| {
        let out = gjc::tools::grep::Grep
            .execute(&json!({"pattern": "needle_[0-9]+", "limit": 1000}), &ctx);
        assert!(!out.is_error);
    });
    let find = time_runs(|| {
        let out =
            gjc::tools::find::Find.execute(&json!({"pattern": "f9999*.rs", "limit": 1000}), &ctx);
        assert!(!out.is_error);
    });
    println!("grep tool (regex, {files} files): median {grep:.1} ms");
    if have("rg") {
        let rg = time_runs(|| {
            std::process::Command::new("rg")
                .args(["-c", "needle_[0-9]+"])
                .current_dir(tree.path())
                .output()
                .unwrap();
        });
        println!(
            "  rg, same search:                 median {rg:.1} ms (ratio {:.2}x)",
            grep / rg
        );
    } else {
        let g = time_runs(|| {
            std::process::Command::new("grep")
                .args(["-rlE", "needle_[0-9]+", "."])
                .current_dir(tree.path())
                .output()
                .unwrap();
        });
        println!(
            "  rg is not installed; grep -rlE, same search: median {g:.1} ms (ratio {:.2}x)",
            grep / g
        );
    }
    println!("find tool (glob, {files} files): median {find:.1} ms");
    let f = time_runs(|| {
        std::process::Command::new("find")
            .args([".", "-name", "f9999*.rs"])
            .current_dir(tree.path())
            .output()
            .unwrap();
    });
    println!(
        "  find -name, same search:         median {f:.1} ms (ratio {:.2}x)",
        find / f
    );
}
