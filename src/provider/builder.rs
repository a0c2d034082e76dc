//! `MessageBuilder`: the one place where provider decoders turn their events into unified deltas.
//! Each decoder calls `text_start`/`text_delta`/... with its own block keys; the builder keeps our
//! content indexes, the raw tool-argument text, and closes whatever is left open at the end.

use std::collections::HashMap;

use serde_json::Value;

use crate::protocol::message::{AssistantMessage, Content, StopReason, StreamEvent, ToolCall};

pub struct MessageBuilder {
    pub message: AssistantMessage,
    /// Deltas not yet sent to the session.
    pub pending: Vec<StreamEvent>,
    /// Provider block key (Anthropic index, OpenAI tool index, item id...) → our content index.
    keys: HashMap<String, usize>,
    open: Vec<usize>,
    pub started: bool,
}

impl MessageBuilder {
    pub fn new(message: AssistantMessage) -> MessageBuilder {
        MessageBuilder {
            message,
            pending: Vec::new(),
            keys: HashMap::new(),
            open: Vec::new(),
            started: false,
        }
    }

    fn push(&mut self, ev: StreamEvent) {
        self.message.apply(&ev);
        self.pending.push(ev);
    }

    pub fn index_of(&self, key: &str) -> Option<usize> {
        self.keys.get(key).copied()
    }

    pub fn is_open(&self, key: &str) -> bool {
        self.index_of(key).is_some_and(|i| self.open.contains(&i))
    }

    fn begin(&mut self, key: &str) -> usize {
        let idx = self.message.content.len();
        self.keys.insert(key.to_string(), idx);
        self.open.push(idx);
        idx
    }

    pub fn text_start(&mut self, key: &str) -> usize {
        let idx = self.begin(key);
        self.push(StreamEvent::TextStart { content_index: idx });
        idx
    }

    pub fn thinking_start(&mut self, key: &str) -> usize {
        let idx = self.begin(key);
        self.push(StreamEvent::ThinkingStart { content_index: idx });
        idx
    }

    pub fn toolcall_start(&mut self, key: &str, id: &str, name: &str) -> usize {
        let idx = self.begin(key);
        self.push(StreamEvent::ToolcallStart {
            content_index: idx,
            id: id.into(),
            name: name.into(),
        });
        idx
    }

    /// Appends text, opening a text block under `key` if none is open.
    pub fn text_delta(&mut self, key: &str, delta: &str) {
        let idx = match self.index_of(key).filter(|_| self.is_open(key)) {
            Some(i) => i,
            None => self.text_start(key),
        };
        if !delta.is_empty() {
            self.push(StreamEvent::TextDelta {
                content_index: idx,
                delta: delta.into(),
            });
        }
    }

    pub fn thinking_delta(&mut self, key: &str, delta: &str) {
        let idx = match self.index_of(key).filter(|_| self.is_open(key)) {
            Some(i) => i,
            None => self.thinking_start(key),
        };
        if !delta.is_empty() {
            self.push(StreamEvent::ThinkingDelta {
                content_index: idx,
                delta: delta.into(),
            });
        }
    }

    pub fn toolcall_delta(&mut self, key: &str, delta: &str) {
        if let Some(idx) = self.index_of(key) {
            if !delta.is_empty() {
                self.push(StreamEvent::ToolcallDelta {
                    content_index: idx,
                    delta: delta.into(),
                });
            }
        }
    }

    /// Mutable access to a block, for signatures and ids that arrive beside the deltas.
    pub fn block_mut(&mut self, key: &str) -> Option<&mut Content> {
        let idx = self.index_of(key)?;
        self.message.content.get_mut(idx)
    }

    /// Closes the block under `key`, emitting its `*_end` event.
    pub fn end(&mut self, key: &str) {
        let Some(idx) = self.index_of(key) else {
            return;
        };
        self.end_index(idx);
    }

    fn end_index(&mut self, idx: usize) {
        let Some(pos) = self.open.iter().position(|i| *i == idx) else {
            return;
        };
        self.open.remove(pos);
        let block = self.message.content[idx].clone();
        let ev = match block {
            Content::Text { .. } => StreamEvent::TextEnd {
                content_index: idx,
                block,
            },
            Content::Thinking { .. } => StreamEvent::ThinkingEnd {
                content_index: idx,
                block,
            },
            Content::ToolCall(call) => StreamEvent::ToolcallEnd {
                content_index: idx,
                tool_call: finish_call(call),
            },
            _ => return,
        };
        self.push(ev);
    }

