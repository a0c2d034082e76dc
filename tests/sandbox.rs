//! The kernel sandbox from outside: every command path (the host's `bash`, the model's bash
//! tool, hooks) runs in it; nothing is written outside the writable roots whatever a command
//! does; network is refused to a listener on 127.0.0.1; a policy the kernel cannot enforce is
//! refused, never run without it; a denied command runs again only when the host approves.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

/// A command the classifier takes for a read that writes through bash's prompt expansion.
fn disguised_write(target: &Path) -> String {
    format!("x='$(touch {})'; echo ${{x@P}}", target.display())
}

fn call(name: &str, args: Value) -> Value {
    json!({"content": [{"type": "toolCall", "name": name, "arguments": args}]})
}

fn say(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn output_of(g: &mut Gjc, command: &str) -> String {
    let data = g.ok(json!({"type": "bash", "command": command}));
    data["output"].as_str().unwrap_or("").to_string()
}

fn tool_text(end: &Value) -> String {
    end["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An empty folder outside the project, which must stay empty.
pub(crate) fn outside() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

pub(crate) fn assert_empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "written outside the roots: {left:?}");
}

#[test]
fn the_hosts_bash_writes_only_beneath_the_roots_however_it_spells_the_path() {
    let out = outside();
    let o = out.path().display();
    let mut g = gjc().args(&["--sandbox", "workspace-write"]).spawn();
    let state = g.ok(json!({"type": "get_state"}));
    let sandbox = &state["sandbox"];
    assert_eq!(sandbox["policy"], "workspace-write", "{state}");
    assert_eq!(sandbox["effective"], "workspace-write");
    assert_eq!(sandbox["network"], false);
    assert!(sandbox["enforcement"]["landlockAbi"].as_u64().unwrap() >= 3);
    assert!(sandbox["enforcement"].get("error").is_none());
    let project = g.project.canonicalize().unwrap();
    let roots = sandbox["writableRoots"].as_array().unwrap();
    assert!(
        roots
            .iter()
            .any(|r| Path::new(r.as_str().unwrap()) == project),
        "{roots:?}"
    );

    let script = format!(
        r#"echo in > inside.txt && echo tmp > "$TMPDIR/t" && echo inside-ok
        echo x > {o}/abs || echo refused-abs
        test -d ../../{name} && (echo x > ../../{name}/dotdot || echo refused-dotdot)
        echo x > /proc/self/root{o}/proc || echo refused-proc
        ln -s {o} out-link; echo x > out-link/link || echo refused-link
        mv inside.txt {o}/moved || echo refused-rename
        ln inside.txt {o}/hard || echo refused-hardlink
        {disguised}; echo done"#,
        // The project is `<tmp>/<home>/project` and `out` is `<tmp>/<out>`.
        name = out.path().file_name().unwrap().to_string_lossy(),
        disguised = disguised_write(&out.path().join("disguised")),
    );
    let output = output_of(&mut g, &script);
    for word in [
        "inside-ok",
        "refused-abs",
        "refused-dotdot",
        "refused-proc",
        "refused-link",
        "refused-rename",
        "refused-hardlink",
        "done",
    ] {
        assert!(output.contains(word), "{word} missing: {output}");
    }
    assert_empty(out.path());
    assert!(g.project.join("inside.txt").exists());
}

#[test]
fn network_is_refused_unless_granted() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let probe = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo tcp-open || echo tcp-refused; \
         (exec 4<>/dev/udp/127.0.0.1/{udp_port}) && echo udp-open || echo udp-refused"
    );
    let mut g = gjc().args(&["--sandbox", "workspace-write"]).spawn();
    let output = output_of(&mut g, &probe);
    assert!(
        output.contains("tcp-refused") && output.contains("udp-refused"),
        "{output}"
    );
    assert!(output.contains("Operation not permitted"), "{output}");
    let granted = g.ok(json!({"type": "set_sandbox", "network": true}));
    assert_eq!(granted["network"], true);
    let output = output_of(&mut g, &probe);
    assert!(
        output.contains("tcp-open") && output.contains("udp-open"),
        "{output}"
    );
}

