//! The message model: content blocks, agent messages, usage and the streaming deltas that build an
//! assistant message. Shapes follow the wire (`MESSAGES.md`): camelCase, absent optionals omitted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod stream;
pub use stream::StreamEvent;

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Content {
    Text {
        text: String,
        #[serde(
            rename = "textSignature",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        text_signature: Option<String>,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Thinking {
        thinking: String,
        #[serde(
            rename = "thinkingSignature",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        thinking_signature: Option<String>,
        #[serde(rename = "itemId", default, skip_serializing_if = "Option::is_none")]
        item_id: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    ToolCall(ToolCall),
}

/// `Content`'s variants for [`super::tagged`], which reads `type` without buffering.
#[derive(Deserialize)]
#[serde(remote = "Content", rename_all = "camelCase")]
enum ContentByType {
    Text {
        text: String,
        #[serde(rename = "textSignature", default)]
        text_signature: Option<String>,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Thinking {
        thinking: String,
        #[serde(rename = "thinkingSignature", default)]
        thinking_signature: Option<String>,
        #[serde(rename = "itemId", default)]
        item_id: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    ToolCall(ToolCall),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(transparent)]
        struct ByType(#[serde(with = "ContentByType")] Content);
        super::tagged::deserialize(d, "type", "a content block with a type").map(|c: ByType| c.0)
    }
}

impl Content {
    pub fn text(text: impl Into<String>) -> Content {
        Content::Text {
            text: text.into(),
            text_signature: None,
        }
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// Set when the provider cut the argument JSON short; such a call is never executed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incomplete_arguments: bool,
    /// The raw argument text while streaming; removed when the call closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_json: Option<String>,
}

/// Token counts and their price in USD.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    pub cost: Cost,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
}

impl Usage {
    /// Recomputes the total from the four buckets.
    pub fn finish_totals(&mut self) {
        self.total_tokens = self.input + self.output + self.cache_read + self.cache_write;
    }

    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total_tokens += other.total_tokens;
        self.cost.input += other.cost.input;
        self.cost.output += other.cost.output;
        self.cost.cache_read += other.cost.cache_read;
        self.cost.cache_write += other.cost.cache_write;
        self.cost.total += other.cost.total;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

/// An assistant message, complete or in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    pub content: Vec<Content>,
    pub api: String,
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_status: Option<u16>,
    pub timestamp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<u64>,
}

impl AssistantMessage {
    pub fn empty(api: &str, provider: &str, model: &str) -> AssistantMessage {
        AssistantMessage {
            content: Vec::new(),
            api: api.to_string(),
            provider: provider.to_string(),
            model: model.to_string(),
            response_id: None,
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            error_status: None,
            timestamp: crate::ids::now_ms(),
            duration: None,
            ttft: None,
        }
    }

    /// Applies one streaming delta. The provider worker and the session both keep a copy of the
    /// message in progress, and both build it through this one function.
    pub fn apply(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::TextStart { .. } => self.content.push(Content::text("")),
            StreamEvent::ThinkingStart { .. } => self.content.push(Content::Thinking {
                thinking: String::new(),
                thinking_signature: None,
                item_id: None,
            }),
            StreamEvent::ToolcallStart { id, name, .. } => {
                self.content.push(Content::ToolCall(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Default::default()),
                    thought_signature: None,
                    incomplete_arguments: false,
                    partial_json: Some(String::new()),
                }))
            }
            StreamEvent::TextDelta {
                content_index,
                delta,
            } => {
                if let Some(Content::Text { text, .. }) = self.content.get_mut(*content_index) {
                    text.push_str(delta);
                }
            }
            StreamEvent::ThinkingDelta {
                content_index,
                delta,
            } => {
                if let Some(Content::Thinking { thinking, .. }) =
                    self.content.get_mut(*content_index)
                {
                    thinking.push_str(delta);
                }
            }
            StreamEvent::ToolcallDelta {
                content_index,
                delta,
            } => {
                if let Some(Content::ToolCall(call)) = self.content.get_mut(*content_index) {
                    call.partial_json
                        .get_or_insert_with(String::new)
                        .push_str(delta);
                }
            }
            StreamEvent::TextEnd {
                content_index,
                block,
            }
            | StreamEvent::ThinkingEnd {
                content_index,
                block,
            } => {
                if let Some(slot) = self.content.get_mut(*content_index) {
                    *slot = block.clone();
                }
            }
            StreamEvent::ToolcallEnd {
                content_index,
                tool_call,
            } => {
                if let Some(slot) = self.content.get_mut(*content_index) {
                    *slot = Content::ToolCall(tool_call.clone());
                }
            }
            StreamEvent::Block { block } => self.content.push(block.clone()),
        }
    }

    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|c| match c {
            Content::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        joined_text(&self.content)
    }
}

