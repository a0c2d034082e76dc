//! OpenAI Chat Completions and the compatible servers (DeepSeek, Groq, OpenRouter, xAI, Mistral,
//! Ollama, vLLM, llama.cpp, LM Studio): request body and chunk decoder, with the quirks of
//! PROVIDERS.md §2.4 (reasoning in `reasoning_content`/`reasoning`/`reasoning_text`, usage in the
//! finish chunk or a chunk without choices, `stop` on tool-call turns, no `[DONE]`).

use serde_json::{json, Value};

use super::builder::MessageBuilder;
use super::catalog::Model;
use super::compat::ChatCompat;
use super::history::{self, History, Layout};
use super::sse::SseEvent;
use super::wire::{self, same_model, HttpCall, StreamError, WireApi};
use super::ProviderRequest;
use crate::protocol::message::{AgentMessage, Content, StopReason};

/// The OpenAI Chat Completions API (and the servers compatible with it).
pub struct OpenAiChat;

impl WireApi for OpenAiChat {
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
    let is_openai = req.model.provider == "openai";
    let compat = ChatCompat::of(&req.model);
    let system_role = if compat.developer_role && req.model.reasoning {
        "developer"
    } else {
        "system"
    };
    let system = json!({"role": system_role, "content": req.system_prompt});
    let history = req.history();
    let mut body = json!({
        "model": req.model.id,
        "stream": true,
    });
    if compat.usage_in_streaming {
        body["stream_options"] = json!({"include_usage": true});
    }
    body[compat.max_tokens_field] = json!(req.model.max_tokens);
    let tools = (!req.tools.is_empty() || history.has_tool_results).then(|| {
        wire::tools_field(&mut body, super::catalog::Api::OpenAiCompletions, &req.tools, |tools| {
            tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect()
        })
    });
    if req.model.reasoning && req.thinking != "off" && compat.reasoning_effort {
        body["reasoning_effort"] = json!(if req.thinking == "xhigh" {
            "high"
        } else {
            req.thinking
        });
    }
    if compat.store {
        body["store"] = json!(false);
    }
    if is_openai {
        body["prompt_cache_key"] = json!(req.session_id);
    }
    HttpCall {
        url: format!("{}/chat/completions", req.model.base_url),
        headers: wire::bearer(req),
        body: assemble(body, &system, &history, tools.as_ref()),
    }
}

fn assemble(
    body: Value,
    system: &Value,
    history: &History,
    tools: Option<&std::sync::Arc<[u8]>>,
) -> history::Body {
    let head = history::head(body);
    history::assemble(
        &head,
        "messages",
        std::slice::from_ref(system),
        history,
        tools,
    )
}

/// One message of the (replayed) history as Chat Completions messages (none for an assistant
/// turn with neither text nor calls).
pub fn encode_message(message: &AgentMessage, model: &Model) -> (&'static str, Vec<Value>) {
    let encoded = match message {
        AgentMessage::Assistant(a) => {
            let text = a.text();
            let calls: Vec<Value> = a
                .tool_calls()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
                .collect();
            if text.is_empty() && calls.is_empty() {
                return ("assistant", Vec::new());
            }
            let mut m = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            // DeepSeek's thinking mode wants the reasoning of tool-calling turns sent back.
            if same_model(a, model) && model.reasoning && model.provider != "openai" {
                let reasoning: String = a
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        Content::Thinking { thinking, .. } => Some(thinking.as_str()),
                        _ => None,
                    })
                    .collect();
                m["reasoning_content"] = json!(reasoning);
            }
            m
        }
        AgentMessage::ToolResult(r) => {
            json!({"role": "tool", "tool_call_id": r.tool_call_id, "content": wire::result_text(r)})
        }
        other => {
            let blocks = wire::user_blocks(other).unwrap_or_default();
            json!({"role": "user", "content": user_content(&blocks)})
        }
    };
    ("", vec![encoded])
}