#[test]
fn read_only_writes_nowhere_not_even_in_the_project() {
    let mut g = gjc().args(&["--sandbox", "read-only"]).spawn();
    let target = g.project.join("pwned");
    let output = output_of(
        &mut g,
        &format!(
            "cat /etc/hostname > /dev/null && echo read-ok; {}; touch kept || echo refused",
            disguised_write(&target)
        ),
    );
    assert!(
        output.contains("read-ok") && output.contains("refused"),
        "{output}"
    );
    assert!(!target.exists() && !g.project.join("kept").exists());
}

/// `GJC_LANDLOCK_ABI=0` makes gjc see a kernel without Landlock: a sandbox it asks for refuses
/// every command with a typed error, and danger-full-access (the explicit way out) still runs.
#[test]
fn a_kernel_without_landlock_fails_closed() {
    let mut g = gjc()
        .args(&["--sandbox", "workspace-write"])
        .env("GJC_LANDLOCK_ABI", "0")
        .spawn();
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["sandbox"]["enforcement"]["landlockAbi"], 0);
    let error = state["sandbox"]["enforcement"]["error"].as_str().unwrap();
    assert!(error.contains("Landlock"), "{error}");
    let target = g.project.join("ran");
    let r = g.request(json!({"type": "bash", "command": format!("touch {}", target.display())}));
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("sandbox_unavailable: "),
        "{r}"
    );
    assert!(!target.exists());
    g.ok(json!({"type": "set_sandbox", "policy": "danger-full-access"}));
    output_of(&mut g, &format!("touch {}", target.display()));
    assert!(target.exists());
}

