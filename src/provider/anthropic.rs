//! Anthropic Messages: request body (system and tools cached, thinking budgets, signed thinking
//! replayed byte-exact) and the stream decoder (`message_start` ... `message_stop`).

use serde_json::{json, Value};

use super::builder::MessageBuilder;
use super::catalog::Model;
use super::history::{self, Layout};
use super::sse::SseEvent;
use super::wire::{self, same_model, HttpCall, StreamError, WireApi};
use super::ProviderRequest;
use crate::protocol::message::{AgentMessage, Content, StopReason};

/// The Anthropic Messages API.
pub struct Anthropic;

impl WireApi for Anthropic {
    fn layout(&self) -> Layout {
        Layout::Merged {
            field: "content",
            mark_last: true,
        }
    }

    fn encode_message(&self, message: &AgentMessage, model: &Model) -> (&'static str, Vec<Value>) {
        encode_message(message, model)
    }

    fn request(&self, request: &ProviderRequest) -> HttpCall {
        self::request(request)
    }

    fn decoder(&self) -> Box<dyn wire::Decoder> {
        Box::new(Decoder::default())
    }
}

pub fn request(req: &ProviderRequest) -> HttpCall {
    let mut headers: Vec<(String, String)> = req
        .model
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(key) = &req.api_key {
        headers.push(("x-api-key".into(), key.clone()));
    }
    headers.push(("anthropic-version".into(), "2023-06-01".into()));
    headers.push(("accept".into(), "text/event-stream".into()));
    let mut body = json!({
        "model": req.model.id,
        "max_tokens": req.model.max_tokens,
        "stream": true,
        "system": [{"type": "text", "text": req.system_prompt, "cache_control": {"type": "ephemeral"}}],
    });
    let tools = (!req.tools.is_empty()).then(|| {
        wire::tools_field(&mut body, super::catalog::Api::AnthropicMessages, &req.tools, |tools| {
            let mut tools: Vec<Value> = tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = json!({"type": "ephemeral"});
            }
            Value::Array(tools)
        })
    });
    if let Some(budget) = budget(req.thinking) {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget.min(req.model.max_tokens.saturating_sub(1024).max(1024))});
    }
    let head = history::head(body);
    HttpCall {
        url: format!("{}/messages", req.model.base_url),
        headers,
        body: history::assemble(&head, "messages", &[], &req.history(), tools.as_ref()),
    }
}

fn budget(level: &str) -> Option<u64> {
    match level {
        "minimal" => Some(1024),
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" | "xhigh" => Some(16384),
        _ => None,
    }
}

/// One message of the (replayed) history as a role and its content blocks. Consecutive
/// messages of one role are merged when the request is assembled (tool results of one turn
/// share a user message), and the last block carries the cache breakpoint.
pub fn encode_message(message: &AgentMessage, model: &Model) -> (&'static str, Vec<Value>) {
    match message {
        AgentMessage::Assistant(a) => {
            let native = same_model(a, model);
            let blocks = a
                .content
                .iter()
                .filter_map(|c| assistant_block(c, native))
                .collect();
            ("assistant", blocks)
        }
        AgentMessage::ToolResult(r) => {
            let content: Vec<Value> = r.content.iter().filter_map(user_block).collect();
            let content = if content.is_empty() {
                vec![json!({"type":"text","text":"(no output)"})]
            } else {
                content
            };
            (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": tool_id(&r.tool_call_id), "content": content, "is_error": r.is_error}),
                ],
            )
        }
        other => (
            "user",
            wire::user_blocks(other)
                .unwrap_or_default()
                .iter()
                .filter_map(user_block)
                .collect(),
        ),
    }
}