/// The text blocks of `content`, concatenated.
pub fn joined_text(content: &[Content]) -> String {
    let mut out = String::new();
    for c in content {
        if let Content::Text { text, .. } = c {
            out.push_str(text);
        }
    }
    out
}

/// An assistant message serialized with its `role`, without taking it.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum MessageRef<'a> {
    Assistant(&'a AssistantMessage),
}

/// A message in the agent's context.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum AgentMessage {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
    BashExecution(BashExecutionMessage),
    /// The summary that replaces compacted history (read from session files).
    CompactionSummary(CompactionSummaryMessage),
}

/// `AgentMessage`'s variants for [`super::tagged`], which reads `role` without buffering.
#[derive(Deserialize)]
#[serde(remote = "AgentMessage", rename_all = "camelCase")]
enum AgentMessageByRole {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
    BashExecution(BashExecutionMessage),
    CompactionSummary(CompactionSummaryMessage),
}

impl<'de> Deserialize<'de> for AgentMessage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(transparent)]
        struct ByRole(#[serde(with = "AgentMessageByRole")] AgentMessage);
        super::tagged::deserialize(d, "role", "a message with a role").map(|m: ByRole| m.0)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage {
    pub summary: String,
    #[serde(default)]
    pub tokens_before: u64,
    #[serde(default)]
    pub timestamp: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<String>,
    pub timestamp: u64,
}

impl UserMessage {
    pub fn new(text: &str, images: &[ImageContent]) -> UserMessage {
        let mut content = vec![Content::text(text)];
        content.extend(images.iter().map(|i| Content::Image {
            data: i.data.clone(),
            mime_type: i.mime_type.clone(),
        }));
        UserMessage {
            content,
            attribution: Some("user".into()),
            timestamp: crate::ids::now_ms(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub is_error: bool,
    pub timestamp: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BashExecutionMessage {
    pub command: String,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    pub timestamp: u64,
}

impl BashExecutionMessage {
    /// The text the model sees for a user-run command.
    pub fn as_prompt_text(&self) -> String {
        let output = if self.output.is_empty() {
            "(no output)"
        } else {
            self.output.as_str()
        };
        let mut text = format!("Ran `{}`\n```\n{}\n```", self.command, output.trim_end());
        if self.cancelled {
            text.push_str("\n\n(command cancelled)");
        } else if let Some(code) = self.exit_code.filter(|c| *c != 0) {
            text.push_str(&format!("\n\nCommand exited with code {code}"));
        }
        if self.truncated {
            if let Some(path) = &self.full_output_path {
                text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
            }
        }
        text
    }
}

/// Image input as hosts send it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    #[serde(rename = "type", default = "image_type")]
    pub kind: String,
    pub data: String,
    pub mime_type: String,
}

fn image_type() -> String {
    "image".into()
}

/// A tool's result: what tools and host tools return.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: vec![Content::text(text)],
            details: None,
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: vec![Content::text(text)],
            details: None,
            is_error: true,
        }
    }

    pub fn with_details(mut self, details: Value) -> ToolOutput {
        self.details = Some(details);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_builds_text_and_tool_calls() {
        let mut m = AssistantMessage::empty("x", "p", "m");
        m.apply(&StreamEvent::TextStart { content_index: 0 });
        m.apply(&StreamEvent::TextDelta {
            content_index: 0,
            delta: "he".into(),
        });
        m.apply(&StreamEvent::TextDelta {
            content_index: 0,
            delta: "llo".into(),
        });
        m.apply(&StreamEvent::ToolcallStart {
            content_index: 1,
            id: "c1".into(),
            name: "read".into(),
        });
        m.apply(&StreamEvent::ToolcallDelta {
            content_index: 1,
            delta: "{\"a\"".into(),
        });
        assert_eq!(m.text(), "hello");
        let call = m.tool_calls().next().unwrap();
        assert_eq!(call.partial_json.as_deref(), Some("{\"a\""));
    }

    #[test]
    fn bash_execution_prompt_text() {
        let m = BashExecutionMessage {
            command: "ls".into(),
            output: "a\n".into(),
            exit_code: Some(2),
            cancelled: false,
            truncated: false,
            full_output_path: None,
            timestamp: 0,
        };
        assert_eq!(
            m.as_prompt_text(),
            "Ran `ls`\n```\na\n```\n\nCommand exited with code 2"
        );
    }
}