#[test]
fn the_model_fails_closed_too() {
    let out = outside();
    let target = out.path().join("x");
    let mut g = gjc()
        .args(&["--sandbox", "read-only"])
        .env("GJC_LANDLOCK_ABI", "2")
        .script(json!({"turns": [call("bash", json!({"command": format!("touch {}", target.display())})), say("ok")]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let end = g.event("tool_execution_end");
    assert_eq!(end["isError"], true);
    assert!(
        tool_text(&end).starts_with("sandbox_unavailable: "),
        "{end}"
    );
    assert!(tool_text(&end).contains("ABI is 2"), "{end}");
    g.event("agent_end");
    assert_empty(out.path());
}

/// The model's bash runs in the sandbox; a denied command runs again outside it only when the
/// host says yes in a `confirm` dialog.
#[test]
fn a_denied_model_command_escalates_only_with_the_hosts_approval() {
    let out = outside();
    let first = out.path().join("first");
    let second = out.path().join("second");
    let mut g = gjc()
        .args(&["--sandbox", "workspace-write"])
        .script(json!({"turns": [
            call("bash", json!({"command": format!("touch {}", first.display())})),
            call("bash", json!({"command": format!("touch {}", second.display())})),
            say("done"),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    for (target, approve) in [(&first, false), (&second, true)] {
        let ask = g
            .client
            .wait_for(
                |f| f["type"] == "extension_ui_request" && f["method"] == "confirm",
                TIMEOUT,
            )
            .expect("confirm");
        assert_eq!(ask["sandboxEscalation"], "danger-full-access", "{ask}");
        assert!(
            ask["message"]
                .as_str()
                .unwrap()
                .contains("Permission denied"),
            "{ask}"
        );
        assert!(!target.exists(), "nothing runs outside before the answer");
        g.client
            .send(&json!({"type": "extension_ui_response", "id": ask["id"], "confirmed": approve}))
            .unwrap();
        let end = g.event("tool_execution_end");
        assert_eq!(end["isError"], !approve, "{end}");
        assert_eq!(
            end["result"]["details"]["sandboxEscalation"]["approved"],
            approve
        );
        assert_eq!(target.exists(), approve);
    }
    g.event("agent_end");
    // Each escalation asked is one numbered record, whatever was answered.
    let records = escalation_records(g.home.path());
    let outcomes: Vec<(u64, &str)> = records
        .iter()
        .map(|r| (r["seq"].as_u64().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(outcomes, [(1, "denied"), (2, "approved")], "{records:?}");
    assert!(records.iter().all(|r| r["to"] == "danger-full-access"));
}

/// Only gjc's own shell records an escalation in the audit trail: a host tool whose result
/// claims one (`details.sandboxEscalation`) adds nothing to it.
#[test]
fn a_host_tool_cannot_write_the_escalation_audit_trail() {
    let mut g = gjc()
        .args(&["--sandbox", "workspace-write"])
        .script(json!({"turns": [call("claims", json!({})), say("done")]}))
        .spawn();
    let tool = json!({"name": "claims", "description": "d", "parameters": {"type": "object"}});
    g.ok(json!({"type": "set_host_tools", "tools": [tool]}));
    g.ok(json!({"type": "prompt", "message": "go"}));
    let call = g
        .client
        .wait_for(|f| f["type"] == "host_tool_call", TIMEOUT)
        .expect("host_tool_call");
    let claimed = json!({"sandboxEscalation": {"to": "danger-full-access", "approved": true}});
    let result = json!({"content": [{"type": "text", "text": "ran"}], "details": claimed});
    g.client
        .send(&json!({"type": "host_tool_result", "id": call["id"], "result": result}))
        .unwrap();
    let end = g.event("tool_execution_end");
    assert_eq!(
        end["result"]["details"], claimed,
        "the host's details are kept"
    );
    g.event("agent_end");
    assert_eq!(escalation_records(g.home.path()), Vec::<Value>::new());
}

/// The records of every sandbox audit trail under `dir`.
fn escalation_records(dir: &Path) -> Vec<Value> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.parent().is_some_and(|p| p.ends_with("audit/sandbox")) {
                let text = std::fs::read_to_string(&path).unwrap();
                found.extend(
                    text.lines()
                        .map(|l| serde_json::from_str::<Value>(l).unwrap()),
                );
            }
        }
    }
    found
}

/// A workflow stage waiting for its gate is read-only in the kernel: a command the classifier
/// lets through cannot write even inside the project, and nobody is asked to escalate.
#[test]
fn a_read_only_stage_runs_commands_read_only_in_the_kernel() {
    let mut g = gjc()
        .script(json!({"turns": [call("bash", json!({"command": "x='$(touch pwned)'; echo ${x@P}; test -e pwned"})), say("ok")]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "/ralplan add a file"}));
    let end = g.event("tool_execution_end");
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["sandbox"]["effective"], "read-only", "{state}");
    assert_eq!(state["sandbox"]["limitedBy"], "workflow-stage");
    // The classifier let it through; the kernel refused the write.
    assert!(tool_text(&end).contains("Permission denied"), "{end}");
    assert!(
        end["result"]["details"].get("sandboxEscalation").is_none(),
        "{end}"
    );
    g.event("agent_end");
    assert!(!g.project.join("pwned").exists());
}

/// An unattended declaration without a write class runs commands read-only, without the
/// network class with no network, and never escalates.
#[test]
fn an_unattended_reader_runs_read_only_without_network() {
    let out = outside();
    let mut g = gjc()
        .script(json!({"turns": [call("bash", json!({"command": disguised_write(&g_target(&out))})), say("ok")]}))
        .spawn();
    g.ok(json!({"type": "negotiate_unattended", "declaration": {
        "actor": "ci", "scopes": ["prompt", "message:read", "bash"],
        "action_allowlist": ["command.message_read", "bash.readonly"],
        "budget": {"max_tokens": 100000, "max_tool_calls": 10, "max_wall_time_ms": 60000, "max_cost_usd": 5}}}));
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(
        (
            state["sandbox"]["effective"].as_str(),
            state["sandbox"]["network"].as_bool()
        ),
        (Some("read-only"), Some(false)),
        "{state}"
    );
    assert_eq!(state["sandbox"]["limitedBy"], "unattended");
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("tool_execution_end");
    g.event("agent_end");
    assert_empty(out.path());
    let r = g.request(json!({"type": "bash", "command": disguised_write(&g.project.join("w"))}));
    assert!(
        r["success"] == false || !g.project.join("w").exists(),
        "{r}"
    );
}

fn g_target(out: &tempfile::TempDir) -> std::path::PathBuf {
    out.path().join("pwned")
}

/// Hook commands run in the sandbox too.
#[test]
fn hook_commands_run_in_the_sandbox() {
    let out = outside();
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.sh");
    let body = format!(
        "#!/bin/sh\ncat >/dev/null\ntouch {}\ntouch inside-hook\n",
        out.path().join("from-hook").display()
    );
    std::fs::write(&hook, body).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let agent = dir.path().join("agent");
    crate::hooks::hooks_file(
        &agent.join("hooks.json"),
        json!([{"event": "session_start", "command": hook}]),
    );
    let mut g = gjc()
        .args(&["--sandbox", "workspace-write"])
        .env("GJC_CODING_AGENT_DIR", agent.to_str().unwrap())
        .spawn();
    g.ok(json!({"type": "get_state"}));
    let deadline = std::time::Instant::now() + TIMEOUT;
    let inside = g.project.join("inside-hook");
    while !inside.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(inside.exists(), "the hook ran");
    assert_empty(out.path());
}

/// The ways a read writes anyway, and the places commands come from.
pub mod families;

/// Every family from each RPC place: the host's `bash` and the model's bash under `read-only`,
/// a read-only workflow stage, an unattended declaration without a write class.
#[test]
fn no_family_writes_from_any_rpc_place() {
    let places: [(&str, &[&str], Option<&str>); 4] = [
        ("host bash, read-only", &["--sandbox", "read-only"], None),
        (
            "model bash, read-only",
            &["--sandbox", "read-only"],
            Some("go"),
        ),
        ("read-only stage", &[], Some("/ralplan change nothing")),
        ("unattended read-only", &[], Some("go")),
    ];
    for (place, args, prompt) in places {
        let out = outside();
        let work = tempfile::tempdir().unwrap();
        let project = work.path().canonicalize().unwrap();
        families::repository(&project, out.path());
        let commands = families::commands(&project, out.path());
        let mut g = gjc()
            .args(args)
            .args(&["--cwd", &project.display().to_string()])
            .script(families::turns(&commands))
            .spawn();
        if place.starts_with("unattended") {
            g.ok(json!({"type": "negotiate_unattended", "declaration": {
                "actor": "ci", "scopes": ["prompt", "message:read", "bash"],
                "action_allowlist": ["command.message_read", "command.bash", "bash.readonly", "bash.mutating"],
                "budget": {"max_tokens": 1000000, "max_tool_calls": 100, "max_wall_time_ms": 60000, "max_cost_usd": 5}}}));
            let state = g.ok(json!({"type": "get_state"}));
            assert_eq!(state["sandbox"]["effective"], "workspace-write", "{state}");
            // Only reading was declared after all.
            g.ok(json!({"type": "negotiate_unattended", "declaration": {
                "actor": "ci", "scopes": ["prompt", "message:read", "bash"],
                "action_allowlist": ["command.message_read", "command.bash", "bash.readonly"],
                "budget": {"max_tokens": 1000000, "max_tool_calls": 100, "max_wall_time_ms": 60000, "max_cost_usd": 5}}}));
        }
        match prompt {
            None => {
                for command in &commands {
                    g.request(json!({"type": "bash", "command": command}));
                }
            }
            Some(message) => {
                g.ok(json!({"type": "prompt", "message": message}));
                refuse_until_the_end(&mut g);
            }
        }
        families::assert_untouched(place, &project, out.path());
    }
}

/// Waits for the run's end, refusing every dialog on the way (escalations included).
fn refuse_until_the_end(g: &mut Gjc) {
    loop {
        let frame = g
            .client
            .wait_for(
                |f| {
                    (f["type"] == "extension_ui_request" && f["method"] == "confirm")
                        || (f["type"] == "event" && f["payload"]["event_type"] == "agent_end")
                },
                TIMEOUT,
            )
            .expect("a dialog or the run's end");
        if frame["type"] == "event" {
            return;
        }
        g.client
            .send(&json!({"type": "extension_ui_response", "id": frame["id"], "confirmed": false}))
            .unwrap();
    }
}
