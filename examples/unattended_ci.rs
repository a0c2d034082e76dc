//! A CI host with no human: it negotiates unattended mode (actor, budget, scopes, allowlist),
//! starts `/ralplan`, and answers every workflow gate from a policy function, never a person.
//! The scripted model first tries to write before its plan is approved (refused), looks around
//! read-only, presents a plan, gets changes requested once by the policy, presents a revised
//! plan, and carries it out once approved.
//!
//! `cargo build --release --bins --examples && target/release/examples/unattended_ci`

use std::time::Duration;

use gjc::client::RpcClient;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// The policy: plans must say how they are verified and must not delete anything; questions get
/// their recommended option (else the first).
fn policy(gate: &Value) -> Value {
    match gate["kind"].as_str() {
        Some("approval") | Some("execution") => {
            let plan = gate["context"]["plan"]
                .as_str()
                .or(gate["context"]["summary"].as_str())
                .unwrap_or("");
            if plan.contains("rm -rf") {
                json!({"decision": if gate["kind"] == "approval" { "reject" } else { "decline" }, "comments": "no deletions"})
            } else if gate["kind"] == "approval" && !plan.contains("verify") {
                json!({"decision": "request-changes", "comments": "say how the change is verified"})
            } else {
                json!({"decision": "approve"})
            }
        }
        _ => {
            let options = gate["options"].as_array().cloned().unwrap_or_default();
            let pick = options
                .iter()
                .find(|o| o["description"] == "recommended")
                .or(options.first())
                .map(|o| o["label"].clone());
            match pick {
                Some(label) => json!({"selected": [label]}),
                None => json!({"selected": [], "other": true, "custom": "use your judgement"}),
            }
        }
    }
}

fn call(name: &str, args: Value) -> Value {
    json!({"content": [{"type": "toolCall", "name": name, "arguments": args}]})
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = json!({"turns": [
        call("write", json!({"path": "VERSION", "content": "2\n"})),
        call("bash", json!({"command": "ls -a"})),
        call("workflow_gate", json!({"summary": "1. Write VERSION with 2."})),
        call("workflow_gate", json!({"summary": "1. Write VERSION with 2.\n2. verify with cat VERSION."})),
        call("write", json!({"path": "VERSION", "content": "2\n"})),
        call("bash", json!({"command": "cat VERSION"})),
        {"content": [{"type": "text", "text": "VERSION is 2, verified."}]}
    ]});
    // Script, sessions, gates and audit trail go to a folder removed at exit, never to ~/.gjc.
    let agent_dir = tempfile::tempdir()?;
    let project = tempfile::tempdir()?;
    let path = agent_dir.path().join("script.json");
    std::fs::write(&path, script.to_string())?;
    let mut gjc = RpcClient::builder(RpcClient::default_program())
        .env("GJC_CODING_AGENT_DIR", agent_dir.path())
        .current_dir(project.path())
        .args(["--provider", "scripted", "--script"])
        .arg(&path)
        .spawn()?;
    gjc.recv(WAIT)?;
    let declaration = json!({"actor": "ci/release-bot",
        "budget": {"max_tokens": 200000, "max_tool_calls": 50, "max_wall_time_ms": 60000, "max_cost_usd": 1},
        "scopes": ["prompt", "control", "message:read", "bash"],
        "action_allowlist": ["command.prompt", "command.control", "command.message_read", "bash.readonly", "file.write"]});
    let accepted = gjc.request(
        json!({"type": "negotiate_unattended", "declaration": declaration}),
        WAIT,
    )?;
    println!("negotiated: {}", accepted["data"]);
    gjc.request(
        json!({"type": "prompt", "message": "/ralplan bump VERSION to 2"}),
        WAIT,
    )?;
    loop {
        let frame = gjc.wait_for(
            |f| {
                f["type"] == "workflow_gate"
                    || (f["type"] == "event"
                        && matches!(
                            f["payload"]["event_type"].as_str(),
                            Some("agent_end" | "tool_execution_end")
                        ))
            },
            WAIT,
        )?;
        if frame["type"] == "workflow_gate" {
            let answer = policy(&frame);
            let reply = gjc.request(
                json!({"type": "workflow_gate_response", "gate_id": frame["gate_id"], "answer": answer,
                       "idempotency_key": format!("ci-{}", frame["gate_id"].as_str().unwrap_or(""))}),
                WAIT,
            )?;
            println!(
                "gate {} ({} {}): answered {answer} -> {}",
                frame["gate_id"], frame["stage"], frame["kind"], reply["data"]["status"]
            );
            continue;
        }
        let event = &frame["payload"]["event"];
        if event["type"] == "tool_execution_end" {
            let text = event["result"]["content"][0]["text"].as_str().unwrap_or("");
            let first = text.lines().next().unwrap_or("");
            println!(
                "tool {} ({}): {first}",
                event["toolName"],
                if event["isError"] == true {
                    "error"
                } else {
                    "ok"
                }
            );
            continue;
        }
        println!("run ended: outcome {}", event["outcome"]);
        break;
    }
    let state = gjc.request(json!({"type": "get_state"}), WAIT)?;
    println!("budget used: {}", state["data"]["unattended"]["used"]);
    println!(
        "VERSION: {:?}",
        std::fs::read_to_string(project.path().join("VERSION")).ok()
    );
    gjc.close_stdin();
    gjc.wait_exit(Duration::from_secs(5));
    Ok(())
}
