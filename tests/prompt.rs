//! Prompting through a fake provider over HTTP and through the scripted provider: event order,
//! tool loops, steering in both interrupt modes, follow-ups, busy prompts, compact updates, and
//! what was sent back to the model.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_provider::{anthropic_text, openai_text, openai_tool_call};
use crate::support::{gjc, types, FakeProvider, Reply, TIMEOUT};

#[test]
fn plain_answer_events_in_order_and_request_shape() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_text(&["Hel", "lo"])));
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-openai", "--model", "m"])
        .spawn();
    let ack = g.request(json!({"type": "prompt", "message": "Say hello"}));
    assert_eq!(
        ack,
        json!({"id": ack["id"], "type": "response", "command": "prompt", "success": true})
    );
    let events = g.run_events();
    let t = types(&events);
    assert_eq!(
        t,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_update",
            "message_update",
            "message_update",
            "message_update",
            "message_end",
            "turn_end",
            "agent_end"
        ]
    );
    assert_eq!(events[2]["message"]["role"], "user");
    let start = &events[5]["assistantMessageEvent"];
    assert_eq!(start["type"], "text_start");
    assert_eq!(start["contentIndex"], 0);
    assert_eq!(start["partial"], events[5]["message"], "the snapshot twice");
    assert_eq!(start["partial"]["content"][0]["text"], "");
    assert_eq!(events[6]["assistantMessageEvent"]["delta"], "Hel");
    assert_eq!(
        events[7]["message"]["content"][0]["text"], "Hello",
        "the snapshot grows with the deltas"
    );
    let end = &events[9]["message"];
    assert_eq!(end["stopReason"], "stop");
    assert_eq!(end["usage"]["input"], 10);
    assert_eq!(end["usage"]["output"], 5);
    assert!(end["usage"]["cost"]["total"].as_f64().unwrap() > 0.0);
    assert_eq!(events[11]["messages"].as_array().unwrap().len(), 2);

    let req = fake.request(TIMEOUT);
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer test-key"));
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["messages"][0]["role"], "system");
    assert_eq!(
        req.body["messages"][1],
        json!({"role": "user", "content": "Say hello"})
    );
    assert!(req.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["function"]["name"] == "read"));

    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["isStreaming"], false);
    assert_eq!(s["messageCount"], 2);
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "Hello"
    );
    let stats = g.ok(json!({"type": "get_session_stats"}));
    assert_eq!(stats["assistantMessages"], 1);
    assert_eq!(stats["tokens"]["total"], 15);
}

#[test]
fn thinking_signature_is_sent_back_to_anthropic() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(anthropic_text(
        Some(("Pondering.", "SIG_abc==")),
        "Answer one",
    )));
    fake.push(Reply::sse(anthropic_text(None, "Answer two")));
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&[
            "--provider",
            "fake-anthropic",
            "--model",
            "m",
            "--thinking",
            "medium",
        ])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "one"}));
    let events = g.run_events();
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end")
        .unwrap();
    assert_eq!(
        end["message"]["content"][0],
        json!({"type": "thinking", "thinking": "Pondering.", "thinkingSignature": "SIG_abc=="})
    );
    assert_eq!(end["message"]["usage"]["cacheRead"], 3);
    let first = fake.request(TIMEOUT);
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.header("x-api-key"), Some("test-key"));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(first.body["thinking"]["type"], "enabled");
    assert_eq!(
        first.body["system"][0]["cache_control"]["type"],
        "ephemeral"
    );
    g.ok(json!({"type": "prompt", "message": "two"}));
    g.run_events();
    let second = fake.request(TIMEOUT);
    let assistant = &second.body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "Pondering.", "signature": "SIG_abc=="})
    );
}

#[test]
fn tool_call_loop_sends_results_back() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_tool_call("call_1", "ls", &json!({}))));
    fake.push(Reply::sse(openai_text(&["Two files."])));
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-openai", "--model", "m"])
        .spawn();
    std::fs::write(g.project.join("a.txt"), "").unwrap();
    g.ok(json!({"type": "prompt", "message": "list"}));
    let events = g.run_events();
    let t = types(&events);
    assert_eq!(t.iter().filter(|e| *e == "agent_start").count(), 1);
    assert_eq!(t.iter().filter(|e| *e == "turn_start").count(), 2);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["toolCallId"], "call_1");
    assert_eq!(end["isError"], false);
    assert_eq!(end["result"]["content"][0]["text"], "a.txt\n");
    let turn_end = events.iter().find(|e| e["type"] == "turn_end").unwrap();
    assert_eq!(turn_end["toolResults"][0]["toolCallId"], "call_1");
    fake.request(TIMEOUT);
    let second = fake.request(TIMEOUT);
    let msgs = second.body["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "a.txt\n"})
    );
}