/// Plain text as a string (the most compatible form); with images, an array of parts.
fn user_content(blocks: &[Content]) -> Value {
    if blocks.iter().all(|b| matches!(b, Content::Text { .. })) {
        let text: Vec<&str> = blocks
            .iter()
            .filter_map(|b| match b {
                Content::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        return json!(text.join("\n"));
    }
    blocks
        .iter()
        .filter_map(|b| match b {
            Content::Text { text, .. } => Some(json!({"type": "text", "text": text})),
            Content::Image { data, mime_type } => {
                Some(json!({"type": "image_url", "image_url": {"url": format!("data:{mime_type};base64,{data}")}}))
            }
            _ => None,
        })
        .collect()
}

#[derive(Default)]
pub struct Decoder {
    finish: Option<String>,
    /// Provider tool index → our builder key, in arrival order.
    calls: Vec<String>,
    thinking_open: bool,
}

impl super::wire::Decoder for Decoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        b: &mut MessageBuilder,
    ) -> Result<Option<StopReason>, StreamError> {
        if event.data.trim() == "[DONE]" {
            return self.on_eof(b).map(Some);
        }
        let v = wire::json(event)?;
        // Usage first: a server may send it in the very chunk that reports an error.
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            read_usage(u, b);
        }
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return Err(in_stream_error(err));
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(None);
        };
        if let Some(u) = choice.get("usage").filter(|u| u.is_object()) {
            read_usage(u, b);
        }
        self.delta(&choice["delta"], b);
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_string());
        }
        Ok(None)
    }

    fn on_eof(&mut self, b: &mut MessageBuilder) -> Result<StopReason, StreamError> {
        let has_calls = !self.calls.is_empty();
        match self.finish.as_deref() {
            None => Err(StreamError::transient(
                "stream ended before a finish_reason",
            )),
            Some("length") => Ok(StopReason::Length),
            Some(_) if has_calls => Ok(StopReason::ToolUse),
            Some("stop") | Some("tool_calls") | Some("function_call") => {
                b.close_all(false);
                Ok(StopReason::Stop)
            }
            Some(other) => Err(StreamError::fatal(format!(
                "the model stopped with {other}"
            ))),
        }
    }
}

