//! The published JSON Schemas (`docs/schema/`): current with the protocol types, printed by
//! the CLI, and true of the frames gjc writes (every frame of every test is also checked, in
//! `support/schemas.rs`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use serde_json::{json, Value};

use crate::support::contract::Contract;
use crate::support::schemas::schemas;
use crate::support::{gjc, Gjc, TIMEOUT};

const REGENERATE: &str = "regenerate them with `UPDATE_SCHEMA=1 cargo test --test integration \
     schema::checked_in_schemas_are_current` (or `gjc --print-schema=NAME > docs/schema/NAME.json`)";

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/schema")
}

#[test]
fn checked_in_schemas_are_current() {
    let update = std::env::var_os("UPDATE_SCHEMA").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, schema) in ::gjc::protocol::schema::all() {
        let path = schema_dir().join(format!("{name}.json"));
        let generated = ::gjc::protocol::schema::render(&schema);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(generated.as_str()) {
            continue;
        }
        if update {
            replace_file(&path, &generated);
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale schemas (the protocol types changed): {}\n{REGENERATE}",
        stale.join(", ")
    );
    let mut files: Vec<String> = std::fs::read_dir(schema_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut expected: Vec<String> = ::gjc::protocol::schema::NAMES
        .iter()
        .map(|n| format!("{n}.json"))
        .collect();
    expected.sort();
    assert_eq!(
        files, expected,
        "docs/schema holds exactly the generated files"
    );
}

/// Temp file beside the target, then rename: a reader never sees half a schema.
fn replace_file(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::File::open(&tmp).unwrap().sync_all().unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Runs the binary with `args` and returns its exit code and stdout, within [`TIMEOUT`].
fn run_gjc(args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gjc"));
    let _home = crate::support::isolate(&mut command);
    let child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(TIMEOUT) {
        Ok(out) => {
            let out = out.unwrap();
            let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
            (out.status.code(), text(out.stdout), text(out.stderr))
        }
        Err(_) => {
            // SAFETY: the child is not reaped before the waiting thread returns, so the pid is ours.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("gjc {args:?} did not exit within {TIMEOUT:?}");
        }
    }
}

#[test]
fn print_schema_prints_the_checked_in_files() {
    for name in ::gjc::protocol::schema::NAMES {
        let (code, out, err) = run_gjc(&[&format!("--print-schema={name}")]);
        assert_eq!(code, Some(0), "{err}");
        let file = std::fs::read_to_string(schema_dir().join(format!("{name}.json"))).unwrap();
        assert!(
            out == file,
            "--print-schema={name} differs from the file; {REGENERATE}"
        );
    }
    let (code, out, err) = run_gjc(&["--print-schema"]);
    assert_eq!(code, Some(0), "{err}");
    let bundle: Value = serde_json::from_str(&out).unwrap();
    for name in ::gjc::protocol::schema::NAMES {
        let file = std::fs::read_to_string(schema_dir().join(format!("{name}.json"))).unwrap();
        let file: Value = serde_json::from_str(&file).unwrap();
        assert_eq!(bundle[format!("{name}.json")], file, "{name}");
    }
    let (code, _, err) = run_gjc(&["--print-schema=nope"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("nope"), "{err}");
}

/// Every frame up to and including the run's `agent_end`.
fn run_frames(g: &mut Gjc, prompt: Value) -> Vec<Value> {
    g.ok(prompt);
    g.client
        .collect_until(
            |f| f["type"] == "event" && f["payload"]["event_type"] == "agent_end",
            TIMEOUT,
        )
        .expect("agent_end")
}

fn script() -> Value {
    json!({"turns": [
        {"content": [
            {"type": "thinking", "thinking": "Let me look."},
            {"type": "text", "text": "Listing."},
            {"type": "toolCall", "name": "bash", "arguments": {"command": "echo hi"}}],
         "chunkChars": 4},
        {"content": [{"type": "text", "text": "It printed hi."}]}
    ]})
}

fn assert_schema_valid(frames: &[Value]) {
    for f in frames {
        if let Err(e) = schemas().check(f) {
            panic!("{e}\n  in {f}");
        }
    }
}

#[test]
fn streamed_frames_and_payloads_match_the_schemas() {
    let mut g = gjc().script(script()).spawn();
    let frames = run_frames(&mut g, json!({"type": "prompt", "message": "go"}));
    assert_schema_valid(&frames);
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["payload"]["event_type"] == "message_update")
        .collect();
    let kinds: Vec<&str> = updates
        .iter()
        .filter_map(|f| f["payload"]["event"]["assistantMessageEvent"]["type"].as_str())
        .collect();
    for kind in ["thinking_delta", "text_end", "toolcall_end"] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    // Every command with a payload, answered here, is checked by the hook on the way in.
    for command in [
        json!({"type": "get_state", "include": ["tools", "systemPrompt"]}),
        json!({"type": "get_messages"}),
        json!({"type": "get_session_stats"}),
        json!({"type": "get_available_models"}),
        json!({"type": "get_branch_messages"}),
        json!({"type": "get_last_assistant_text"}),
        json!({"type": "get_login_providers"}),
        json!({"type": "list_sessions"}),
        json!({"type": "cycle_thinking_level"}),
        json!({"type": "bash", "command": "echo out"}),
        json!({"type": "set_todos", "phases": [{"name": "p", "tasks": [{"content": "t"}]}]}),
    ] {
        let response = g.request(command.clone());
        assert_eq!(response["success"], true, "{command}: {response}");
        assert_schema_valid(&[response]);
    }
}

#[test]
fn compact_message_updates_match_the_schemas() {
    let mut g = gjc().script(script()).args(&["--compact-updates"]).spawn();
    let frames = run_frames(&mut g, json!({"type": "prompt", "message": "go"}));
    assert_schema_valid(&frames);
    let compact = frames
        .iter()
        .filter(|f| f["payload"]["compact"] == true)
        .count();
    assert!(compact > 3, "expected compact updates, got {compact}");
}

#[test]
fn frames_that_break_the_schemas_are_reported() {
    let frames = [
        // A payload field of the wrong type (responses.json, by command).
        (
            json!({"type": "response", "command": "get_last_assistant_text", "success": true,
                   "data": {"text": 5}}),
            "responses.json",
        ),
        // `data` on a command that has none.
        (
            json!({"type": "response", "command": "abort", "success": true, "data": {"x": 1}}),
            "responses.json",
        ),
        // An inner event missing a required field (events.json, by type).
        (
            json!({"type": "event", "protocol_version": 2, "session_id": "s", "seq": 1,
                   "frame_id": "f", "payload": {"event_type": "tool_execution_end",
                   "event": {"type": "tool_execution_end", "toolName": "bash",
                             "result": {"content": []}, "isError": false}}}),
            "events.json",
        ),
        // A malformed envelope (frames.json).
        (
            json!({"type": "event", "protocol_version": 2, "session_id": "s", "seq": 0,
                   "frame_id": "f", "payload": {"event_type": "turn_start",
                   "event": {"type": "turn_start"}}}),
            "frames.json",
        ),
    ];
    for (frame, file) in frames {
        let contract = Contract::default();
        contract.check_output(&frame.to_string());
        let violations = contract.violations();
        // The client's rules accept each of these; only the schemas catch them.
        assert_eq!(violations.len(), 1, "{frame}: {violations:?}");
        assert!(
            violations[0].contains(&format!("docs/schema/{file}")),
            "{violations:?}"
        );
        let client_only = Contract::default();
        client_only.check(&frame.to_string());
        assert!(client_only.violations().is_empty(), "{frame}");
        if file == "events.json" {
            // Checked by its type: the error names the missing field.
            assert!(violations[0].contains("toolCallId"), "{violations:?}");
        }
    }
}
