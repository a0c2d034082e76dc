//! Todo reminders and the automatic clear: a run that would end with open tasks is reminded of
//! them (a bounded number of times), and a list whose every task is closed is cleared at the end.

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

fn todo_write(tasks: Value) -> Value {
    json!({"content": [{"type": "toolCall", "name": "todo_write",
        "arguments": {"phases": [{"name": "Work", "tasks": tasks}]}}]})
}

fn say(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// Every frame of one run, up to and including `agent_end`, and that no second `agent_end`
/// follows: a `get_state` answered next comes before any further event of the run.
fn run_frames(g: &mut Gjc) -> Vec<Value> {
    let frames = g
        .client
        .collect_until(
            |f| f["type"] == "event" && f["payload"]["event_type"] == "agent_end",
            TIMEOUT,
        )
        .expect("agent_end");
    let state = g.request(json!({"type": "get_state"}));
    assert_eq!(state["data"]["isStreaming"], false);
    let late: Vec<Value> = g
        .client
        .take_backlog()
        .into_iter()
        .map(|f| f.value)
        .filter(|f| f["type"] == "event")
        .collect();
    assert!(late.is_empty(), "events after agent_end: {late:?}");
    frames
}

fn events(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| f["payload"]["event"].clone())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn position(events: &[Value], kind: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
}

#[test]
fn open_tasks_are_reminded_and_a_finished_list_is_cleared() {
    let mut g = gjc()
        .script(json!({"turns": [
            todo_write(json!([{"content": "Write code", "status": "in_progress"}, {"content": "Test it", "status": "pending"}])),
            say("I will stop here."),
            todo_write(json!([{"content": "Write code", "status": "completed"}, {"content": "Test it", "status": "completed"}])),
            say("All done."),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "work"}));
    let frames = run_frames(&mut g);
    let ev = events(&frames);
    let reminders = of_type(&ev, "todo_reminder");
    assert_eq!(reminders.len(), 1, "{:?}", crate::support::types(&ev));
    assert_eq!(reminders[0]["attempt"], 1);
    assert_eq!(reminders[0]["maxAttempts"], 3);
    let contents: Vec<&str> = reminders[0]["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["Write code", "Test it"]);

    // The reminder is a user message the model sees, in a new turn of the same run.
    let at = position(&ev, "todo_reminder");
    assert_eq!(ev[at + 1]["type"], "turn_start");
    let reminder = &ev[at + 2]["message"];
    assert_eq!(reminder["role"], "user");
    let text = reminder["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("- [in_progress] Write code\n- [pending] Test it"),
        "{text}"
    );
    assert_eq!(of_type(&ev, "agent_end").len(), 1);
    let end = ev.last().unwrap();
    assert_eq!(end["outcome"], "completed");

    // Cleared before the run ended, widget emptied, state follows.
    assert!(position(&ev, "todo_auto_clear") < ev.len() - 1);
    let last_widget = frames
        .iter()
        .rev()
        .find(|f| f["method"] == "setWidget")
        .expect("widget update");
    assert_eq!(last_widget["widgetLines"], json!([]));
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["todoPhases"], json!([]));
    let sent = g.messages();
    assert!(sent
        .iter()
        .any(|m| m["role"] == "user" && m["content"][0]["text"] == text));
}

#[test]
fn reminders_stop_at_the_configured_maximum() {
    let mut g = gjc()
        .env("GJC_TODO_REMINDERS", "2")
        .script(json!({"turns": [
            todo_write(json!([{"content": "Never finished", "status": "pending"}])),
            say("stop one"),
            say("stop two"),
            say("stop three"),
            say("stop four"),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "work"}));
    let ev = events(&run_frames(&mut g));
    let attempts: Vec<(Value, Value)> = of_type(&ev, "todo_reminder")
        .iter()
        .map(|r| (r["attempt"].clone(), r["maxAttempts"].clone()))
        .collect();
    assert_eq!(attempts, [(json!(1), json!(2)), (json!(2), json!(2))]);
    assert!(of_type(&ev, "todo_auto_clear").is_empty());
    assert_eq!(of_type(&ev, "agent_end").len(), 1);
    assert_eq!(ev.last().unwrap()["outcome"], "completed");
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["todoPhases"][0]["tasks"][0]["content"], "Never finished");
    // A new run gets its own reminders.
    g.ok(json!({"type": "prompt", "message": "again"}));
    let ev = events(&run_frames(&mut g));
    assert_eq!(of_type(&ev, "todo_reminder")[0]["attempt"], 1);
}

#[test]
fn the_flag_turns_reminders_off() {
    let mut g = gjc()
        .args(&["--no-todo-reminders"])
        .script(json!({"turns": [
            todo_write(json!([{"content": "Open task", "status": "in_progress"}])),
            say("stopping"),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "work"}));
    let ev = events(&run_frames(&mut g));
    assert!(of_type(&ev, "todo_reminder").is_empty());
    assert_eq!(ev.last().unwrap()["outcome"], "completed");
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["todoPhases"][0]["tasks"][0]["status"], "in_progress");
}

#[test]
fn an_all_closed_list_from_set_todos_is_cleared_when_a_run_ends() {
    let mut g = gjc().script(json!({"turns": [say("ok")]})).spawn();
    g.ok(
        json!({"type": "set_todos", "phases": [{"name": "P", "tasks": [
        {"content": "a", "status": "completed"}, {"content": "b", "status": "abandoned"}]}]}),
    );
    g.ok(json!({"type": "prompt", "message": "hi"}));
    let ev = events(&run_frames(&mut g));
    assert_eq!(of_type(&ev, "todo_auto_clear").len(), 1);
    assert!(of_type(&ev, "todo_reminder").is_empty());
    let s = g.ok(json!({"type": "get_state"}));
    assert_eq!(s["todoPhases"], json!([]));
}
