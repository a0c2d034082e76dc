//! A host that serves its own tool: registers `lookup_ticket` with `set_host_tools`, answers each
//! `host_tool_call` (with a progress update, then the result), and prints the run.
//!
//! Runs on the scripted provider by default, so it needs no key:
//! `cargo build --release --bins --examples && target/release/examples/host_tools`

use std::time::Duration;

use gjc::client::{Handlers, RpcClient};
use gjc::protocol::command::{Command, HostToolDefinition, SetHostToolsParams};
use gjc::protocol::frame::Event;
use gjc::protocol::message::{joined_text, AgentMessage, ToolOutput};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = json!({"turns": [
        {"content": [{"type": "text", "text": "Looking the ticket up."}, {"type": "toolCall", "name": "lookup_ticket", "arguments": {"id": "GJC-42"}}]},
        {"content": [{"type": "text", "text": "GJC-42 is open and assigned to Ada."}]}
    ]});
    let agent_dir = tempfile::tempdir()?;
    let path = agent_dir.path().join("script.json");
    std::fs::write(&path, script.to_string())?;
    let mut gjc = RpcClient::builder(RpcClient::default_program())
        .env("GJC_CODING_AGENT_DIR", agent_dir.path())
        .args(["--provider", "scripted", "--script"])
        .arg(&path)
        .spawn()?;
    gjc.next_frame(WAIT)?;

    let lookup = HostToolDefinition {
        name: "lookup_ticket".into(),
        label: Some("Lookup ticket".into()),
        description: "Fetch a ticket from the issue tracker".into(),
        parameters: json!({"type": "object", "properties": {"id": {"type": "string"}},
            "required": ["id"], "additionalProperties": false}),
    };
    let registered = gjc.call(
        Command::SetHostTools(SetHostToolsParams {
            tools: vec![lookup],
        }),
        WAIT,
    )?;
    println!(
        "registered: {}",
        registered.data_as::<serde_json::Value>()?["toolNames"]
    );
    gjc.prompt("What is the state of GJC-42?", WAIT)?
        .data_as::<serde_json::Value>()?;

    let mut handlers = Handlers::new().tool("lookup_ticket", |call, progress| {
        println!("host_tool_call {} {}", call.tool_name, call.arguments);
        if let Err(e) = progress.update(ToolOutput::text("querying the tracker")) {
            return ToolOutput::error(format!("cannot report progress: {e}"));
        }
        let id = call.arguments["id"].as_str().unwrap_or("?");
        ToolOutput::text(format!("{id} open, assignee Ada"))
    });
    gjc.serve(&mut handlers, WAIT, |frame| {
        match frame.event() {
            Some(Event::ToolExecutionUpdate { partial_result, .. }) => {
                println!("  update: {}", joined_text(&partial_result.content))
            }
            Some(Event::ToolExecutionEnd { result, .. }) => {
                println!("  result: {}", joined_text(&result.content))
            }
            Some(Event::MessageEnd {
                message: AgentMessage::Assistant(m),
            }) => println!("assistant: {}", m.text()),
            Some(Event::AgentEnd { .. }) => return true,
            _ => {}
        }
        false
    })?;
    gjc.close_stdin();
    gjc.wait_exit(Duration::from_secs(5))
        .ok_or("gjc did not exit")?;
    Ok(())
}
