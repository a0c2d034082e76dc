//! The session file under stress: torn last lines, a full disk, SIGKILL at random points, context
//! usage after a compaction, and command-line mistakes refused before `ready`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

fn answer(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn chat_in(dir: &Path, turns: Vec<Value>) -> Gjc {
    gjc()
        .script(json!({ "turns": turns }))
        .args(&["--session-dir", dir.to_str().unwrap()])
        .spawn()
}

fn session_file(g: &mut Gjc) -> PathBuf {
    PathBuf::from(
        g.ok(json!({"type": "get_state"}))["sessionFile"]
            .as_str()
            .expect("sessionFile"),
    )
}

fn prompt(g: &mut Gjc, text: &str) -> Vec<Value> {
    g.ok(json!({"type": "prompt", "message": text}));
    g.run_events()
}

fn notices(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["type"] == "notice").collect()
}

/// The text of each message of a context, in order.
fn texts(g: &mut Gjc) -> Vec<String> {
    g.messages()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Every line of the file is whole JSON: what a loader accepts without skipping anything.
fn assert_whole_lines(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.ends_with(b"\n"), "the file ends mid-line");
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<Value>(line)
            .unwrap_or_else(|e| panic!("a damaged line in {}: {e}", path.display()));
    }
}

fn kill_9(g: &mut Gjc) {
    // SAFETY: kill has no memory preconditions; the pid is our own child.
    unsafe { libc::kill(g.client.pid() as i32, libc::SIGKILL) };
    g.client.wait_exit(TIMEOUT);
}

#[test]
fn a_torn_last_line_is_cut_off_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = chat_in(dir.path(), vec![answer("a1")]);
    prompt(&mut g, "q1");
    let path = session_file(&mut g);
    kill_9(&mut g);
    let torn = b"{\"type\":\"message\",\"id\":\"0badf00d\",\"parentId\":\"x\",\"mess";
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(torn).unwrap();

    let mut h = chat_in(dir.path(), vec![answer("a2")]);
    let d = h.ok(json!({"type": "switch_session", "sessionPath": path}));
    assert_eq!(d["repaired"], json!({"droppedBytes": torn.len()}));
    let notice = h.event("notice");
    assert_eq!(notice["level"], "warning");
    assert_eq!(notice["source"], "session");
    assert!(
        notice["message"]
            .as_str()
            .unwrap()
            .contains("torn last line"),
        "{notice}"
    );
    prompt(&mut h, "q2");
    h.close_and_wait();
    assert_whole_lines(&path);

    // The file appended to after the repair loads whole, and needs no repair again.
    let mut k = gjc().spawn();
    let d = k.ok(json!({"type": "switch_session", "sessionPath": path}));
    assert_eq!(d, json!({"cancelled": false}));
    assert_eq!(texts(&mut k), ["q1", "a1", "q2", "a2"]);
}

/// A disk that fills up and is freed again: a small tmpfs when this process may mount one, else
/// a file-size limit set on the running gjc (`RLIMIT_FSIZE`, which fails writes past it the way
/// a full disk does once SIGXFSZ is ignored).
enum Disk {
    Tmpfs { mount: tempfile::TempDir },
    FileSizeLimit { dir: tempfile::TempDir },
}

impl Disk {
    fn new() -> Disk {
        let mount = tempfile::tempdir().unwrap();
        let mounted = std::env::var_os("GJC_TEST_NO_TMPFS").is_none()
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs"])
                .arg(mount.path())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if mounted {
            Disk::Tmpfs { mount }
        } else {
            // Inherited through exec: gjc gets EFBIG instead of being killed.
            // SAFETY: setting a signal's disposition to ignore has no memory preconditions.
            unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
            Disk::FileSizeLimit { dir: mount }
        }
    }

    fn session_dir(&self) -> PathBuf {
        match self {
            Disk::Tmpfs { mount: dir } | Disk::FileSizeLimit { dir } => dir.path().join("sessions"),
        }
    }

    /// Leaves room for a few bytes more than `file` holds.
    fn fill(&self, pid: u32, file: &Path) {
        match self {
            Disk::Tmpfs { mount } => {
                let mut filler = std::fs::File::create(mount.path().join("filler")).unwrap();
                let block = vec![0u8; 4096];
                while filler.write_all(&block).is_ok() {}
            }
            Disk::FileSizeLimit { .. } => {
                let len = std::fs::metadata(file).unwrap().len();
                set_file_size_limit(pid, len + 100);
            }
        }
    }

