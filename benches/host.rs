//! Host tool round trip over 1,000 calls: from sending `host_tool_result` to receiving the next
//! `host_tool_call` (the result reaches the agent, the next model request is made, its tool call
//! reaches the host), median and p99, beside a bare pipe echo (`cat`) in the same run.
//!
//! Run: `cargo bench --bench host`

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use gjc::client::RpcClient;
use gjc::protocol::command::{Command as GjcCommand, HostToolDefinition, SetHostToolsParams};
use gjc::protocol::frame::{Event, Frame, HostToolCall};
use gjc::protocol::host_reply::{HostReply, HostToolResult};
use gjc::protocol::message::ToolOutput;
use serde_json::json;

const CALLS: usize = 1000;
const WAIT: Duration = Duration::from_secs(60);

fn pipe_echo() -> Vec<f64> {
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = cat.stdin.take().unwrap();
    let mut output = BufReader::new(cat.stdout.take().unwrap());
    let line = format!(
        "{}\n",
        json!({"type": "host_tool_result", "id": "host_1", "result": {"content": [{"type": "text", "text": "ok"}]}})
    );
    let mut buf = String::new();
    let lat = (0..CALLS)
        .map(|_| {
            let t = Instant::now();
            input.write_all(line.as_bytes()).unwrap();
            input.flush().unwrap();
            buf.clear();
            output.read_line(&mut buf).unwrap();
            ms(t.elapsed())
        })
        .collect();
    drop(input);
    let _ = cat.wait();
    lat
}

fn main() {
    let turns: Vec<_> = (0..CALLS)
        .map(|i| json!({"content": [{"type": "toolCall", "id": format!("c{i}"), "name": "echo_host", "arguments": {"message": "ping"}}]}))
        .chain([json!({"content": [{"type": "text", "text": "done"}]})])
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
    let mut c = RpcClient::builder(gjc_bin())
        .env("GJC_CODING_AGENT_DIR", dir.path())
        .args(["--no-session", "--provider", "scripted", "--script"])
        .arg(&script)
        .spawn()
        .unwrap();
    c.next_frame(WAIT).unwrap();
    let tool = HostToolDefinition {
        name: "echo_host".into(),
        label: None,
        description: "echo".into(),
        parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}}),
    };
    let tools = SetHostToolsParams { tools: vec![tool] };
    c.call(GjcCommand::SetHostTools(tools), WAIT).unwrap();
    c.prompt("go", WAIT).unwrap();
    let is_call = |f: &Frame| matches!(f, Frame::HostToolCall(_));
    let mut call = c.wait_frame(is_call, WAIT).unwrap();
    let mut lat = Vec::with_capacity(CALLS);
    for i in 0..CALLS {
        let Frame::HostToolCall(HostToolCall { id, .. }) = call else {
            unreachable!("waited for a host tool call")
        };
        let t = Instant::now();
        c.reply(&HostReply::ToolResult(HostToolResult {
            id,
            result: ToolOutput::text("pong"),
            is_error: false,
        }))
        .unwrap();
        if i + 1 == CALLS {
            c.wait_frame(|f| matches!(f.event(), Some(Event::AgentEnd { .. })), WAIT)
                .unwrap();
            break;
        }
        call = c.wait_frame(is_call, WAIT).unwrap();
        lat.push(ms(t.elapsed()));
        c.take_backlog();
    }
    let mut echo = pipe_echo();
    println!(
        "host tool round trip, {} calls: median {:.3} ms, p99 {:.3} ms",
        lat.len(),
        median(&mut lat.clone()),
        percentile(&mut lat, 0.99)
    );
    println!(
        "bare pipe echo (cat), {CALLS} lines:  median {:.3} ms, p99 {:.3} ms",
        median(&mut echo.clone()),
        percentile(&mut echo, 0.99)
    );
}
