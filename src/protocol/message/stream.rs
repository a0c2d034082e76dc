//! The streaming deltas that build an assistant message, as hosts see them.

use serde::Serialize;

use super::{Content, ToolCall};

/// One unified streaming delta (`assistantMessageEvent` inside `message_update`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum StreamEvent {
    TextStart {
        content_index: usize,
    },
    TextDelta {
        content_index: usize,
        delta: String,
    },
    TextEnd {
        content_index: usize,
        #[serde(rename = "content", serialize_with = "block_text")]
        #[schemars(with = "String")]
        block: Content,
    },
    ThinkingStart {
        content_index: usize,
    },
    ThinkingDelta {
        content_index: usize,
        delta: String,
    },
    ThinkingEnd {
        content_index: usize,
        #[serde(rename = "content", serialize_with = "block_text")]
        #[schemars(with = "String")]
        block: Content,
    },
    ToolcallStart {
        content_index: usize,
        #[serde(skip)]
        id: String,
        #[serde(skip)]
        name: String,
    },
    ToolcallDelta {
        content_index: usize,
        delta: String,
    },
    ToolcallEnd {
        content_index: usize,
        tool_call: ToolCall,
    },
    /// A whole block that arrives without deltas (redacted thinking). Never sent to hosts as an
    /// `assistantMessageEvent`; the session shows it in the next snapshot.
    #[serde(skip)]
    Block {
        block: Content,
    },
}

fn block_text<S: serde::Serializer>(block: &Content, s: S) -> Result<S::Ok, S::Error> {
    match block {
        Content::Text { text, .. } => s.serialize_str(text),
        Content::Thinking { thinking, .. } => s.serialize_str(thinking),
        _ => s.serialize_str(""),
    }
}

impl StreamEvent {
    /// Bytes of streamed text this event adds.
    pub fn delta_len(&self) -> usize {
        match self {
            StreamEvent::TextDelta { delta, .. }
            | StreamEvent::ThinkingDelta { delta, .. }
            | StreamEvent::ToolcallDelta { delta, .. } => delta.len(),
            _ => 0,
        }
    }

    /// Appends `next` to this delta when both extend the same block the same way, and says
    /// whether it did. Merged deltas build the same message as the two did.
    pub fn merge(&mut self, next: &StreamEvent) -> bool {
        use StreamEvent::*;
        match (self, next) {
            (
                TextDelta {
                    content_index: a,
                    delta,
                },
                TextDelta {
                    content_index: b,
                    delta: more,
                },
            )
            | (
                ThinkingDelta {
                    content_index: a,
                    delta,
                },
                ThinkingDelta {
                    content_index: b,
                    delta: more,
                },
            )
            | (
                ToolcallDelta {
                    content_index: a,
                    delta,
                },
                ToolcallDelta {
                    content_index: b,
                    delta: more,
                },
            ) if a == b => {
                delta.push_str(more);
                true
            }
            _ => false,
        }
    }

    pub fn content_index(&self) -> Option<usize> {
        match self {
            StreamEvent::TextStart { content_index }
            | StreamEvent::TextDelta { content_index, .. }
            | StreamEvent::TextEnd { content_index, .. }
            | StreamEvent::ThinkingStart { content_index }
            | StreamEvent::ThinkingDelta { content_index, .. }
            | StreamEvent::ThinkingEnd { content_index, .. }
            | StreamEvent::ToolcallStart { content_index, .. }
            | StreamEvent::ToolcallDelta { content_index, .. }
            | StreamEvent::ToolcallEnd { content_index, .. } => Some(*content_index),
            StreamEvent::Block { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_event_serializes_like_the_seed() {
        let ev = StreamEvent::TextDelta {
            content_index: 2,
            delta: "x".into(),
        };
        assert_eq!(
            serde_json::to_string(&ev).unwrap(),
            r#"{"type":"text_delta","contentIndex":2,"delta":"x"}"#
        );
        let end = StreamEvent::TextEnd {
            content_index: 0,
            block: Content::text("all"),
        };
        assert_eq!(
            serde_json::to_string(&end).unwrap(),
            r#"{"type":"text_end","contentIndex":0,"content":"all"}"#
        );
    }

    #[test]
    fn merged_deltas_build_the_same_message() {
        let mut d = StreamEvent::TextDelta {
            content_index: 1,
            delta: "ab".into(),
        };
        assert!(d.merge(&StreamEvent::TextDelta {
            content_index: 1,
            delta: "c".into()
        }));
        assert_eq!(d.delta_len(), 3);
        let other = StreamEvent::TextDelta {
            content_index: 2,
            delta: "x".into(),
        };
        assert!(!d.merge(&other));
        let end = StreamEvent::TextEnd {
            content_index: 1,
            block: Content::text("abc"),
        };
        assert!(!d.merge(&end));
    }
}
