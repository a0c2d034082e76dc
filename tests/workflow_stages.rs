//! The workflow stages end to end on the scripted provider: ralplan refuses writes until its
//! plan is approved (request-changes, approve, reject), ultragoal waits for its execution gate,
//! deep-interview clarifies through ask gates before writing its spec.

use serde_json::{json, Value};

use crate::support::{gjc, Gjc, TIMEOUT};

fn call(name: &str, args: Value) -> Value {
    json!({"content": [{"type": "toolCall", "name": name, "arguments": args}]})
}

fn say(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn gate(g: &mut Gjc) -> Value {
    g.client
        .wait_for(|f| f["type"] == "workflow_gate", TIMEOUT)
        .expect("workflow_gate")
}

fn answer(g: &mut Gjc, gate: &Value, answer: Value) -> Value {
    let r = g.request(
        json!({"type": "workflow_gate_response", "gate_id": gate["gate_id"], "answer": answer}),
    );
    assert_eq!(r["success"], true, "{r}");
    r["data"].clone()
}

fn tool_end(g: &mut Gjc) -> Value {
    g.event("tool_execution_end")
}

fn text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn write_plan(path: &str) -> Value {
    call("write", json!({"path": path, "content": "done\n"}))
}

#[test]
fn ralplan_is_read_only_until_the_plan_is_approved() {
    let plan = json!({"summary": "1. write out.txt"});
    let mut g = gjc()
        .script(json!({"turns": [
            write_plan("early.txt"),
            call("bash", json!({"command": "touch early2.txt"})),
            call("bash", json!({"command": "ls"})),
            call("workflow_gate", plan),
            call("workflow_gate", json!({"summary": "1. write out.txt, then check it"})),
            write_plan("out.txt"),
            say("Done."),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "/ralplan add out.txt"}));
    let refused = tool_end(&mut g);
    assert_eq!(refused["isError"], true);
    assert!(
        text(&refused).starts_with("workflow_read_only: ralplan is read-only"),
        "{refused}"
    );
    assert!(text(&tool_end(&mut g)).contains("touch early2.txt"));
    assert_eq!(
        tool_end(&mut g)["isError"],
        false,
        "a read-only command runs"
    );
    assert_eq!(
        g.ok(json!({"type": "get_state"}))["workflowStage"],
        "ralplan"
    );

    let first = gate(&mut g);
    assert_eq!(
        (first["stage"].as_str(), first["kind"].as_str()),
        (Some("ralplan"), Some("approval"))
    );
    assert_eq!(first["context"]["plan"], "1. write out.txt");
    let missing = answer(&mut g, &first, json!({"decision": "request-changes"}));
    assert_eq!(
        missing["status"], "rejected",
        "comments are required with request-changes"
    );
    answer(
        &mut g,
        &first,
        json!({"decision": "request-changes", "comments": "check the file too"}),
    );
    assert!(text(&tool_end(&mut g)).contains("check the file too"));

    let second = gate(&mut g);
    assert_eq!(
        second["gate_id"].as_str().unwrap().rsplit('_').next(),
        Some("000002")
    );
    answer(&mut g, &second, json!({"decision": "approve"}));
    assert!(text(&tool_end(&mut g)).starts_with("Approved."));
    let wrote = tool_end(&mut g);
    assert_eq!(wrote["isError"], false, "{wrote}");
    let end = g.event("agent_end");
    assert_eq!(end["outcome"], "completed");
    assert!(g.project.join("out.txt").exists());
    assert!(!g.project.join("early.txt").exists() && !g.project.join("early2.txt").exists());
}

#[test]
fn a_rejected_plan_ends_the_run_denied() {
    let mut g = gjc()
        .script(json!({"turns": [call("workflow_gate", json!({"summary": "rm -rf /"})), write_plan("never.txt")]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "/ralplan clean up"}));
    let gate = gate(&mut g);
    answer(&mut g, &gate, json!({"decision": "reject"}));
    let end = g.event("agent_end");
    assert_eq!(end["outcome"], "denied", "{end}");
    assert!(!g.project.join("never.txt").exists());
}

#[test]
fn ultragoal_runs_only_after_its_execution_gate() {
    let mut g = gjc()
        .script(json!({"turns": [
            write_plan("early.txt"),
            call("workflow_gate", json!({"summary": "write goal.txt"})),
            write_plan("goal.txt"),
            say("Goal met."),
            call("workflow_gate", json!({"summary": "again"})),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "/ultragoal make goal.txt"}));
    assert_eq!(tool_end(&mut g)["isError"], true);
    let gate1 = gate(&mut g);
    assert_eq!(
        (gate1["stage"].as_str(), gate1["kind"].as_str()),
        (Some("ultragoal"), Some("execution"))
    );
    answer(&mut g, &gate1, json!({"decision": "approve"}));
    assert_eq!(g.event("agent_end")["outcome"], "completed");
    assert!(g.project.join("goal.txt").exists() && !g.project.join("early.txt").exists());

    g.ok(json!({"type": "prompt", "message": "/ultragoal more"}));
    let gate2 = gate(&mut g);
    answer(
        &mut g,
        &gate2,
        json!({"decision": "decline", "reason": "not now"}),
    );
    assert_eq!(g.event("agent_end")["outcome"], "denied");
}

#[test]
fn deep_interview_clarifies_through_ask_gates_then_writes_its_spec() {
    let ask = json!({"questions": [{"id": "scope", "question": "Which scope?", "options": [{"label": "small"}, {"label": "large"}]}]});
    let mut g = gjc()
        .script(json!({"turns": [
            call("write", json!({"path": ".gjc/specs/x.md", "content": "too early"})),
            call("ask", ask),
            call("write", json!({"path": ".gjc/specs/x.md", "content": "# Spec\nscope: small\n"})),
            say("The specification is in .gjc/specs/x.md."),
        ]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "/deep-interview a tiny tool"}));
    assert!(text(&tool_end(&mut g)).contains("until the user has answered a clarifying question"));
    let q = gate(&mut g);
    assert_eq!(
        (q["stage"].as_str(), q["kind"].as_str()),
        (Some("deep-interview"), Some("question"))
    );
    answer(&mut g, &q, json!({"selected": ["small"]}));
    assert!(text(&tool_end(&mut g)).contains("Answer: small"));
    assert_eq!(tool_end(&mut g)["isError"], false);
    assert_eq!(g.event("agent_end")["outcome"], "completed");
    let spec = std::fs::read_to_string(g.project.join(".gjc/specs/x.md")).unwrap();
    assert!(spec.contains("scope: small"));
}

#[test]
fn a_skill_of_the_same_name_replaces_the_stage_prompt() {
    let mut g = gjc().script(json!({"turns": [say("ok")]})).spawn();
    let skill = g.home.path().join("agent/skills/ralplan");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: ralplan\ndescription: ours\n---\nOUR OWN PLANNING RULES\n",
    )
    .unwrap();
    g.ok(json!({"type": "prompt", "message": "/ralplan x"}));
    g.event("agent_end");
    let first = g.messages()[0].to_string();
    assert!(
        first.contains("OUR OWN PLANNING RULES") && first.contains("Task: x"),
        "{first}"
    );
}

#[test]
fn a_stage_belongs_to_its_session() {
    let mut g = gjc()
        .script(json!({"turns": [say("Planning later.")]}))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "/ralplan x"}));
    assert_eq!(g.event("agent_end")["outcome"], "completed");
    assert_eq!(
        g.ok(json!({"type": "get_state"}))["workflowStage"],
        "ralplan",
        "kept until cleared"
    );
    g.ok(json!({"type": "new_session"}));
    let state = g.ok(json!({"type": "get_state"}));
    assert!(state.get("workflowStage").is_none(), "{state}");
}
