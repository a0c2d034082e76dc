//! Google Gemini `streamGenerateContent?alt=sse`: request contents (thought signatures replayed on
//! the part they came with, same model only) and the chunk decoder (whole function calls, `thought`
//! parts, cumulative usage, `finishReason` then EOF).

use serde_json::{json, Value};

use super::builder::MessageBuilder;
use super::catalog::Model;
use super::history::{self, Layout};
use super::sse::SseEvent;
use super::wire::{self, same_model, HttpCall, StreamError, WireApi};
use super::ProviderRequest;
use crate::protocol::message::{AgentMessage, Content, StopReason};

/// Google's Generative Language API (Gemini).
pub struct Gemini;

impl WireApi for Gemini {
    fn layout(&self) -> Layout {
        Layout::Merged {
            field: "parts",
            mark_last: false,
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
        headers.push(("x-goog-api-key".into(), key.clone()));
    }
    let mut generation = json!({"maxOutputTokens": req.model.max_tokens});
    if req.model.reasoning {
        generation["thinkingConfig"] = thinking_config(&req.model.id, req.thinking);
    }
    let mut body = json!({
        "systemInstruction": {"parts": [{"text": req.system_prompt}]},
        "generationConfig": generation,
    });
    let tools = (!req.tools.is_empty()).then(|| {
        wire::tools_field(&mut body, super::catalog::Api::Google, &req.tools, |tools| {
            let decls: Vec<Value> = tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
                .collect();
            json!([{"functionDeclarations": decls}])
        })
    });
    let url = format!(
        "{}/models/{}:streamGenerateContent?alt=sse",
        req.model.base_url, req.model.id
    );
    let head = history::head(body);
    let body = history::assemble(&head, "contents", &[], &req.history(), tools.as_ref());
    HttpCall { url, headers, body }
}

fn thinking_config(model: &str, level: &str) -> Value {
    if model.starts_with("gemini-3") {
        let lvl = match level {
            "minimal" => "MINIMAL",
            "low" | "off" => "LOW",
            "medium" => "MEDIUM",
            _ => "HIGH",
        };
        return if level == "off" {
            json!({"thinkingLevel": lvl})
        } else {
            json!({"includeThoughts": true, "thinkingLevel": lvl})
        };
    }
    let pro = model.contains("pro");
    let budget = match level {
        "off" if !pro => 0,
        "off" | "minimal" => 128,
        "low" => 2048,
        "medium" => 8192,
        _ if pro => 32768,
        _ => 24576,
    };
    if budget == 0 {
        json!({"thinkingBudget": 0})
    } else {
        json!({"includeThoughts": level != "off", "thinkingBudget": budget})
    }
}

/// One message of the (replayed) history as a role and its parts; consecutive messages of one
/// role are merged when the request is assembled.
pub fn encode_message(message: &AgentMessage, model: &Model) -> (&'static str, Vec<Value>) {
    match message {
        AgentMessage::Assistant(a) => {
            let native = same_model(a, model);
            (
                "model",
                a.content
                    .iter()
                    .filter_map(|c| model_part(c, native))
                    .collect::<Vec<_>>(),
            )
        }
        AgentMessage::ToolResult(r) => {
            let key = if r.is_error { "error" } else { "output" };
            (
                "user",
                vec![
                    json!({"functionResponse": {"name": r.tool_name, "response": {key: wire::result_text(r)}}}),
                ],
            )
        }
        other => (
            "user",
            wire::user_blocks(other)
                .unwrap_or_default()
                .iter()
                .filter_map(|b| match b {
                    Content::Text { text, .. } => Some(json!({"text": text})),
                    Content::Image { data, mime_type } => {
                        Some(json!({"inlineData": {"mimeType": mime_type, "data": data}}))
                    }
                    _ => None,
                })
                .collect(),
        ),
    }
}

fn model_part(c: &Content, native: bool) -> Option<Value> {
    let with_sig = |mut part: Value, sig: &Option<String>| {
        if let Some(s) = sig.as_ref().filter(|_| native) {
            part["thoughtSignature"] = json!(s);
        }
        part
    };
    match c {
        Content::Text {
            text,
            text_signature,
        } => {
            if text.is_empty() && !(native && text_signature.is_some()) {
                return None;
            }
            Some(with_sig(json!({"text": text}), text_signature))
        }
        Content::Thinking {
            thinking,
            thinking_signature,
            ..
        } if native => Some(with_sig(
            json!({"text": thinking, "thought": true}),
            thinking_signature,
        )),
        Content::Thinking { thinking, .. } if !thinking.is_empty() => {
            Some(json!({"text": thinking}))
        }
        Content::ToolCall(call) => Some(with_sig(
            json!({"functionCall": {"name": call.name, "args": call.arguments}}),
            &call.thought_signature,
        )),
        _ => None,
    }
}

#[derive(Default)]
pub struct Decoder {
    finish: Option<String>,
    current: Option<(Kind, String)>,
    blocks: usize,
    calls: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Thought,
}

impl super::wire::Decoder for Decoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        b: &mut MessageBuilder,
    ) -> Result<Option<StopReason>, StreamError> {
        let v = wire::json(event)?;
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            let status = err.get("status").and_then(Value::as_str).unwrap_or("error");
            let transient = matches!(
                status,
                "UNAVAILABLE" | "INTERNAL" | "RESOURCE_EXHAUSTED" | "DEADLINE_EXCEEDED"
            );
            return Err(StreamError {
                message: format!("{status}: {msg}"),
                transient,
                status: None,
            });
        }
        if let Some(reason) = v["promptFeedback"]
            .get("blockReason")
            .and_then(Value::as_str)
        {
            return Err(StreamError::fatal(format!("prompt blocked: {reason}")));
        }
        if let Some(id) = v.get("responseId").and_then(Value::as_str) {
            b.message.response_id = Some(id.to_string());
        }
        if let Some(u) = v.get("usageMetadata") {
            read_usage(u, b);
        }
        let Some(candidate) = v
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(None);
        };
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            self.part(part, b);
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish = Some(reason.to_string());
        }
        Ok(None)
    }

    fn on_eof(&mut self, _b: &mut MessageBuilder) -> Result<StopReason, StreamError> {
        match self.finish.as_deref() {
            None => Err(StreamError::transient(
                "stream ended without a finishReason",
            )),
            Some("MAX_TOKENS") => Ok(StopReason::Length),
            Some("STOP") if self.calls > 0 => Ok(StopReason::ToolUse),
            Some("STOP") => Ok(StopReason::Stop),
            Some(other) => Err(StreamError::fatal(format!(
                "the model stopped with {other}"
            ))),
        }
    }
}