#[test]
fn unknown_tools_and_invalid_arguments_become_error_results() {
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [{"type": "toolCall", "name": "teleport", "arguments": {}}, {"type": "toolCall", "name": "read", "arguments": {"path": 7}}]},
            {"content": [{"type": "text", "text": "ok"}]}
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(
        ends[0]["result"]["content"][0]["text"],
        "Tool teleport not found"
    );
    assert!(ends[1]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Invalid arguments for tool read"));
    assert!(ends.iter().all(|e| e["isError"] == true));
    assert_eq!(events.last().unwrap()["type"], "agent_end");
}

fn steer_script() -> Value {
    json!({"turns": [
        {"content": [
            {"type": "toolCall", "id": "slow", "name": "bash", "arguments": {"command": "sleep 0.6; echo one"}},
            {"type": "toolCall", "id": "second", "name": "bash", "arguments": {"command": "echo two"}}
        ]},
        {"content": [{"type": "text", "text": "after steer"}]}
    ]})
}

#[test]
fn steer_in_immediate_mode_skips_the_remaining_tool_calls() {
    let mut g = gjc().script(steer_script()).spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("tool_execution_start");
    g.ok(json!({"type": "steer", "message": "change of plan"}));
    assert_eq!(g.ok(json!({"type": "get_state"}))["queuedMessageCount"], 1);
    let events = g.run_events();
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["toolCallId"], "slow");
    assert_eq!(
        ends[0]["result"]["content"][0]["text"], "one",
        "the running tool keeps its result"
    );
    assert_eq!(ends[1]["toolCallId"], "second");
    assert_eq!(
        ends[1]["result"]["content"][0]["text"],
        "Skipped due to queued user message."
    );
    let steer_pos = events
        .iter()
        .position(|e| {
            e["type"] == "message_start" && e["message"]["content"][0]["text"] == "change of plan"
        })
        .expect("steer injected");
    let turn_end_pos = events.iter().position(|e| e["type"] == "turn_end").unwrap();
    assert!(
        steer_pos > turn_end_pos,
        "steering is injected at the next turn"
    );
    assert_eq!(g.ok(json!({"type": "get_state"}))["queuedMessageCount"], 0);
}

#[test]
fn steer_in_wait_mode_lets_every_tool_finish() {
    let mut g = gjc().script(steer_script()).spawn();
    g.ok(json!({"type": "set_interrupt_mode", "mode": "wait"}));
    g.ok(json!({"type": "prompt", "message": "go"}));
    g.event("tool_execution_start");
    g.ok(json!({"type": "steer", "message": "later"}));
    let events = g.run_events();
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[1]["result"]["content"][0]["text"], "two");
    assert!(events
        .iter()
        .any(|e| e["type"] == "message_start" && e["message"]["content"][0]["text"] == "later"));
}

#[test]
fn follow_up_while_streaming_continues_the_same_run() {
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [{"type": "text", "text": "first answer, slowly"}], "delayMs": 20, "chunkChars": 2},
            {"content": [{"type": "text", "text": "second"}]}
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "one"}));
    g.event("message_update");
    let busy = g.request(json!({"type": "prompt", "message": "no behaviour"}));
    assert_eq!(busy["success"], false);
    assert!(
        busy["error"]
            .as_str()
            .unwrap()
            .starts_with("Agent is already processing"),
        "{busy}"
    );
    g.ok(json!({"type": "prompt", "message": "and then", "streamingBehavior": "followUp"}));
    assert_eq!(g.ok(json!({"type": "get_state"}))["isStreaming"], true);
    let events = g.run_events();
    let t = types(&events);
    assert_eq!(
        t.iter().filter(|e| *e == "agent_start").count(),
        1,
        "the follow-up runs inside the same run"
    );
    assert_eq!(t.iter().filter(|e| *e == "agent_end").count(), 1);
    assert!(events
        .iter()
        .any(|e| e["type"] == "message_start" && e["message"]["content"][0]["text"] == "and then"));
    assert_eq!(
        g.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "second"
    );
}

