//! A CI host with no human: it negotiates unattended mode (actor, budget, scopes, allowlist),
//! starts `/ralplan`, and answers every workflow gate from a policy function, never a person.
//! The scripted model first tries to write before its plan is approved (refused), looks around
//! read-only, presents a plan, gets changes requested once by the policy, presents a revised
//! plan, and carries it out once approved.
//!
//! `cargo build --release --bins --examples && target/release/examples/unattended_ci`

use std::time::Duration;

use gjc::client::{Handlers, RpcClient};
use gjc::protocol::command::{Command, NegotiateUnattendedParams};
use gjc::protocol::frame::{Event, Frame};
use gjc::protocol::gate::WorkflowGate;
use gjc::protocol::message::joined_text;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// The policy: plans must say how they are verified and must not delete anything; questions get
/// their recommended option (else the first).
fn policy(gate: &WorkflowGate) -> Value {
    match gate.kind.as_str() {
        kind @ ("approval" | "execution") => {
            let plan = gate
                .context
                .get("plan")
                .or(gate.context.get("summary"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if plan.contains("rm -rf") {
                let no = if kind == "approval" {
                    "reject"
                } else {
                    "decline"
                };
                json!({"decision": no, "comments": "no deletions"})
            } else if kind == "approval" && !plan.contains("verify") {
                json!({"decision": "request-changes", "comments": "say how the change is verified"})
            } else {
                json!({"decision": "approve"})
            }
        }
        _ => {
            let options = gate.options.as_deref().unwrap_or_default();
            let pick = options
                .iter()
                .find(|o| o.description.as_deref() == Some("recommended"))
                .or(options.first())
                .map(|o| o.label.clone());
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
    gjc.next_frame(WAIT)?; // ready
    let declaration = json!({"actor": "ci/release-bot",
        "budget": {"max_tokens": 200000, "max_tool_calls": 50, "max_wall_time_ms": 60000, "max_cost_usd": 1},
        "scopes": ["prompt", "control", "message:read", "bash"],
        "action_allowlist": ["command.prompt", "command.control", "command.message_read", "bash.readonly", "file.write"]});
    let negotiate = NegotiateUnattendedParams {
        declaration: Some(declaration),
    };
    let accepted = gjc.call(Command::NegotiateUnattended(negotiate), WAIT)?;
    println!("negotiated: {}", accepted.data_as::<Value>()?);
    gjc.prompt("/ralplan bump VERSION to 2", WAIT)?;
    // Every gate is answered by the policy; the run is told tool by tool until it ends.
    let mut handlers = Handlers::new().gate(|gate| {
        let answer = policy(gate);
        println!(
            "gate {} ({} {}): answered {answer}",
            gate.gate_id, gate.stage, gate.kind
        );
        answer
    });
    gjc.serve(&mut handlers, WAIT, |frame| match frame {
        Frame::Response(r) if r.command == "workflow_gate_response" => {
            let status = r.data_as::<Value>().map(|d| d["status"].clone());
            println!("  -> {}", status.unwrap_or_default());
            false
        }
        _ => match frame.event() {
            Some(Event::ToolExecutionEnd {
                tool_name,
                result,
                is_error,
                ..
            }) => {
                let text = joined_text(&result.content);
                let first = text.lines().next().unwrap_or("");
                let how = if *is_error { "error" } else { "ok" };
                println!("tool {tool_name} ({how}): {first}");
                false
            }
            Some(Event::AgentEnd { outcome, .. }) => {
                println!("run ended: outcome {outcome:?}");
                true
            }
            _ => false,
        },
    })?;
    let state = gjc.call(Command::GetState(Default::default()), WAIT)?;
    println!(
        "budget used: {}",
        state.data_as::<Value>()?["unattended"]["used"]
    );
    println!(
        "VERSION: {:?}",
        std::fs::read_to_string(project.path().join("VERSION")).ok()
    );
    gjc.close_stdin();
    gjc.wait_exit(Duration::from_secs(5));
    Ok(())
}
