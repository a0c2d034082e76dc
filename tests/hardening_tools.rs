//! File tools under hostile input: files without newlines, special files, URL-shaped paths no
//! host serves, symlinks, cancellation mid-read, and questions that time out.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

/// The peak resident set a tool may reach. gjc idles at about 7 MB; the inputs below would need
/// tens or hundreds of megabytes (or abort the process) if a tool read them whole.
const MAX_PEAK_KB: u64 = 40 * 1024;
/// The tools' output limit (50 KB).
const OUTPUT_LIMIT: usize = 50 * 1024;

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"type": "toolCall", "id": id, "name": name, "arguments": args})
}

/// A gjc whose model makes these calls (in one turn), then answers.
fn calls(calls: Vec<Value>, args: &[&str]) -> Gjc {
    gjc()
        .script(json!({"turns": [
            {"content": calls},
            {"content": [{"type": "text", "text": "done"}]}
        ]}))
        .args(args)
        .spawn()
}

/// Prompts and returns every tool result, in call order.
fn results(g: &mut Gjc, n: usize) -> Vec<Value> {
    g.ok(json!({"type": "prompt", "message": "go"}));
    (0..n).map(|_| g.event("tool_execution_end")).collect()
}

fn text(end: &Value) -> &str {
    end["result"]["content"][0]["text"].as_str().unwrap_or("")
}

/// The peak resident set of a live process, in kB.
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn read_of_dev_zero_ends_at_once_with_small_memory() {
    let mut g = calls(
        vec![call("z", "read", json!({"path": "/dev/zero", "limit": 1}))],
        &[],
    );
    let started = Instant::now();
    let end = &results(&mut g, 1)[0];
    assert_eq!(end["isError"], true, "{end}");
    assert!(text(end).contains("not a regular file"), "{}", text(end));
    assert!(started.elapsed() < Duration::from_secs(5));
    let peak = peak_kb(g.client.pid());
    assert!(peak < MAX_PEAK_KB, "peak RSS {peak} kB");
    g.event("agent_end");
    g.ok(json!({"type": "get_state"}));
}

#[test]
fn special_files_are_refused_without_blocking() {
    let mut g = calls(
        vec![
            call("r", "read", json!({"path": "pipe"})),
            call(
                "e",
                "edit",
                json!({"path": "pipe", "edits": [{"oldText": "a", "newText": "b"}]}),
            ),
            call("w", "write", json!({"path": "pipe", "content": "x"})),
            call("n", "write", json!({"path": "/dev/null", "content": "x"})),
            call("g", "grep", json!({"pattern": "x", "path": "pipe"})),
        ],
        &[],
    );
    mkfifo(&g.project.join("pipe"));
    let ends = results(&mut g, 5);
    for end in &ends[..3] {
        assert_eq!(end["isError"], true, "{end}");
        assert!(text(end).contains("not a regular file (a FIFO)"), "{end}");
    }
    assert!(
        text(&ends[3]).contains("not a regular file (a character device)"),
        "{}",
        ends[3]
    );
    assert_eq!(text(&ends[4]), "No matches found");
    let kept = std::fs::symlink_metadata(g.project.join("pipe")).unwrap();
    assert!(kept.file_type().is_fifo(), "the FIFO is left as it was");
}

#[test]
fn a_line_longer_than_the_limit_is_cut_with_a_note() {
    let mut g = calls(
        vec![
            call("one", "read", json!({"path": "one-line.min.js"})),
            call("three", "read", json!({"path": "three.txt"})),
            call("second", "read", json!({"path": "three.txt", "offset": 2})),
        ],
        &[],
    );
    // 200 KiB without a newline; multi-byte characters so a byte cut would split one.
    let line = "é日x".repeat(200 * 1024 / 6);
    std::fs::write(g.project.join("one-line.min.js"), &line).unwrap();
    std::fs::write(
        g.project.join("three.txt"),
        format!("first\n{line}\nlast\n"),
    )
    .unwrap();
    let ends = results(&mut g, 3);

    let one = text(&ends[0]);
    assert_eq!(ends[0]["isError"], false, "{one}");
    assert!(one.len() <= OUTPUT_LIMIT, "{} bytes", one.len());
    let (body, note) = one.split_once("\n\n[").unwrap();
    assert!(
        line.starts_with(body) && body.len() > 40 * 1024,
        "{}",
        body.len()
    );
    assert!(
        note.starts_with("Line 1 is 200.0KB long; only its first"),
        "{note}"
    );

    let three = text(&ends[1]);
    assert!(
        three.starts_with("first\n\n[Showing lines 1-1 of 3"),
        "{three}"
    );
    assert!(three.contains("Use offset=2 to continue"), "{three}");

    let second = text(&ends[2]);
    assert!(second.len() <= OUTPUT_LIMIT, "{} bytes", second.len());
    assert!(second.contains("[Line 2 is 200.0KB long"), "{second}");
    assert!(second.contains("Use offset=3 to continue"), "{second}");
}