fn user_block(c: &Content) -> Option<Value> {
    match c {
        Content::Text { text, .. } if !text.is_empty() => {
            Some(json!({"type": "text", "text": text}))
        }
        Content::Image { data, mime_type } => Some(
            json!({"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data}}),
        ),
        _ => None,
    }
}

fn assistant_block(c: &Content, native: bool) -> Option<Value> {
    match c {
        Content::Text { text, .. } if !text.is_empty() => {
            Some(json!({"type": "text", "text": text}))
        }
        Content::Thinking {
            thinking,
            thinking_signature: Some(sig),
            ..
        } if native && !sig.is_empty() => {
            Some(json!({"type": "thinking", "thinking": thinking, "signature": sig}))
        }
        // Unsigned or foreign thinking goes back as plain text.
        Content::Thinking { thinking, .. } if !thinking.is_empty() => {
            Some(json!({"type": "text", "text": thinking}))
        }
        Content::RedactedThinking { data } if native => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        Content::ToolCall(call) => {
            let input = if call.arguments.is_object() {
                call.arguments.clone()
            } else {
                json!({})
            };
            Some(
                json!({"type": "tool_use", "id": tool_id(&call.id), "name": call.name, "input": input}),
            )
        }
        _ => None,
    }
}

/// Anthropic ids must match `^[a-zA-Z0-9_-]+$` and be at most 64 characters.
fn tool_id(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    clean.chars().take(64).collect()
}

#[derive(Default)]
pub struct Decoder {
    stop: Option<StopReason>,
}

impl super::wire::Decoder for Decoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        b: &mut MessageBuilder,
    ) -> Result<Option<StopReason>, StreamError> {
        let v = wire::json(event)?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                let msg = &v["message"];
                b.message.response_id = msg.get("id").and_then(Value::as_str).map(str::to_string);
                read_usage(&msg["usage"], b);
            }
            "content_block_start" => block_start(&v, b),
            "content_block_delta" => block_delta(&v, b),
            "content_block_stop" => b.end(&key(&v)),
            "message_delta" => {
                if let Some(reason) = v["delta"].get("stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason)?);
                }
                read_usage(&v["usage"], b);
            }
            "message_stop" => return Ok(Some(self.stop.unwrap_or(StopReason::Stop))),
            "error" => {
                let err = &v["error"];
                let kind = err.get("type").and_then(Value::as_str).unwrap_or("error");
                let msg = err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                let transient = matches!(
                    kind,
                    "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
                );
                return Err(StreamError {
                    message: format!("{kind}: {msg}"),
                    transient,
                    status: None,
                });
            }
            _ => {}
        }
        Ok(None)
    }

    fn on_eof(&mut self, _b: &mut MessageBuilder) -> Result<StopReason, StreamError> {
        Err(StreamError::transient("stream ended before message_stop"))
    }
}

fn key(v: &Value) -> String {
    format!("b{}", v.get("index").and_then(Value::as_u64).unwrap_or(0))
}

fn block_start(v: &Value, b: &mut MessageBuilder) {
    let key = key(v);
    let block = &v["content_block"];
    match block.get("type").and_then(Value::as_str) {
        Some("text") => {
            b.text_start(&key);
            if let Some(text) = block.get("text").and_then(Value::as_str) {
                b.text_delta(&key, text);
            }
        }
        Some("thinking") => {
            b.thinking_start(&key);
        }
        Some("redacted_thinking") => {
            let data = block
                .get("data")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            b.whole_block(Content::RedactedThinking { data });
        }
        Some("tool_use") => {
            let id = block.get("id").and_then(Value::as_str).unwrap_or("");
            let name = block.get("name").and_then(Value::as_str).unwrap_or("");
            b.toolcall_start(&key, id, name);
            // Some proxies send the whole input here and no deltas; it is kept unless deltas follow.
            if let (Some(Content::ToolCall(call)), Some(input)) =
                (b.block_mut(&key), block.get("input"))
            {
                if input.as_object().is_some_and(|o| !o.is_empty()) {
                    call.arguments = input.clone();
                }
            }
        }
        _ => {}
    }
}

fn block_delta(v: &Value, b: &mut MessageBuilder) {
    let key = key(v);
    let delta = &v["delta"];
    let text = |field: &str| delta.get(field).and_then(Value::as_str).unwrap_or("");
    match delta.get("type").and_then(Value::as_str) {
        Some("text_delta") => b.text_delta(&key, text("text")),
        Some("thinking_delta") => b.thinking_delta(&key, text("thinking")),
        Some("input_json_delta") => b.toolcall_delta(&key, text("partial_json")),
        Some("signature_delta") => {
            if let Some(Content::Thinking {
                thinking_signature, ..
            }) = b.block_mut(&key)
            {
                thinking_signature
                    .get_or_insert_with(String::new)
                    .push_str(text("signature"));
            }
        }
        _ => {}
    }
}

/// Usage is cumulative; only numeric fields overwrite (some proxies send nulls).
fn read_usage(u: &Value, b: &mut MessageBuilder) {
    let usage = &mut b.message.usage;
    if let Some(n) = wire::u64_at(u, "input_tokens") {
        usage.input = n;
    }
    if let Some(n) = wire::u64_at(u, "output_tokens") {
        usage.output = n;
    }
    if let Some(n) = wire::u64_at(u, "cache_read_input_tokens") {
        usage.cache_read = n;
    }
    if let Some(n) = wire::u64_at(u, "cache_creation_input_tokens") {
        usage.cache_write = n;
    }
}

fn stop_reason(reason: &str) -> Result<StopReason, StreamError> {
    match reason {
        "end_turn" | "stop_sequence" | "pause_turn" => Ok(StopReason::Stop),
        "tool_use" => Ok(StopReason::ToolUse),
        "max_tokens" | "model_context_window_exceeded" => Ok(StopReason::Length),
        other => Err(StreamError::fatal(format!(
            "the model stopped with {other}"
        ))),
    }
}
