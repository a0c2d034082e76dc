//! An MCP server's tool as one of the session's tools: `mcp__<server>__<tool>` with the server's
//! input schema (the registry validates arguments against it like any tool's). A call sends
//! `tools/call` with the call id as progress token; progress becomes `tool_execution_update`s;
//! abort sends `notifications/cancelled`. The result's content maps to the tool result: text as
//! text, images as image blocks, audio, resources and links described in text, `structuredContent`
//! as JSON text and in `details`, `isError` as the result's error flag; text is capped like the
//! shell tool's output.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::client::{Failure, Progress, Reply};
use super::handshake::ToolDef;
use super::server::Server;
use crate::protocol::message::{Content, ToolOutput};
use crate::tools::{DirectStart, Tool, ToolContext};

/// The text of one result kept at most, as the shell tool's output.
pub const MAX_TEXT_BYTES: usize = 50 * 1024;
/// Images kept at most per result (base64 bytes).
const MAX_IMAGE_BYTES: usize = 8 << 20;

pub struct McpTool {
    /// The name the model calls it by.
    pub name: String,
    pub def: ToolDef,
    pub server: Arc<Server>,
}

impl McpTool {
    /// The JSON Schema the model is given: the server's, made an object schema if it is not.
    fn schema(&self) -> Value {
        match &self.def.input_schema {
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("object") => {
                self.def.input_schema.clone()
            }
            _ => json!({"type": "object"}),
        }
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        let text = self
            .def
            .description
            .clone()
            .or_else(|| self.def.title.clone())
            .unwrap_or_default();
        let mut text: String = text.chars().take(4000).collect();
        text.push_str(&format!(
            "\n(MCP tool {} of server {})",
            self.def.name, self.server.config.name
        ));
        text
    }

    fn parameters(&self) -> Value {
        self.schema()
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let client = match self.server.client_for_call() {
            Ok(client) => client,
            Err(e) => return ToolOutput::error(e),
        };
        let params = json!({"name": self.def.name, "arguments": args});
        let report = |p: Progress| ctx.update(progress_output(&p));
        let cancelled = || ctx.is_cancelled();
        let answer = client.request(
            "tools/call",
            params,
            self.server.config.tool_timeout,
            &cancelled,
            Some((&ctx.call_id, &report)),
        );
        self.outcome(answer)
    }

    fn as_direct(&self) -> Option<&dyn DirectStart> {
        Some(self)
    }
}

impl McpTool {
    /// The tool result of a call's answer, or of why it has none.
    pub(super) fn outcome(&self, answer: Reply) -> ToolOutput {
        let config = &self.server.config;
        outcome(answer, &config.name, &self.def.name, config.tool_timeout)
    }
}

/// The tool result of an answer of `server`'s `tool`, or of why it has none.
pub(super) fn outcome(answer: Reply, server: &str, tool: &str, timeout: Duration) -> ToolOutput {
    match answer {
        Ok(result) => map_result(&result),
        Err(Failure::Cancelled) => ToolOutput::error("MCP tool call was aborted"),
        Err(Failure::TimedOut) => ToolOutput::error(format!(
            "MCP server {server} did not answer {tool} within {} s; the call was cancelled",
            timeout.as_secs_f64()
        )),
        Err(e) => ToolOutput::error(format!("MCP server {server}: {tool} failed: {e}")),
    }
}

pub(super) fn progress_output(p: &Progress) -> ToolOutput {
    let mut text = match p.total {
        Some(total) => format!("progress {}/{}", p.progress, total),
        None => format!("progress {}", p.progress),
    };
    if let Some(message) = &p.message {
        text.push_str(": ");
        text.push_str(message);
    }
    ToolOutput::text(text).with_details(json!({
        "progress": p.progress, "total": p.total, "message": p.message,
    }))
}

/// A `tools/call` result as the tool result the model sees.
pub fn map_result(result: &Value) -> ToolOutput {
    let mut blocks: Vec<Content> = Vec::new();
    let mut text = Budget::default();
    let items = result.get("content").and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let str_of = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => text.push(&mut blocks, str_of("text")),
            "image" if str_of("data").len() <= MAX_IMAGE_BYTES && !str_of("data").is_empty() => {
                blocks.push(Content::Image {
                    data: str_of("data").to_string(),
                    mime_type: str_of("mimeType").to_string(),
                })
            }
            "image" => text.push(&mut blocks, "[image left out: too large or empty]"),
            "audio" => text.push(
                &mut blocks,
                &format!(
                    "[audio {} of {} base64 bytes; not shown to the model]",
                    str_of("mimeType"),
                    str_of("data").len()
                ),
            ),
            "resource_link" => text.push(
                &mut blocks,
                &format!("[resource link] {} <{}>", str_of("name"), str_of("uri")),
            ),
            "resource" => {
                let res = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = res.get("uri").and_then(Value::as_str).unwrap_or("");
                match res.get("text").and_then(Value::as_str) {
                    Some(body) => text.push(&mut blocks, &format!("[resource {uri}]\n{body}")),
                    None => text.push(&mut blocks, &format!("[binary resource {uri}]")),
                }
            }
            other => text.push(
                &mut blocks,
                &format!("[content of type {other:?} left out]"),
            ),
        }
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if let Some(structured) = structured {
        if blocks.is_empty() {
            text.push(&mut blocks, &structured.to_string());
        }
    }
    if text.cut {
        let note = format!("\n[output truncated to {} KB]", MAX_TEXT_BYTES / 1024);
        blocks.push(Content::text(note));
    }
    if blocks.is_empty() {
        blocks.push(Content::text("(no output)"));
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    ToolOutput {
        content: blocks,
        details: structured.map(|s| json!({ "structuredContent": s })),
        is_error,
    }
}

/// The text of a result so far, capped.
#[derive(Default)]
struct Budget {
    used: usize,
    cut: bool,
}

impl Budget {
    fn push(&mut self, blocks: &mut Vec<Content>, text: &str) {
        let room = MAX_TEXT_BYTES.saturating_sub(self.used);
        if room == 0 {
            self.cut = true;
            return;
        }
        let mut end = text.len().min(room);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end < text.len() {
            self.cut = true;
        }
        self.used += end;
        blocks.push(Content::text(&text[..end]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_every_content_type_and_caps_text() {
        let out = map_result(&json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///a", "name": "a"},
            {"type": "resource", "resource": {"uri": "x://b", "text": "body"}},
        ], "structuredContent": {"n": 1}, "isError": true}));
        assert!(out.is_error);
        assert!(
            matches!(&out.content[1], Content::Image { mime_type, .. } if mime_type == "image/png")
        );
        let all = crate::tools::tests::text(&out);
        assert!(
            all.contains("hi")
                && all.contains("audio/wav")
                && all.contains("file:///a")
                && all.contains("body"),
            "{all}"
        );
        assert_eq!(out.details.unwrap()["structuredContent"]["n"], 1);
        let big = map_result(&json!({"content": [{"type": "text", "text": "x".repeat(200_000)}]}));
        let text = crate::tools::tests::text(&big);
        assert!(
            text.len() < MAX_TEXT_BYTES + 100 && text.contains("truncated"),
            "{}",
            text.len()
        );
        let only = map_result(&json!({"content": [], "structuredContent": [1, 2]}));
        assert_eq!(crate::tools::tests::text(&only), "[1,2]");
    }
}
