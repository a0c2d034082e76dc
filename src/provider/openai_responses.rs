//! OpenAI Responses: request items (reasoning items replayed byte-exact from the stored
//! `output_item.done`, function calls as `call_id|fc_id`) and the typed event decoder.

use serde_json::{json, Value};

use super::builder::MessageBuilder;
use super::catalog::Model;
use super::history::{self, Layout};
use super::sse::SseEvent;
use super::wire::{self, same_model, HttpCall, StreamError, WireApi};
use super::ProviderRequest;
use crate::protocol::message::{AgentMessage, Content, StopReason};

/// The OpenAI Responses API.
pub struct OpenAiResponses;

impl WireApi for OpenAiResponses {
    fn layout(&self) -> Layout {
        Layout::Flat
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
    let mut body = json!({
        "model": req.model.id,
        "stream": true,
        "store": false,
        "instructions": req.system_prompt,
        "max_output_tokens": req.model.max_tokens,
        "prompt_cache_key": req.session_id,
    });
    let tools = (!req.tools.is_empty()).then(|| {
        wire::tools_field(&mut body, super::catalog::Api::OpenAiResponses, &req.tools, |tools| {
            tools
                .iter()
                .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": false}))
                .collect()
        })
    });
    if req.model.reasoning {
        if req.thinking == "off" {
            body["reasoning"] = json!({"effort": "minimal"});
        } else {
            body["reasoning"] = json!({"effort": if req.thinking == "xhigh" { "high" } else { req.thinking }, "summary": "auto"});
        }
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    let head = history::head(body);
    HttpCall {
        url: format!("{}/responses", req.model.base_url),
        headers: wire::bearer(req),
        body: history::assemble(&head, "input", &[], &req.history(), tools.as_ref()),
    }
}

/// One message of the (replayed) history as Responses input items.
pub fn encode_message(message: &AgentMessage, model: &Model) -> (&'static str, Vec<Value>) {
    let items = match message {
        AgentMessage::Assistant(a) => {
            let native = same_model(a, model);
            a.content
                .iter()
                .filter_map(|c| assistant_item(c, native))
                .collect()
        }
        AgentMessage::ToolResult(r) => {
            let call_id = r.tool_call_id.split('|').next().unwrap_or(&r.tool_call_id);
            vec![
                json!({"type": "function_call_output", "call_id": call_id, "output": wire::result_text(r)}),
            ]
        }
        other => {
            let content: Vec<Value> = wire::user_blocks(other)
                .unwrap_or_default()
                .iter()
                .filter_map(|b| match b {
                    Content::Text { text, .. } => Some(json!({"type": "input_text", "text": text})),
                    Content::Image { data, mime_type } => {
                        Some(json!({"type": "input_image", "image_url": format!("data:{mime_type};base64,{data}"), "detail": "auto"}))
                    }
                    _ => None,
                })
                .collect();
            vec![json!({"role": "user", "content": content})]
        }
    };
    ("", items)
}

fn assistant_item(c: &Content, native: bool) -> Option<Value> {
    match c {
        // The signature holds the whole reasoning item as the server sent it.
        Content::Thinking {
            thinking_signature: Some(sig),
            ..
        } if native => serde_json::from_str(sig).ok(),
        Content::Thinking { .. } => None,
        Content::Text {
            text,
            text_signature,
        } if !text.is_empty() => {
            let mut item = json!({"type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]});
            if let Some(id) = text_signature
                .as_deref()
                .filter(|id| native && id.starts_with("msg_"))
            {
                item["id"] = json!(id);
            }
            Some(item)
        }
        Content::ToolCall(call) => {
            let mut parts = call.id.splitn(2, '|');
            let call_id = parts.next().unwrap_or(&call.id);
            let mut item = json!({"type": "function_call", "call_id": call_id, "name": call.name, "arguments": call.arguments.to_string()});
            if let Some(fc) = parts.next().filter(|_| native) {
                item["id"] = json!(fc);
            }
            Some(item)
        }
        _ => None,
    }
}

#[derive(Default)]
pub struct Decoder {
    has_calls: bool,
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
        let item_key = v
            .get("item_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let delta = v.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.created" => {
                b.message.response_id = v["response"]
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            "response.output_item.added" => self.item_added(&v["item"], b),
            "response.reasoning_summary_part.added"
                if v.get("summary_index").and_then(Value::as_u64).unwrap_or(0) > 0 =>
            {
                b.thinking_delta(&item_key, "\n\n");
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                b.thinking_delta(&item_key, delta)
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                b.text_delta(&item_key, delta)
            }
            "response.function_call_arguments.delta" => b.toolcall_delta(&item_key, delta),
            "response.function_call_arguments.done" => {
                if let (Some(Content::ToolCall(call)), Some(args)) = (
                    b.block_mut(&item_key),
                    v.get("arguments").and_then(Value::as_str),
                ) {
                    call.partial_json = Some(args.to_string());
                }
            }
            "response.output_item.done" => item_done(&v["item"], b),
            "response.completed" | "response.incomplete" => {
                read_usage(&v["response"]["usage"], b);
                let stop = match (kind, self.has_calls) {
                    ("response.incomplete", _) => StopReason::Length,
                    (_, true) => StopReason::ToolUse,
                    _ => StopReason::Stop,
                };
                return Ok(Some(stop));
            }
            "response.failed" => {
                let err = &v["response"]["error"];
                let code = err.get("code").and_then(Value::as_str).unwrap_or("failed");
                let msg = err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("response failed");
                return Err(StreamError {
                    message: format!("{code}: {msg}"),
                    transient: matches!(code, "server_error" | "rate_limit_exceeded"),
                    status: None,
                });
            }
            "error" => {
                let code = v.get("code").and_then(Value::as_str).unwrap_or("error");
                let msg = v
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                return Err(StreamError {
                    message: format!("{code}: {msg}"),
                    transient: matches!(code, "server_error" | "rate_limit_exceeded"),
                    status: None,
                });
            }
            _ => {}
        }
        Ok(None)
    }

    fn on_eof(&mut self, _b: &mut MessageBuilder) -> Result<StopReason, StreamError> {
        Err(StreamError::transient(
            "stream ended before response.completed",
        ))
    }
}

impl Decoder {
    fn item_added(&mut self, item: &Value, b: &mut MessageBuilder) {
        let id = item.get("id").and_then(Value::as_str).unwrap_or("");
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => {
                b.thinking_start(id);
            }
            Some("message") => {
                b.text_start(id);
            }
            Some("function_call") => {
                self.has_calls = true;
                let call_id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                b.toolcall_start(id, &format!("{call_id}|{id}"), name);
            }
            _ => {}
        }
    }
}

/// The `done` item is authoritative: the final reasoning item (kept whole for replay), the message
/// id, the complete arguments.
fn item_done(item: &Value, b: &mut MessageBuilder) {
    let id = item
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match item.get("type").and_then(Value::as_str) {
        Some("reasoning") => {
            let summary: Vec<&str> = item["summary"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.get("text").and_then(Value::as_str))
                .collect();
            if let Some(Content::Thinking {
                thinking,
                thinking_signature,
                item_id,
            }) = b.block_mut(&id)
            {
                if !summary.is_empty() {
                    *thinking = summary.join("\n\n");
                }
                *thinking_signature = Some(item.to_string());
                *item_id = Some(id.clone());
            }
        }
        Some("message") => {
            if let Some(Content::Text { text_signature, .. }) = b.block_mut(&id) {
                *text_signature = Some(id.clone());
            }
        }
        Some("function_call") => {
            if let (Some(Content::ToolCall(call)), Some(args)) = (
                b.block_mut(&id),
                item.get("arguments").and_then(Value::as_str),
            ) {
                call.partial_json = Some(args.to_string());
            }
        }
        _ => {}
    }
    b.end(&id);
}

fn read_usage(u: &Value, b: &mut MessageBuilder) {
    let input = wire::u64_at(u, "input_tokens").unwrap_or(0);
    let cached = wire::u64_at(&u["input_tokens_details"], "cached_tokens").unwrap_or(0);
    let usage = &mut b.message.usage;
    usage.cache_read = cached;
    usage.input = input.saturating_sub(cached);
    usage.output = wire::u64_at(u, "output_tokens").unwrap_or(0);
    usage.reasoning_tokens = wire::u64_at(&u["output_tokens_details"], "reasoning_tokens");
}
