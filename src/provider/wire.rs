//! What each wire API module provides: the HTTP request for a completion, and a decoder that maps
//! its SSE events onto the `MessageBuilder`.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::builder::MessageBuilder;
use super::catalog::Api;
use super::catalog::Model;
use super::history::Layout;
use super::sse::SseEvent;
use super::{ProviderRequest, ToolSpec};
use crate::protocol::message::StopReason;

pub struct HttpCall {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: super::history::Body,
}

/// A stream-level failure after HTTP 200 (an `error` event, a truncated stream).
#[derive(Debug)]
pub struct StreamError {
    pub message: String,
    pub transient: bool,
    /// The HTTP-like status the provider gave the error inside the stream, when it gave one.
    pub status: Option<u16>,
}

impl StreamError {
    pub fn transient(message: impl Into<String>) -> StreamError {
        StreamError {
            message: message.into(),
            transient: true,
            status: None,
        }
    }

    pub fn fatal(message: impl Into<String>) -> StreamError {
        StreamError {
            message: message.into(),
            transient: false,
            status: None,
        }
    }
}

pub trait Decoder: Send {
    /// Handles one event. `Some(stop)` once the stream's terminal event has been seen.
    fn on_event(
        &mut self,
        event: &SseEvent,
        b: &mut MessageBuilder,
    ) -> Result<Option<StopReason>, StreamError>;

    /// Called at EOF when no terminal event was seen; some servers end without one.
    fn on_eof(&mut self, b: &mut MessageBuilder) -> Result<StopReason, StreamError>;
}

/// One wire API (Anthropic Messages, Chat Completions, Responses, Gemini): how it lays out and
/// encodes the history, the HTTP request for a completion, and the decoder of its event stream.
/// Each API module implements it on a unit type; [`Api::wire`] finds the one a model speaks.
pub trait WireApi: Sync {
    /// How the encoded messages are laid out in the request's history array.
    fn layout(&self) -> Layout;

    /// A message (already replayed) as the API's role and array items.
    fn encode_message(&self, message: &AgentMessage, model: &Model) -> (&'static str, Vec<Value>);

    /// The HTTP request for a streamed completion.
    fn request(&self, request: &ProviderRequest) -> HttpCall;

    /// A decoder for one response's event stream.
    fn decoder(&self) -> Box<dyn Decoder>;
}

impl Api {
    /// The wire API models of this kind speak; `None` for the scripted provider, which replays a
    /// script instead of calling a server (and so is given an empty encoded history).
    pub fn wire(self) -> Option<&'static dyn WireApi> {
        match self {
            Api::AnthropicMessages => Some(&super::anthropic::Anthropic),
            Api::OpenAiCompletions => Some(&super::openai_chat::OpenAiChat),
            Api::OpenAiResponses => Some(&super::openai_responses::OpenAiResponses),
            Api::Google => Some(&super::gemini::Gemini),
            Api::Scripted => None,
        }
    }
}

/// Gives `body` its `tools` field, whose value is only a placeholder: the bytes written in its
/// place are the returned encoding (`history::assemble`), shared by every request of the tool set.
pub fn tools_field(
    body: &mut Value,
    api: Api,
    tools: &Arc<[ToolSpec]>,
    encode: impl FnOnce(&[ToolSpec]) -> Value,
) -> Arc<[u8]> {
    body["tools"] = Value::Null;
    encoded_tools(api, tools, encode)
}

/// A request's `tools` value as `encode` writes it for `api`, encoded once per tool set: every
/// request sends it, and re-encoding the schemas each turn cost more than a short turn's new
/// messages. The tool set is recognised by its `Arc` (the registry shares one until the set
/// changes); the cache holds that `Arc`, so a new set can never pass for the old one.
fn encoded_tools(
    api: Api,
    tools: &Arc<[ToolSpec]>,
    encode: impl FnOnce(&[ToolSpec]) -> Value,
) -> Arc<[u8]> {
    type Entry = (Api, Arc<[ToolSpec]>, Arc<[u8]>);
    static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, bytes)) = cache
        .iter()
        .find(|(a, t, _)| *a == api && Arc::ptr_eq(t, tools))
    {
        return bytes.clone();
    }
    // Serializing a `Value` cannot fail.
    let bytes: Arc<[u8]> = serde_json::to_vec(&encode(tools))
        .unwrap_or_default()
        .into();
    cache.retain(|(a, _, _)| *a != api);
    cache.push((api, tools.clone(), bytes.clone()));
    bytes
}