#[test]
fn grep_over_a_giant_line_keeps_memory_small() {
    let mut g = calls(vec![call("g", "grep", json!({"pattern": "needle"}))], &[]);
    // 64 MiB with no newline, the match at its start.
    let mut big = b"needle ".to_vec();
    big.resize(64 << 20, b'a');
    std::fs::write(g.project.join("giant.txt"), &big).unwrap();
    drop(big);
    let end = &results(&mut g, 1)[0];
    let t = text(end);
    assert!(
        t.starts_with("giant.txt:1: needle aaa"),
        "{}",
        &t[..t.len().min(200)]
    );
    assert!(t.len() <= OUTPUT_LIMIT, "{} bytes", t.len());
    let peak = peak_kb(g.client.pid());
    assert!(peak < MAX_PEAK_KB, "peak RSS {peak} kB");
    assert!(t.contains("searched only in their first"), "{t}");
}

#[test]
fn unregistered_schemes_are_errors_for_every_file_tool() {
    let mut g = calls(
        vec![
            call(
                "w",
                "write",
                json!({"path": "foo://x/y.txt", "content": "hi"}),
            ),
            call("r", "read", json!({"path": "https://example.com/a"})),
            call(
                "e",
                "edit",
                json!({"path": "foo://x/y.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
            ),
            call("l", "ls", json!({"path": "foo://x"})),
            call("f", "find", json!({"pattern": "*", "path": "foo://x"})),
            call("g", "grep", json!({"pattern": "x", "path": "foo://x"})),
            call("d", "ls", json!({"path": "db://users"})),
        ],
        &[],
    );
    g.ok(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "db", "writable": true}]}));
    let ends = results(&mut g, 7);
    for (end, scheme) in ends
        .iter()
        .zip(["foo", "https", "foo", "foo", "foo", "foo"])
    {
        assert_eq!(end["isError"], true, "{end}");
        let want = format!("no host serves the \"{scheme}\" scheme; registered schemes: db");
        assert!(text(end).contains(&want), "{end}");
    }
    assert_eq!(ends[6]["isError"], true);
    assert!(
        text(&ends[6]).contains("db:// paths belong to the host"),
        "{}",
        ends[6]
    );
    assert!(
        g.client
            .take_backlog()
            .iter()
            .all(|f| f.value["type"] != "host_uri_request"),
        "nothing reaches the host"
    );
    let entries: Vec<String> = std::fs::read_dir(&g.project)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(entries.is_empty(), "{entries:?}");
}