#[test]
fn steer_when_idle_after_an_answer_starts_a_run() {
    let mut g = gjc().script(json!({"turns": [{"content": [{"type": "text", "text": "a"}]}, {"content": [{"type": "text", "text": "b"}]}]})).spawn();
    g.ok(json!({"type": "prompt", "message": "one"}));
    g.run_events();
    let id = g.client.next_id();
    g.client
        .send(&json!({"id": id, "type": "steer", "message": "more"}))
        .unwrap();
    let frames = g
        .client
        .collect_until(|f| f["payload"]["event_type"] == "agent_end", TIMEOUT)
        .unwrap();
    assert_eq!(
        frames[0]["id"], id,
        "the steer response precedes the run it starts"
    );
    assert_eq!(frames[1]["payload"]["event_type"], "agent_start");
}

#[test]
fn compact_updates_carry_only_the_delta() {
    let mut g = gjc().script(json!({"turns": [{"content": [{"type": "text", "text": "abcdefghij"}], "chunkChars": 1}]})).spawn();
    let d = g.ok(
        json!({"type": "set_capabilities", "capabilities": ["compact_message_update", "bogus"]}),
    );
    assert_eq!(
        d,
        json!({"acceptedCapabilities": ["compact_message_update"], "unsupported": ["bogus"]})
    );
    g.ok(json!({"type": "prompt", "message": "x"}));
    let frames = g
        .client
        .collect_until(|f| f["payload"]["event_type"] == "agent_end", TIMEOUT)
        .unwrap();
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["payload"]["event_type"] == "message_update")
        .collect();
    assert_eq!(updates.len(), 12);
    for u in &updates {
        assert_eq!(u["payload"]["compact"], true);
        assert!(u["payload"].get("event").is_none());
        assert!(u["payload"]["message_id"].is_null());
        assert_eq!(u["payload"]["content_index"], 0);
    }
    assert_eq!(
        updates[1]["payload"]["assistantMessageEvent"],
        json!({"type": "text_delta", "contentIndex": 0, "delta": "a"})
    );
    let end = frames
        .iter()
        .find(|f| {
            f["payload"]["event_type"] == "message_end"
                && f["payload"]["event"]["message"]["role"] == "assistant"
        })
        .unwrap();
    assert_eq!(
        end["payload"]["event"]["message"]["content"][0]["text"],
        "abcdefghij"
    );
}

#[test]
fn todo_write_updates_state() {
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [{"type": "toolCall", "name": "todo_write", "arguments": {"phases": [{"name": "Work", "tasks": [{"content": "Write tests", "status": "in_progress"}]}]}}]},
            {"content": [{"type": "text", "text": "planned"}]}
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "plan"}));
    g.run_events();
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(
        s["todoPhases"][0]["tasks"][0],
        json!({"id": "task-1", "content": "Write tests", "status": "in_progress"})
    );
}

#[test]
fn user_bash_is_recorded_for_the_next_prompt() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_text(&["seen"])));
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-openai", "--model", "m"])
        .spawn();
    let d = g.ok(json!({"type": "bash", "command": "echo from-user; exit 3"}));
    assert_eq!(d["output"], "from-user\n");
    assert_eq!(d["exitCode"], 3);
    assert_eq!(d["cancelled"], false);
    assert_eq!(d["truncated"], false);
    g.ok(json!({"type": "prompt", "message": "what happened?"}));
    g.run_events();
    let req = fake.request(Duration::from_secs(5));
    let user = req.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("Ran `echo from-user; exit 3`")
            && user.contains("Command exited with code 3"),
        "{user}"
    );
}

#[test]
fn a_second_user_bash_is_refused_while_one_runs() {
    let mut g = gjc().spawn();
    let first = g.client.next_id();
    g.client
        .send(&json!({"id": first, "type": "bash", "command": "sleep 5"}))
        .unwrap();
    let r = g.request(json!({"type": "bash", "command": "echo second"}));
    assert_eq!(r["success"], false);
    assert!(r["error"].as_str().unwrap().starts_with("busy: "), "{r}");
    g.ok(json!({"type": "abort_bash"}));
    let done = g.client.wait_for(|f| f["id"] == first, TIMEOUT).unwrap();
    assert_eq!(done["data"]["cancelled"], true);
    assert_eq!(
        g.ok(json!({"type": "bash", "command": "echo again"}))["output"],
        "again\n"
    );
}

