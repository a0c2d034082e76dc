//! Sessions on disk: the file format, reopening after SIGKILL, torn and corrupt files, switch,
//! branch, names, listing, HTML export, read-only folders and --no-session.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

fn answer(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn chat(turns: Vec<Value>) -> Gjc {
    gjc().script(json!({ "turns": turns })).spawn()
}

fn session_file(g: &mut Gjc) -> PathBuf {
    PathBuf::from(
        g.ok(json!({"type": "get_state"}))["sessionFile"]
            .as_str()
            .expect("sessionFile"),
    )
}

fn lines(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn entries_form_a_tree_under_a_header() {
    let mut g = chat(vec![answer("one"), answer("two")]);
    g.ok(json!({"type": "prompt", "message": "first"}));
    g.run_events();
    g.ok(json!({"type": "prompt", "message": "second"}));
    g.run_events();
    let path = session_file(&mut g);
    assert!(
        path.starts_with(g.home.path().join("agent/sessions")),
        "{}",
        path.display()
    );
    let entries = lines(&path);
    assert_eq!(entries[0]["type"], "session");
    assert_eq!(entries[0]["version"], 3);
    assert_eq!(
        entries[0]["id"],
        g.ok(json!({"type": "get_state"}))["sessionId"]
    );
    let messages: Vec<&Value> = entries.iter().filter(|e| e["type"] == "message").collect();
    assert_eq!(messages.len(), 4);
    for pair in entries[1..].windows(2) {
        assert_eq!(
            pair[1]["parentId"], pair[0]["id"],
            "each entry hangs off the previous leaf"
        );
    }
    assert!(entries
        .iter()
        .any(|e| e["type"] == "model_change" && e["model"] == "scripted/scripted"));
    let stats = g.ok(json!({"type": "get_session_stats"}));
    assert_eq!(stats["sessionFile"], path.display().to_string());
    assert_eq!(stats["userMessages"], 2);
}

#[test]
fn sigkill_mid_run_then_reopen() {
    let mut g = chat(vec![
        answer("saved answer"),
        json!({"content": [{"type": "text", "text": "never ends"}], "stall": true}),
    ]);
    g.ok(json!({"type": "prompt", "message": "first"}));
    g.run_events();
    g.ok(json!({"type": "prompt", "message": "second"}));
    g.event("message_update");
    let path = session_file(&mut g);
    unsafe { libc::kill(g.client.pid() as i32, libc::SIGKILL) };
    g.client.wait_exit(TIMEOUT);
    // Simulate the kill tearing the line being written.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"type\":\"message\",\"id\":\"torn")
        .unwrap();
    let mut h = gjc().spawn();
    let d = h.ok(json!({"type": "switch_session", "sessionPath": path}));
    assert_eq!(
        d,
        json!({"cancelled": false, "repaired": {"droppedBytes": 28}})
    );
    let texts: Vec<String> = h
        .messages()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(texts, ["first", "saved answer", "second"]);
    assert_eq!(
        h.ok(json!({"type": "get_state"}))["sessionFile"],
        path.display().to_string()
    );
}

#[test]
fn missing_and_corrupt_files_leave_the_session_untouched() {
    let mut g = chat(vec![answer("kept")]);
    g.ok(json!({"type": "prompt", "message": "hello"}));
    g.run_events();
    let before = g.ok(json!({"type": "get_state"}));
    let r = g.request(json!({"type": "switch_session", "sessionPath": "/nonexistent/s.jsonl"}));
    assert_eq!(r["success"], false);
    let bad = g.home.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"type\":\"session\",\"id\":\"x\"}\n{oops\n{\"type\":\"message\"}\n",
    )
    .unwrap();
    let r = g.request(json!({"type": "switch_session", "sessionPath": bad}));
    assert!(
        r["error"].as_str().unwrap().contains("corrupt at line 2"),
        "{r}"
    );
    let after = g.ok(json!({"type": "get_state"}));
    assert_eq!(before["sessionId"], after["sessionId"]);
    assert_eq!(after["messageCount"], 2);
}

#[test]
fn branch_then_switch_back() {
    let mut g = chat(vec![answer("a1"), answer("a2"), answer("b2")]);
    g.ok(json!({"type": "prompt", "message": "q1"}));
    g.run_events();
    g.ok(json!({"type": "prompt", "message": "q2"}));
    g.run_events();
    let original = session_file(&mut g);
    let branches = g.ok(json!({"type": "get_branch_messages"}));
    let msgs = branches["messages"].as_array().unwrap();
    assert_eq!(
        msgs.iter()
            .map(|m| m["text"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["q1", "q2"]
    );
    let q2 = msgs[1]["entryId"].clone();
    let r = g.request(json!({"type": "branch", "entryId": "nope"}));
    assert_eq!(r["error"], "Invalid entry ID for branching");
    let d = g.ok(json!({"type": "branch", "entryId": q2}));
    assert_eq!(d, json!({"text": "q2", "cancelled": false}));
    let branched = session_file(&mut g);
    assert_ne!(branched, original);
    assert_eq!(
        lines(&branched)[0]["parentSession"],
        original.display().to_string()
    );
    assert_eq!(
        g.messages().len(),
        2,
        "the branch holds the path up to q2's parent"
    );
    g.ok(json!({"type": "prompt", "message": "q2 edited"}));
    g.run_events();
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "b2"
    );
    g.ok(json!({"type": "switch_session", "sessionPath": original}));
    assert_eq!(g.messages().len(), 4);
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "a2"
    );
}

#[test]
fn names_new_sessions_and_listing() {
    let mut g = chat(vec![answer("x"), answer("y")]);
    g.ok(json!({"type": "prompt", "message": "first session"}));
    g.run_events();
    g.ok(json!({"type": "set_session_name", "name": "Refactor"}));
    let first = session_file(&mut g);
    assert_eq!(lines(&first)[0]["title"], "Refactor");
    assert_eq!(lines(&first)[0]["titleSource"], "user");
    let d = g.ok(json!({"type": "new_session", "parentSession": "parent-id"}));
    assert_eq!(d["cancelled"], false);
    assert_eq!(g.ok(json!({"type": "get_state"}))["messageCount"], 0);
    g.ok(json!({"type": "prompt", "message": "second session"}));
    g.run_events();
    let second = session_file(&mut g);
    assert_eq!(lines(&second)[0]["parentSession"], "parent-id");
    let list = g.ok(json!({"type": "list_sessions"}));
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(
        sessions[0]["path"],
        second.display().to_string(),
        "newest first"
    );
    assert_eq!(sessions[1]["name"], "Refactor");
    assert_eq!(sessions[1]["firstMessage"], "first session");
    assert_eq!(sessions[1]["messageCount"], 2);
    assert_eq!(
        g.ok(json!({"type": "list_sessions", "all": true}))["sessions"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn export_html_escapes_message_text() {
    let mut g = chat(vec![
        json!({"content": [{"type": "text", "text": "<script>document.title='pwned'</script>"}, {"type": "toolCall", "name": "ls", "arguments": {"path": "<img src=x onerror=alert(1)>"}}]}),
        answer("done"),
    ]);
    g.ok(json!({"type": "prompt", "message": "<b>bold?</b>"}));
    g.run_events();
    let d = g.ok(json!({"type": "export_html"}));
    let path = PathBuf::from(d["path"].as_str().unwrap());
    assert_eq!(path, session_file(&mut g).with_extension("html"));
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(
        !html.contains("<script") && !html.contains("<img") && !html.contains("<b>"),
        "{html}"
    );
    assert!(html.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"));
    let out = g.project.join("out/page.html");
    let d = g.ok(json!({"type": "export_html", "outputPath": "out/page.html"}));
    assert_eq!(PathBuf::from(d["path"].as_str().unwrap()), out);
    assert!(out.is_file());
}

#[test]
fn read_only_session_folder_is_a_clear_prompt_error() {
    if unsafe { libc::geteuid() } == 0 {
        // Root writes anywhere; use a path under a regular file instead, which nobody can create.
        let mut g = gjc()
            .script(json!({"turns": [answer("x")]}))
            .args(&["--session-dir", "/dev/null/sessions"])
            .spawn();
        let r = g.request(json!({"type": "prompt", "message": "hi"}));
        assert_eq!(r["success"], false);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .starts_with("Cannot save the session"),
            "{r}"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
    let mut g = gjc()
        .script(json!({"turns": [answer("x")]}))
        .args(&["--session-dir", ro.join("s").to_str().unwrap()])
        .spawn();
    let r = g.request(json!({"type": "prompt", "message": "hi"}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Cannot save the session"),
        "{r}"
    );
}

#[test]
fn no_session_keeps_everything_in_memory() {
    let mut g = gjc()
        .script(json!({"turns": [answer("x")]}))
        .args(&["--no-session"])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "hi"}));
    g.run_events();
    let s = g.ok(json!({"type": "get_state"}));
    assert!(s.get("sessionFile").is_none());
    assert_eq!(s["messageCount"], 2);
    let r = g.request(json!({"type": "export_html"}));
    assert_eq!(r["error"], "Cannot export in-memory session to HTML");
    assert!(!g.home.path().join("agent/sessions").exists());
}

/// Message text that would mark the page if it ever ran as script.
const HOSTILE: &str =
    "<script>document.documentElement.setAttribute('data-pwned','script')</script>\
<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\">\
<svg onload=\"document.documentElement.setAttribute('data-pwned','svg')\"></svg>";

#[test]
fn exported_page_runs_no_script_from_messages_in_headless_chromium() {
    let Some(browser) = find_chromium() else {
        // CI installs the browser (`.ci/run` sets GJC_REQUIRE_BROWSER): there a missing browser
        // is a failure, never a silent skip.
        assert!(
            std::env::var_os("GJC_REQUIRE_BROWSER").is_none(),
            "no chromium on PATH, and GJC_REQUIRE_BROWSER says this check must run"
        );
        println!("skipped: no chromium or chromium-headless-shell on PATH (.ci/run installs Debian's chromium)");
        return;
    };
    let mut g = chat(vec![
        json!({"content": [{"type": "text", "text": HOSTILE}, {"type": "toolCall", "name": "ls", "arguments": {"path": HOSTILE}}]}),
        answer(HOSTILE),
    ]);
    g.ok(json!({"type": "prompt", "message": HOSTILE}));
    g.run_events();
    let page = PathBuf::from(
        g.ok(json!({"type": "export_html"}))["path"]
            .as_str()
            .unwrap(),
    );

    // The control proves this harness would see a script that ran: the same payload, unescaped,
    // in a page without gjc's escaping or its content security policy.
    let control = g.project.join("control.html");
    std::fs::write(
        &control,
        format!("<!doctype html><html><body>{HOSTILE}</body></html>"),
    )
    .unwrap();
    let profile = tempfile::tempdir().unwrap();
    let control_dom = dump_dom(&browser, &control, profile.path());
    assert!(
        control_dom.contains("data-pwned=\""),
        "the control page's script did not run: {control_dom}"
    );

    let dom = dump_dom(&browser, &page, profile.path());
    assert!(dom.contains("</html>"), "chromium printed no page: {dom}");
    assert!(
        !dom.contains("data-pwned=\""),
        "a script from message content ran: {dom}"
    );
    // The payload is on the page as text, every time it was sent.
    let shown = dom
        .matches("&lt;script&gt;document.documentElement.setAttribute")
        .count();
    assert!(
        shown >= 4,
        "expected the escaped payload at least 4 times, saw {shown}: {dom}"
    );
}

fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-headless-shell"]
        .iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
}

/// The DOM after load, as headless Chromium serialises it; the browser is killed after 60 s.
fn dump_dom(
    browser: &std::path::Path,
    page: &std::path::Path,
    profile: &std::path::Path,
) -> String {
    let child = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start chromium");
    let pid = child.id();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(out) => String::from_utf8_lossy(&out.expect("chromium output").stdout).into_owned(),
        Err(_) => {
            // SAFETY: plain kill of the browser we started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("chromium did not print the page within 60 s");
        }
    }
}

#[test]
fn new_session_and_switch_session_move_to_another_folder() {
    let pwd = || json!({"content": [{"type": "toolCall", "name": "bash", "id": "c", "arguments": {"command": "pwd"}}]});
    let mut g = chat(vec![pwd(), answer("there"), pwd(), answer("back")]);
    let project = g.home.path().join("project").canonicalize().unwrap();
    let other = g.home.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = other.canonicalize().unwrap();
    for cwd in ["relative", "/no/such/folder"] {
        let r = g.request(json!({"type": "new_session", "cwd": cwd}));
        assert_eq!(r["success"], false, "{r}");
    }
    let ran_in = |g: &mut Gjc| {
        g.ok(json!({"type": "prompt", "message": "where?"}));
        let end = g
            .run_events()
            .into_iter()
            .find(|e| e["type"] == "tool_execution_end")
            .expect("the command ran");
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .trim()
            .to_string()
    };
    g.ok(json!({"type": "new_session", "cwd": other}));
    assert_eq!(ran_in(&mut g), other.display().to_string());
    let file = session_file(&mut g);
    // The folder's own sessions folder: listing the current folder finds it.
    let listed = g.ok(json!({"type": "list_sessions"}));
    assert_eq!(listed["sessions"][0]["path"], file.display().to_string());
    assert!(file.parent().unwrap().to_string_lossy().contains("other"));
    assert_eq!(lines(&file)[0]["cwd"], other.display().to_string());
    g.ok(json!({"type": "switch_session", "sessionPath": file, "cwd": project}));
    assert_eq!(ran_in(&mut g), project.display().to_string());
}

/// Entries are written in a batch with the frames of the step that made them, never after: when
/// a message's `message_end` reaches the host, the session file already holds that message
/// (here the prompt, a tool call, its result and the answer).
#[test]
fn the_file_holds_each_message_before_its_message_end_arrives() {
    let mut g = chat(vec![
        json!({"content": [{"type": "toolCall", "name": "ls", "id": "call_ls", "arguments": {}}]}),
        answer("done"),
    ]);
    let path = session_file(&mut g);
    g.ok(json!({"type": "prompt", "message": "look around"}));
    for role in ["user", "assistant", "toolResult", "assistant"] {
        let end = g.event("message_end");
        assert_eq!(end["message"]["role"], role);
        let stored: Vec<Value> = lines(&path)
            .into_iter()
            .filter(|e| e["type"] == "message")
            .map(|e| e["message"].clone())
            .collect();
        assert!(
            stored.contains(&end["message"]),
            "{role} message_end arrived before its entry was written: {}",
            end["message"]
        );
    }
    g.event("agent_end");
}

/// A listing reads every file whole (to count its messages), so it runs beside the session:
/// a command sent after `list_sessions` is answered while a long session is still being read,
/// and the listing still comes, complete.
#[test]
fn a_long_listing_does_not_hold_up_the_commands_after_it() {
    let mut g = chat(vec![answer("x")]);
    g.ok(json!({"type": "prompt", "message": "hello"}));
    g.run_events();
    let dir = session_file(&mut g).parent().unwrap().to_path_buf();
    let big = dir.join("2026-01-01T00-00-00-000Z_big.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
    writeln!(file, r#"{{"type":"session","version":3,"id":"big","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}}"#).unwrap();
    let text = "x".repeat(64 << 10);
    for i in 0..1500 {
        writeln!(file, r#"{{"type":"message","id":"{i:08x}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#).unwrap();
    }
    file.flush().unwrap();
    g.client
        .send(&json!({"type": "list_sessions", "id": "list"}))
        .unwrap();
    g.client
        .send(&json!({"type": "get_state", "id": "state"}))
        .unwrap();
    let first = g
        .client
        .wait_for(|f| f["type"] == "response", TIMEOUT)
        .unwrap();
    assert_eq!(first["id"], "state", "get_state waited for the listing");
    let listed = g
        .client
        .wait_for(|f| f["type"] == "response", TIMEOUT)
        .unwrap();
    assert_eq!(listed["id"], "list");
    let sessions = listed["data"]["sessions"].as_array().unwrap();
    let long = sessions.iter().find(|s| s["id"] == "big").expect("listed");
    assert_eq!(long["messageCount"], 1500);
    assert_eq!(sessions.len(), 2);
}