#[test]
fn edit_and_write_through_symlinks_change_the_target() {
    let mut g = calls(
        vec![
            call(
                "e",
                "edit",
                json!({"path": "link.txt", "edits": [{"oldText": "hello", "newText": "goodbye"}]}),
            ),
            call(
                "w",
                "write",
                json!({"path": "sub/link2", "content": "new body\n"}),
            ),
            call(
                "d",
                "write",
                json!({"path": "dangling", "content": "made\n"}),
            ),
            call(
                "n",
                "write",
                json!({"path": "fresh.txt", "content": "fresh\n"}),
            ),
        ],
        &[],
    );
    let p = g.project.clone();
    std::fs::create_dir_all(p.join("real")).unwrap();
    std::fs::create_dir_all(p.join("sub")).unwrap();
    std::fs::write(p.join("real/a.txt"), "hello world\n").unwrap();
    std::fs::set_permissions(p.join("real/a.txt"), PermissionsExt::from_mode(0o640)).unwrap();
    std::fs::write(p.join("real/b.txt"), "old\n").unwrap();
    std::fs::set_permissions(p.join("real/b.txt"), PermissionsExt::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink("real/a.txt", p.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("../real/b.txt", p.join("sub/link2")).unwrap();
    std::os::unix::fs::symlink("real/c.txt", p.join("dangling")).unwrap();
    let ends = results(&mut g, 4);
    for end in &ends {
        assert_eq!(end["isError"], false, "{end}");
    }
    let is_link = |q: &str| {
        std::fs::symlink_metadata(p.join(q))
            .unwrap()
            .file_type()
            .is_symlink()
    };
    let mode = |q: &str| std::fs::metadata(p.join(q)).unwrap().mode() & 0o7777;
    assert!(is_link("link.txt") && is_link("sub/link2") && is_link("dangling"));
    assert_eq!(
        std::fs::read_to_string(p.join("real/a.txt")).unwrap(),
        "goodbye world\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("real/b.txt")).unwrap(),
        "new body\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("real/c.txt")).unwrap(),
        "made\n"
    );
    assert_eq!((mode("real/a.txt"), mode("real/b.txt")), (0o640, 0o600));
    assert_eq!(mode("fresh.txt"), 0o666 & !umask());
    let mut left: Vec<String> = std::fs::read_dir(p.join("real"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["a.txt", "b.txt", "c.txt"],
        "no temporary file is left"
    );
}

/// This process's umask (gjc inherits it), read without changing it.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let v = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .unwrap();
    u32::from_str_radix(v.trim(), 8).unwrap()
}

/// Whether the process still has a `gjc-tool` thread.
fn tool_thread_alive(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks.filter_map(Result::ok).any(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim_end() == "gjc-tool")
            })
        })
        .unwrap_or(false)
}

#[test]
fn abort_stops_a_read_that_is_skipping_to_a_far_offset() {
    let mut g = calls(
        vec![call(
            "r",
            "read",
            json!({"path": "sparse.log", "offset": 1_000_000_000}),
        )],
        &[],
    );
    // Text first (so it is not taken for binary), then a terabyte hole: one endless line of
    // zeros, which a read skipping to the offset has to go through.
    let path = g.project.join("sparse.log");
    let head: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, head).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("tool_execution_start");
    let pid = g.client.pid();
    // There are no events for a thread starting or ending; poll /proc for a bounded time.
    let until = |alive: bool, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while tool_thread_alive(pid) != alive {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    until(true, "the read never started");
    g.ok(json!({"type": "abort"}));
    g.event("agent_end");
    until(false, "the read went on after the abort");
    let peak = peak_kb(pid);
    assert!(peak < MAX_PEAK_KB, "peak RSS {peak} kB");
}

#[test]
fn a_question_that_times_out_says_so_and_picks_nothing() {
    let ask = json!({"questions": [
        {"question": "Deploy now?", "options": [{"label": "yes"}, {"label": "no"}], "recommended": 1, "timeoutSeconds": 0.2},
        {"question": "Why?", "timeoutSeconds": 0.2}
    ]});
    let mut g = calls(vec![call("a", "ask", ask)], &["--tools", "ask"]);
    g.ok(json!({"type": "prompt", "message": "go"}));
    let first = g
        .client
        .wait_for(|f| f["type"] == "extension_ui_request", TIMEOUT)
        .unwrap();
    assert_eq!(
        (first["method"].as_str(), first["timeout"].as_u64()),
        (Some("select"), Some(200))
    );
    let end = g.event("tool_execution_end");
    let t = text(&end);
    assert!(
        t.starts_with("Deploy now?\nAnswer: (no answer: the question timed out")
            && t.contains("Why?\nAnswer: (no answer: the question timed out"),
        "{t}"
    );
    assert!(
        !t.contains("Answer: no\n") && !t.ends_with("Answer: no"),
        "{t}"
    );
    let answers = &end["result"]["details"]["answers"];
    assert_eq!(answers[0]["answer"], Value::Null, "{answers}");
    assert_eq!(answers[0]["timedOut"], true, "{answers}");
}