#[test]
fn tool_calls_cut_off_by_the_token_limit_are_not_run() {
    let mut g = gjc()
        .script(json!({"turns": [
            {"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": "touch should-not-exist"}}], "stopReason": "length"},
            {"content": [{"type": "text", "text": "ok"}]}
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "go"}));
    let events = g.run_events();
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    assert!(end["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("cut off by the output token limit"));
    assert!(!g.project.join("should-not-exist").exists());
}

#[test]
fn full_loop_reads_edits_and_runs_a_test_through_the_fake_provider() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_tool_call(
        "c1",
        "read",
        &json!({"path": "math.sh"}),
    )));
    fake.push(Reply::sse(openai_tool_call(
        "c2",
        "bash",
        &json!({"command": "sh test.sh"}),
    )));
    fake.push(Reply::sse(openai_tool_call(
        "c3",
        "edit",
        &json!({"path": "math.sh", "edits": [{"oldText": "$1 - $2", "newText": "$1 + $2"}]}),
    )));
    fake.push(Reply::sse(openai_tool_call(
        "c4",
        "bash",
        &json!({"command": "sh test.sh"}),
    )));
    fake.push(Reply::sse(openai_text(&["Fixed."])));
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&["--provider", "fake-openai", "--model", "m"])
        .spawn();
    std::fs::write(
        g.project.join("math.sh"),
        "add() { echo $(( $1 - $2 )); }\n",
    )
    .unwrap();
    std::fs::write(
        g.project.join("test.sh"),
        ". ./math.sh\n[ \"$(add 2 3)\" = 5 ] && echo PASS || { echo FAIL; exit 1; }\n",
    )
    .unwrap();
    g.ok(json!({"type": "prompt", "message": "fix the test"}));
    let events = g.run_events();
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 4);
    assert!(ends[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("$1 - $2"));
    assert_eq!(ends[1]["isError"], true, "the test fails first");
    assert_eq!(ends[2]["isError"], false);
    assert_eq!(ends[3]["result"]["content"][0]["text"], "PASS");
    assert_eq!(
        std::fs::read_to_string(g.project.join("math.sh")).unwrap(),
        "add() { echo $(( $1 + $2 )); }\n"
    );
    for _ in 0..4 {
        fake.request(TIMEOUT);
    }
    let last = fake.request(TIMEOUT);
    let tool_msgs: Vec<&Value> = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_msgs.len(), 4);
    assert_eq!(tool_msgs[3]["content"], "PASS");
}

#[test]
fn big_user_bash_output_spills_and_the_file_goes_with_the_session() {
    let mut g = gjc().spawn();
    let d = g.ok(json!({"type": "bash", "command": "seq 1 100000"}));
    assert_eq!(d["truncated"], true);
    assert!(d["output"].as_str().unwrap().ends_with("99999\n100000\n"));
    let path = std::path::PathBuf::from(d["fullOutputPath"].as_str().unwrap());
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full.lines().count(), 100_000);
    assert_eq!(d["totalBytes"], full.len());
    g.ok(json!({"type": "new_session"}));
    let deadline = std::time::Instant::now() + TIMEOUT;
    while path.exists() && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert!(!path.exists(), "the spill file outlived its session");
}

#[test]
fn tools_report_permission_denied() {
    let call = |id: &str, name: &str, arguments: Value| json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments});
    let mut g = gjc()
        .unprivileged()
        .args(&["--no-session"])
        .script(json!({"turns": [
            {"content": [
                call("read", "read", json!({"path": "locked.txt"})),
                call("write", "write", json!({"path": "sealed/new.txt", "content": "x"})),
                call("edit", "edit", json!({"path": "sealed/kept.txt", "edits": [{"oldText": "old", "newText": "new"}]})),
                call("ls", "ls", json!({"path": "closed"})),
            ]},
            {"content": [{"type": "text", "text": "done"}]},
        ]}))
        .spawn();
    let mode = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap()
    };
    let p = g.project.clone();
    std::fs::write(p.join("locked.txt"), "secret").unwrap();
    mode(&p.join("locked.txt"), 0o000);
    std::fs::create_dir(p.join("sealed")).unwrap();
    std::fs::write(p.join("sealed/kept.txt"), "old").unwrap();
    mode(&p.join("sealed"), 0o555);
    std::fs::create_dir(p.join("closed")).unwrap();
    mode(&p.join("closed"), 0o000);

    g.ok(json!({"type": "prompt", "message": "try"}));
    let events = g.run_events();
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 4, "{ends:?}");
    for end in ends {
        let text = end["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert_eq!(end["isError"], true, "{}: {text}", end["toolCallId"]);
        assert!(
            text.contains("permission denied"),
            "{}: {text}",
            end["toolCallId"]
        );
    }
    mode(&p.join("sealed"), 0o755);
    mode(&p.join("closed"), 0o755);
    assert_eq!(
        std::fs::read_to_string(p.join("sealed/kept.txt")).unwrap(),
        "old"
    );
    assert!(!p.join("sealed/new.txt").exists());
}