impl Decoder {
    fn part(&mut self, part: &Value, b: &mut MessageBuilder) {
        let signature = part
            .get("thoughtSignature")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        if let Some(call) = part.get("functionCall") {
            self.close(b);
            self.calls += 1;
            let name = call.get("name").and_then(Value::as_str).unwrap_or("");
            let id = call.get("id").and_then(Value::as_str).map(str::to_string);
            let id =
                id.unwrap_or_else(|| format!("{name}_{}_{}", crate::ids::now_ms(), self.calls));
            let key = format!("call{}", self.calls);
            b.toolcall_start(&key, &id, name);
            if let Some(Content::ToolCall(tc)) = b.block_mut(&key) {
                tc.arguments = call.get("args").cloned().unwrap_or_else(|| json!({}));
                tc.thought_signature = signature.map(str::to_string);
            }
            b.end(&key);
            return;
        }
        let Some(text) = part.get("text").and_then(Value::as_str) else {
            return;
        };
        let kind = if part.get("thought").and_then(Value::as_bool) == Some(true) {
            Kind::Thought
        } else {
            Kind::Text
        };
        if text.is_empty() && signature.is_none() {
            return;
        }
        let key = self.block_for(kind, b);
        match kind {
            Kind::Thought => b.thinking_delta(&key, text),
            Kind::Text => b.text_delta(&key, text),
        }
        if let Some(sig) = signature {
            match b.block_mut(&key) {
                Some(Content::Text { text_signature, .. }) => {
                    *text_signature = Some(sig.to_string())
                }
                Some(Content::Thinking {
                    thinking_signature, ..
                }) => *thinking_signature = Some(sig.to_string()),
                _ => {}
            }
        }
    }

    /// The open block of `kind`, starting a new one when the kind switches.
    fn block_for(&mut self, kind: Kind, b: &mut MessageBuilder) -> String {
        if let Some((k, key)) = &self.current {
            if *k == kind {
                return key.clone();
            }
        }
        self.close(b);
        self.blocks += 1;
        let key = format!("blk{}", self.blocks);
        match kind {
            Kind::Thought => b.thinking_start(&key),
            Kind::Text => b.text_start(&key),
        };
        self.current = Some((kind, key.clone()));
        key
    }

    fn close(&mut self, b: &mut MessageBuilder) {
        if let Some((_, key)) = self.current.take() {
            b.end(&key);
        }
    }
}

fn read_usage(u: &Value, b: &mut MessageBuilder) {
    let prompt = wire::u64_at(u, "promptTokenCount").unwrap_or(0);
    let cached = wire::u64_at(u, "cachedContentTokenCount").unwrap_or(0);
    let usage = &mut b.message.usage;
    usage.input = prompt.saturating_sub(cached);
    usage.cache_read = cached;
    let thoughts = wire::u64_at(u, "thoughtsTokenCount").unwrap_or(0);
    usage.output = wire::u64_at(u, "candidatesTokenCount").unwrap_or(0) + thoughts;
    usage.reasoning_tokens = (thoughts > 0).then_some(thoughts);
}