    fn free(&self, pid: u32) {
        match self {
            Disk::Tmpfs { mount } => std::fs::remove_file(mount.path().join("filler")).unwrap(),
            Disk::FileSizeLimit { .. } => set_file_size_limit(pid, libc::RLIM_INFINITY),
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Disk::Tmpfs { mount } = self {
            let path = std::ffi::CString::new(mount.path().as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path; a lazy unmount cannot fail on open files.
            unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

fn set_file_size_limit(pid: u32, soft: libc::rlim_t) {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `limit` is a valid rlimit; the old value is not asked for.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn a_full_disk_leaves_whole_lines_and_saving_resumes_when_space_is_freed() {
    let disk = Disk::new();
    let dir = disk.session_dir();
    let big = "x".repeat(20_000);
    let mut g = chat_in(&dir, vec![answer("a1"), answer("a2"), answer("a3")]);
    prompt(&mut g, "q1");
    let path = session_file(&mut g);
    let pid = g.client.pid();

    disk.fill(pid, &path);
    let events = prompt(&mut g, &big);
    let failed = notices(&events);
    assert_eq!(failed.len(), 1, "told once: {failed:?}");
    assert_eq!(failed[0]["level"], "error");
    assert_eq!(failed[0]["source"], "session");
    let state = g.ok(json!({"type": "get_state"}));
    assert!(state["sessionSaveError"].is_string(), "{state}");
    assert_whole_lines(&path);

    disk.free(pid);
    let events = prompt(&mut g, "q3");
    let resumed = notices(&events);
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(resumed[0]["level"], "info");
    assert!(resumed[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("The session is being saved again"));
    let state = g.ok(json!({"type": "get_state"}));
    assert!(state.get("sessionSaveError").is_none(), "{state}");
    g.close_and_wait();
    assert_whole_lines(&path);

    // What waited while the disk was full was written, in order, once there was room.
    let mut h = gjc().spawn();
    let d = h.ok(json!({"type": "switch_session", "sessionPath": path}));
    assert_eq!(d, json!({"cancelled": false}));
    assert_eq!(texts(&mut h), ["q1", "a1", &big, "a2", "q3", "a3"]);
}

/// A small deterministic generator (xorshift), seeded from the clock and printed, so a failing
/// round can be replayed with `GJC_TEST_SEED`.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("GJC_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| ::gjc::ids::now_ms() | 1);
        println!("GJC_TEST_SEED={seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Turns that call a tool and stream long text in many small deltas, so a run has many frames
/// and many entries to be killed between.
fn busy_turns(rng: &mut Rng) -> Vec<Value> {
    let text = |rng: &mut Rng| "lorem ipsum ".repeat(200 + rng.below(1500) as usize);
    vec![
        json!({"content": [{"type": "text", "text": text(rng)}, {"type": "toolCall", "name": "ls", "arguments": {"path": "."}}], "chunkChars": 512}),
        json!({"content": [{"type": "text", "text": text(rng)}], "chunkChars": 512}),
    ]
}

/// SIGKILL lands at a random frame of a run, and in some rounds the kill also tears the last
/// line (bytes cut off its end, as an interrupted write leaves it). Each round reopens the file
/// the previous one was killed over and appends to it; every reopening must load.
#[test]
fn sigkill_at_random_points_always_leaves_a_file_that_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new();
    let mut path: Option<PathBuf> = None;
    for round in 0..8 {
        let mut g = chat_in(dir.path(), busy_turns(&mut rng));
        if let Some(p) = &path {
            let r = g.request(json!({"type": "switch_session", "sessionPath": p}));
            assert_eq!(r["success"], true, "round {round}: {r}");
        }
        let file = session_file(&mut g);
        g.ok(json!({"type": "prompt", "message": format!("round {round}")}));
        for _ in 0..rng.below(120) {
            let frame = g.client.recv(TIMEOUT).expect("a frame");
            if frame.value["payload"]["event_type"] == "agent_end" {
                break;
            }
        }
        kill_9(&mut g);
        if file.exists() && rng.below(2) == 0 {
            tear_last_line(&file, &mut rng);
        }
        path = Some(file).filter(|f| f.exists()).or(path);
    }
    let path = path.expect("a session file was written");
    let mut h = gjc().spawn();
    let r = h.request(json!({"type": "switch_session", "sessionPath": path}));
    assert_eq!(r["success"], true, "{r}");
    // One chain: every whole message line in the file is in the context.
    let written = std::fs::read(&path)
        .unwrap()
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(|e| e["type"] == "message")
        .count();
    assert!(written > 0);
    assert_eq!(h.messages().len(), written);
}

/// Cuts between one byte and all but one of the last line's bytes off the file's end.
fn tear_last_line(path: &Path, rng: &mut Rng) {
    let bytes = std::fs::read(path).unwrap();
    let body = &bytes[..bytes.len() - 1];
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line_len = bytes.len() - start;
    if start == 0 || line_len < 3 {
        return;
    }
    let cut = 1 + rng.below(line_len as u64 - 2);
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(bytes.len() as u64 - cut).unwrap();
}

#[test]
fn context_usage_after_a_compaction_counts_what_the_next_request_carries() {
    let dir = tempfile::tempdir().unwrap();
    let with_usage = |text: &str, input: u64| json!({"content": [{"type": "text", "text": text}], "usage": {"input": input, "output": 10}});
    let mut g = gjc()
        .script(json!({"turns": [
            with_usage("a1", 1_000),
            with_usage("a2", 190_000),
            answer("SUMMARY of q1"),
            with_usage("a3", 3_000),
        ]}))
        .args(&["--session-dir", dir.path().to_str().unwrap()])
        .env("GJC_COMPACT_KEEP_TOKENS", "1")
        .spawn();
    g.ok(json!({"type": "set_auto_compaction", "enabled": false}));
    prompt(&mut g, "q1");
    prompt(&mut g, "q2");
    let usage = |g: &mut Gjc| g.ok(json!({"type": "get_state"}))["contextUsage"].clone();
    let before = usage(&mut g);
    assert_eq!(before["source"], "provider_anchor");
    assert!(before["percent"].as_f64().unwrap() > 90.0, "{before}");

    g.ok(json!({"type": "compact"}));
    let after = usage(&mut g);
    assert_eq!(after["source"], "heuristic", "{after}");
    assert!(after["tokens"].as_u64().unwrap() < 5_000, "{after}");
    assert!(after["percent"].as_f64().unwrap() < 3.0, "{after}");

    // Reopened from the file, the kept reply's old usage is not trusted either.
    let path = session_file(&mut g);
    let mut h = gjc().script(json!({"turns": []})).spawn();
    h.ok(json!({"type": "switch_session", "sessionPath": path}));
    let reopened = h.ok(json!({"type": "get_state"}))["contextUsage"].clone();
    assert_eq!(reopened["source"], "heuristic", "{reopened}");
    assert!(reopened["tokens"].as_u64().unwrap() < 5_000, "{reopened}");

    // The first reply after the compaction is the new anchor.
    prompt(&mut g, "q3");
    let next = usage(&mut g);
    assert_eq!(next["source"], "provider_anchor");
    assert_eq!(next["tokens"], 3_010, "{next}");
}

/// Runs gjc with `args` after `--mode rpc` until it exits.
fn run_args(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_gjc"))
        .args(["--mode", "rpc"])
        .args(args)
        .env("HOME", home.path())
        .env("GJC_CODING_AGENT_DIR", home.path().join("agent"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn command_line_mistakes_exit_2_with_one_line_before_ready() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--thinking", "bogus"],
            "invalid --thinking level \"bogus\"",
        ),
        (
            &["--provider", "scripted", "--script", "/nonexistent/s.json"],
            "--script: cannot read script /nonexistent/s.json",
        ),
        (&["--no-tools", "--tools", "read"], "--no-tools and --tools"),
        (
            &["--provider-session-id", "../../x"],
            "invalid --provider-session-id \"../../x\"",
        ),
    ];
    for (args, expected) in cases {
        let out = run_args(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing may reach stdout");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("gjc: ") && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn flags_published_clients_pass_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let mut levels = Vec::new();
    for level in [
        "inherit", "off", "minimal", "low", "medium", "high", "xhigh", "max",
    ] {
        let mut g = gjc()
            .script(json!({"turns": []}))
            .args(&[
                "--no-title",
                "--no-skills",
                "--no-rules",
                "--no-session",
                "--session-dir",
                dir.path().to_str().unwrap(),
                "--append-system-prompt",
                "Answer briefly.",
                "--thinking",
                level,
            ])
            .spawn();
        let state = g.ok(json!({"type": "get_state", "include": ["systemPrompt"]}));
        assert!(state["systemPrompt"][0]
            .as_str()
            .unwrap()
            .contains("Answer briefly."));
        levels.push(state["thinkingLevel"].as_str().unwrap().to_string());
    }
    // `inherit` keeps the default; `max` is the model's highest.
    assert_eq!(
        levels,
        ["off", "off", "minimal", "low", "medium", "high", "xhigh", "xhigh"]
    );
}