    /// Adds a block that arrives whole (redacted thinking).
    pub fn whole_block(&mut self, block: Content) {
        self.push(StreamEvent::Block { block });
    }

    /// Closes every open block. With `cut_off`, open tool calls are marked incomplete: the output
    /// limit ended them mid-arguments.
    pub fn close_all(&mut self, cut_off: bool) {
        for idx in self.open.clone() {
            if cut_off {
                if let Some(Content::ToolCall(call)) = self.message.content.get_mut(idx) {
                    call.incomplete_arguments = true;
                }
            }
            self.end_index(idx);
        }
    }

    pub fn take_pending(&mut self) -> Vec<StreamEvent> {
        std::mem::take(&mut self.pending)
    }

    /// The finished message, with scratch fields removed.
    pub fn finish(mut self, stop: StopReason) -> AssistantMessage {
        self.close_all(stop == StopReason::Length);
        self.message.stop_reason = stop;
        strip_scratch(&mut self.message);
        self.message
    }

    /// The partial message of a failed stream: content kept, stop reason `error` or `aborted`.
    pub fn fail(
        mut self,
        stop: StopReason,
        error: String,
        status: Option<u16>,
    ) -> AssistantMessage {
        self.close_all(true);
        self.pending.clear();
        self.message.stop_reason = stop;
        self.message.error_message = Some(error);
        self.message.error_status = status;
        strip_scratch(&mut self.message);
        self.message
    }
}

fn strip_scratch(message: &mut AssistantMessage) {
    for c in &mut message.content {
        if let Content::ToolCall(call) = c {
            call.partial_json = None;
        }
    }
}

/// Parses the accumulated argument text once the call closes.
fn finish_call(mut call: ToolCall) -> ToolCall {
    let raw = call.partial_json.take().unwrap_or_default();
    if !raw.trim().is_empty() {
        match parse_arguments(&raw) {
            Some(v) => call.arguments = v,
            None => call.incomplete_arguments = true,
        }
    } else if call.arguments.is_null() {
        call.arguments = Value::Object(Default::default());
    }
    call
}

/// Strict JSON first, then a repair of raw control characters inside strings.
pub fn parse_arguments(raw: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str(raw) {
        return Some(v);
    }
    serde_json::from_str(&escape_controls_in_strings(raw)).ok()
}

fn escape_controls_in_strings(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 8);
    let (mut in_string, mut escaped) = (false, false);
    for c in raw.chars() {
        if in_string && !escaped && (c as u32) < 0x20 {
            out.push_str(&format!("\\u{:04x}", c as u32));
            continue;
        }
        if c == '"' && !escaped {
            in_string = !in_string;
        }
        escaped = in_string && c == '\\' && !escaped;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> MessageBuilder {
        MessageBuilder::new(AssistantMessage::empty("a", "p", "m"))
    }

    #[test]
    fn tool_call_arguments_assemble() {
        let mut b = builder();
        b.text_delta("t", "hi");
        b.toolcall_start("c", "call_1", "read");
        for part in ["{\"pa", "th\": \"a", ".rs\"}"] {
            b.toolcall_delta("c", part);
        }
        b.end("c");
        let m = b.finish(StopReason::ToolUse);
        let call = m.tool_calls().next().unwrap();
        assert_eq!(call.arguments, serde_json::json!({"path":"a.rs"}));
        assert!(call.partial_json.is_none());
        assert_eq!(m.text(), "hi");
    }

    #[test]
    fn cut_off_calls_are_incomplete() {
        let mut b = builder();
        b.toolcall_start("c", "call_1", "write");
        b.toolcall_delta("c", "{\"path\": \"a");
        let m = b.finish(StopReason::Length);
        assert!(m.tool_calls().next().unwrap().incomplete_arguments);
    }

    #[test]
    fn raw_newlines_in_strings_are_repaired() {
        assert_eq!(
            parse_arguments("{\"a\":\"x\ny\"}"),
            Some(serde_json::json!({"a":"x\ny"}))
        );
        assert_eq!(parse_arguments(""), None);
    }
}
