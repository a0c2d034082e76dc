//! A host that serves its own tool: registers `lookup_ticket` with `set_host_tools`, answers each
//! `host_tool_call` (with a progress update, then the result), and prints the run.
//!
//! Runs on the scripted provider by default, so it needs no key:
//! `cargo build --release --bins --examples && target/release/examples/host_tools`

use std::time::Duration;

use gjc::client::RpcClient;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = json!({"turns": [
        {"content": [{"type": "text", "text": "Looking the ticket up."}, {"type": "toolCall", "name": "lookup_ticket", "arguments": {"id": "GJC-42"}}]},
        {"content": [{"type": "text", "text": "GJC-42 is open and assigned to Ada."}]}
    ]});
    // The script, sessions and registry go to a folder removed at exit, never to ~/.gjc.
    let agent_dir = tempfile::tempdir()?;
    let path = agent_dir.path().join("script.json");
    std::fs::write(&path, script.to_string())?;
    let mut gjc = RpcClient::builder(RpcClient::default_program())
        .env("GJC_CODING_AGENT_DIR", agent_dir.path())
        .args(["--provider", "scripted", "--script"])
        .arg(&path)
        .spawn()?;
    gjc.recv(WAIT)?;

    let tools = gjc.request(
        json!({"type": "set_host_tools", "tools": [{
            "name": "lookup_ticket", "label": "Lookup ticket", "description": "Fetch a ticket from the issue tracker",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false}
        }]}),
        WAIT,
    )?;
    println!("registered: {}", tools["data"]["toolNames"]);
    gjc.request(
        json!({"type": "prompt", "message": "What is the state of GJC-42?"}),
        WAIT,
    )?;
    loop {
        let f = gjc.recv(WAIT)?.value;
        match f["type"].as_str() {
            Some("host_tool_call") => {
                println!("host_tool_call {} {}", f["toolName"], f["arguments"]);
                let id = f["id"].clone();
                gjc.send(&json!({"type": "host_tool_update", "id": id, "partialResult": {"content": [{"type": "text", "text": "querying the tracker"}]}}))?;
                let ticket = format!(
                    "{} open, assignee Ada",
                    f["arguments"]["id"].as_str().unwrap_or("?")
                );
                gjc.send(&json!({"type": "host_tool_result", "id": id, "result": {"content": [{"type": "text", "text": ticket}]}}))?;
            }
            Some("event") => {
                let e = &f["payload"]["event"];
                match f["payload"]["event_type"].as_str() {
                    Some("tool_execution_update") => {
                        println!("  update: {}", e["partialResult"]["content"][0]["text"])
                    }
                    Some("tool_execution_end") => {
                        println!("  result: {}", e["result"]["content"][0]["text"])
                    }
                    Some("message_end") if e["message"]["role"] == "assistant" => println!(
                        "assistant: {}",
                        e["message"]["content"]
                            .as_array()
                            .map(|c| c
                                .iter()
                                .filter_map(|b| b["text"].as_str())
                                .collect::<String>())
                            .unwrap_or_default()
                    ),
                    Some("agent_end") => break,
                    _ => {}
                }
            }
            _ => {}
        }
    }
    gjc.close_stdin();
    gjc.wait_exit(Duration::from_secs(5))
        .ok_or("gjc did not exit")?;
    Ok(())
}