/// Parses a JSON `data:` payload; servers pad it with spaces, which serde accepts.
pub fn json(event: &SseEvent) -> Result<Value, StreamError> {
    serde_json::from_str(&event.data).map_err(|e| {
        StreamError::fatal(format!(
            "malformed stream event: {e}: {}",
            clip(&event.data, 200)
        ))
    })
}

pub fn clip(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A number field as u64 (absent, null or negative → None).
pub fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

use super::history::Replay;
use crate::protocol::message::{AgentMessage, AssistantMessage, Content, ToolResultMessage};

/// The history as every provider may see it (see [`Replay`]), all at once.
pub fn replay_history(messages: &[AgentMessage]) -> Vec<AgentMessage> {
    let mut replay = Replay::default();
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        replay.feed(message, &mut out);
    }
    let mut out: Vec<AgentMessage> = out.into_iter().map(std::borrow::Cow::into_owned).collect();
    out.extend(replay.closing());
    out
}

/// Whether an assistant message came from the model being called now (signatures and reasoning
/// items are only valid there).
pub fn same_model(message: &AssistantMessage, model: &super::catalog::Model) -> bool {
    message.provider == model.provider
        && message.model == model.id
        && message.api == model.api.as_str()
}

/// The text a model sees for a tool result (text blocks joined).
pub fn result_text(result: &ToolResultMessage) -> String {
    let has_text = result
        .content
        .iter()
        .any(|c| matches!(c, Content::Text { .. }));
    if has_text {
        text_blocks(&result.content)
    } else {
        "(no output)".to_string()
    }
}

/// The text blocks of `content`, joined by newlines; images and the rest left out.
pub fn text_blocks(content: &[Content]) -> String {
    let text: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    text.join("\n")
}

/// User-side text of non-LLM roles (user bash executions).
pub fn user_blocks(message: &AgentMessage) -> Option<Vec<Content>> {
    match message {
        AgentMessage::User(u) => Some(u.content.clone()),
        AgentMessage::BashExecution(b) => Some(vec![Content::text(b.as_prompt_text())]),
        AgentMessage::CompactionSummary(c) => Some(vec![Content::text(format!(
            "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{}\n</summary>",
            c.summary
        ))]),
        _ => None,
    }
}

/// Bearer authorization when a key is set (local servers may need none).
pub fn bearer(request: &ProviderRequest) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = request
        .model
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(key) = &request.api_key {
        headers.push(("authorization".into(), format!("Bearer {key}")));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::{ToolCall, UserMessage};

    fn assistant(stop: StopReason, calls: &[&str]) -> AgentMessage {
        let mut m = AssistantMessage::empty("a", "p", "m");
        m.stop_reason = stop;
        for id in calls {
            m.content.push(Content::ToolCall(ToolCall {
                id: id.to_string(),
                name: "read".into(),
                arguments: serde_json::json!({}),
                thought_signature: None,
                incomplete_arguments: false,
                partial_json: None,
            }));
        }
        AgentMessage::Assistant(m)
    }

    #[test]
    fn drops_failed_turns_and_fills_missing_results() {
        let history = vec![
            AgentMessage::User(UserMessage::new("hi", &[])),
            assistant(StopReason::Error, &[]),
            assistant(StopReason::ToolUse, &["c1", "c2"]),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "c1".into(),
                tool_name: "read".into(),
                content: vec![Content::text("ok")],
                details: None,
                is_error: false,
                timestamp: 0,
            }),
            AgentMessage::User(UserMessage::new("next", &[])),
        ];
        let out = replay_history(&history);
        assert_eq!(out.len(), 5);
        match &out[3] {
            AgentMessage::ToolResult(r) => {
                assert_eq!((r.tool_call_id.as_str(), r.is_error), ("c2", true))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tools_are_encoded_once_per_tool_set_and_again_for_a_new_one() {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let names = |tools: &[ToolSpec]| Value::from_iter(tools.iter().map(|t| t.name.clone()));
        let first: Arc<[ToolSpec]> = vec![spec("read")].into();
        // The scripted API (no HTTP) keeps other tests, which share the cache, out of the way.
        let a = encoded_tools(Api::Scripted, &first, names);
        let again = encoded_tools(Api::Scripted, &first, |_| panic!("encoded twice"));
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(&*a, br#"["read"]"#);
        // A set with the same contents is still a new set: encoded anew.
        let second: Arc<[ToolSpec]> = vec![spec("read"), spec("bash")].into();
        assert_eq!(
            &*encoded_tools(Api::Scripted, &second, names),
            br#"["read","bash"]"#
        );
        // Another API has its own encoding of the same set.
        let other = encoded_tools(Api::AnthropicMessages, &second, |_| Value::Null);
        assert_eq!(&*other, b"null");
    }
}