impl Decoder {
    fn delta(&mut self, delta: &Value, b: &mut MessageBuilder) {
        let reasoning = ["reasoning_content", "reasoning", "reasoning_text"]
            .iter()
            .find_map(|f| {
                delta
                    .get(*f)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            });
        if let Some(r) = reasoning {
            b.thinking_delta("think", r);
            self.thinking_open = true;
        }
        match delta.get("content") {
            Some(Value::String(text)) if !text.is_empty() => {
                self.close_thinking(b);
                b.text_delta("text", text);
            }
            // Mistral's magistral models send content as an array of typed blocks.
            Some(Value::Array(parts)) => {
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("thinking") => {
                            for t in part["thinking"].as_array().into_iter().flatten() {
                                b.thinking_delta(
                                    "think",
                                    t.get("text").and_then(Value::as_str).unwrap_or(""),
                                );
                                self.thinking_open = true;
                            }
                        }
                        Some("text") => {
                            self.close_thinking(b);
                            b.text_delta(
                                "text",
                                part.get("text").and_then(Value::as_str).unwrap_or(""),
                            );
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        for (pos, call) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            self.tool_call(call, pos, b);
        }
    }

    fn close_thinking(&mut self, b: &mut MessageBuilder) {
        if self.thinking_open {
            b.end("think");
            self.thinking_open = false;
        }
    }

    fn tool_call(&mut self, call: &Value, pos: usize, b: &mut MessageBuilder) {
        let provider_key = match (
            call.get("index").and_then(Value::as_u64),
            call.get("id").and_then(Value::as_str),
        ) {
            (Some(i), _) => format!("i{i}"),
            (None, Some(id)) if !id.is_empty() => format!("id{id}"),
            _ => format!("p{pos}"),
        };
        let key = format!("call:{provider_key}");
        let function = &call["function"];
        if b.index_of(&key).is_none() {
            self.close_thinking(b);
            b.end("text");
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            let id = id.unwrap_or_else(|| format!("call_{}", crate::ids::short_id()));
            let name = function.get("name").and_then(Value::as_str).unwrap_or("");
            b.toolcall_start(&key, &id, name);
            self.calls.push(key.clone());
        } else if let Some(Content::ToolCall(existing)) = b.block_mut(&key) {
            if existing.name.is_empty() {
                if let Some(name) = function.get("name").and_then(Value::as_str) {
                    existing.name = name.to_string();
                }
            }
        }
        match function.get("arguments") {
            Some(Value::String(s)) => b.toolcall_delta(&key, s),
            Some(obj @ Value::Object(_)) => b.toolcall_delta(&key, &obj.to_string()),
            _ => {}
        }
    }
}

/// An `error` object inside the stream: its type, its code (a string at OpenAI, a number at
/// OpenRouter) and message in the text, and its HTTP-like status (Groq's `status_code`, or a
/// numeric code in the HTTP range) as the message's status.
fn in_stream_error(err: &Value) -> StreamError {
    let msg = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("unknown error");
    let kind = err.get("type").and_then(Value::as_str).unwrap_or("error");
    let code = match err.get("code") {
        Some(Value::String(c)) if !c.is_empty() => Some(c.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let status = [err.get("status_code"), err.get("code")]
        .into_iter()
        .flatten()
        .find_map(Value::as_u64)
        .filter(|s| (100..600).contains(s))
        .map(|s| s as u16);
    let transient = kind == "server_error"
        || super::failure::is_transient_text(msg)
        || status.is_some_and(super::failure::is_transient_status);
    let message = match code.filter(|c| c != kind) {
        Some(code) => format!("{kind} ({code}): {msg}"),
        None => format!("{kind}: {msg}"),
    };
    StreamError {
        message,
        transient,
        status,
    }
}

fn read_usage(u: &Value, b: &mut MessageBuilder) {
    let prompt = wire::u64_at(u, "prompt_tokens").unwrap_or(0);
    let completion = wire::u64_at(u, "completion_tokens").unwrap_or(0);
    let details = &u["prompt_tokens_details"];
    let cached = wire::u64_at(details, "cached_tokens")
        .or_else(|| wire::u64_at(u, "prompt_cache_hit_tokens"))
        .unwrap_or(0);
    let cache_write = wire::u64_at(details, "cache_write_tokens").unwrap_or(0);
    let cache_read = cached.saturating_sub(cache_write);
    let usage = &mut b.message.usage;
    usage.cache_read = cache_read;
    usage.cache_write = cache_write;
    usage.input = prompt.saturating_sub(cache_read + cache_write);
    let reasoning = wire::u64_at(&u["completion_tokens_details"], "reasoning_tokens");
    usage.output = completion + uncounted_reasoning(u, prompt, completion, reasoning);
    usage.reasoning_tokens = reasoning;
}

/// The reasoning tokens `completion_tokens` leaves out. OpenAI counts them inside it; some
/// compatible servers (xAI) do not, and their `total_tokens` is prompt + completion + reasoning.
/// The server's own total tells the two apart.
fn uncounted_reasoning(u: &Value, prompt: u64, completion: u64, reasoning: Option<u64>) -> u64 {
    match (reasoning, wire::u64_at(u, "total_tokens")) {
        (Some(r), Some(total)) if r > 0 && total == prompt + completion + r => r,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::Decoder as _;
    use super::*;
    use crate::protocol::message::AssistantMessage;

    fn builder() -> MessageBuilder {
        MessageBuilder::new(AssistantMessage::empty("openai-completions", "p", "m"))
    }

    fn usage_of(u: Value) -> crate::protocol::message::Usage {
        let mut b = builder();
        read_usage(&u, &mut b);
        b.message.usage.finish_totals();
        b.message.usage
    }

    #[test]
    fn reasoning_tokens_are_counted_once_in_either_convention() {
        // OpenAI: completion_tokens holds the reasoning; the total says so.
        let inside = usage_of(
            json!({"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
            "completion_tokens_details": {"reasoning_tokens": 30}}),
        );
        assert_eq!((inside.output, inside.total_tokens), (50, 150));
        assert_eq!(inside.reasoning_tokens, Some(30));
        // xAI: completion_tokens leaves it out, the total adds it.
        let beside = usage_of(
            json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 150,
            "completion_tokens_details": {"reasoning_tokens": 30}}),
        );
        assert_eq!((beside.output, beside.total_tokens), (50, 150));
        assert_eq!(beside.reasoning_tokens, Some(30));
        // No total to go by: completion_tokens as given.
        let bare = usage_of(json!({"prompt_tokens": 100, "completion_tokens": 20,
            "completion_tokens_details": {"reasoning_tokens": 30}}));
        assert_eq!((bare.output, bare.total_tokens), (20, 120));
    }

    fn event(v: Value) -> SseEvent {
        SseEvent {
            event: None,
            data: v.to_string(),
        }
    }

    #[test]
    fn an_error_keeps_the_usage_code_and_status_beside_it() {
        let mut b = builder();
        let err = Decoder::default()
            .on_event(
                &event(json!({"error": {"message": "tool call validation failed", "type": "invalid_request_error",
                    "code": "tool_use_failed", "status_code": 400},
                    "usage": {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}})),
                &mut b,
            )
            .unwrap_err();
        assert_eq!(
            err.message,
            "invalid_request_error (tool_use_failed): tool call validation failed"
        );
        assert_eq!((err.status, err.transient), (Some(400), false));
        assert_eq!((b.message.usage.input, b.message.usage.output), (120, 7));
        // OpenRouter: a numeric code in the HTTP range is the status, and a retryable one.
        let err = Decoder::default()
            .on_event(
                &event(json!({"error": {"code": 502, "message": "upstream failed"}})),
                &mut builder(),
            )
            .unwrap_err();
        assert_eq!(err.message, "error (502): upstream failed");
        assert_eq!((err.status, err.transient), (Some(502), true));
    }
}
