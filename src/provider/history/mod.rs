//! The history part of a model request, encoded once per message.
//!
//! Every turn of a run sends the whole conversation again. Encoding it from scratch each time (a
//! JSON tree of every message, serialized and freed) made a turn cost time in proportion to the
//! history. Here each message is encoded for the API once, when it is final, and kept as bytes;
//! a request is assembled from those pieces and written to the connection as they are, so a turn
//! encodes only the messages that are new since the last one.
//!
//! What the encoding of a message depends on, and so what throws the pieces away:
//! - the model it is sent to (API, provider, id, whether it reasons): signatures, reasoning items
//!   and reasoning text are replayed to their own model only;
//! - the messages themselves: the pieces are kept only while the context grows by appending.
//!   The session's context owns its cache and drops it whenever its messages can change
//!   otherwise (it hands out mutable access for compaction and edits; switching or branching
//!   sessions builds a new context).
//!
//! The thinking level, the system prompt and the tools are outside the history; they are encoded
//! with the rest of the request's top level every time, which costs the same at any length.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::catalog::{Api, Model};
use crate::protocol::message::{AgentMessage, Content, StopReason, ToolResultMessage};

mod body;
pub use body::{assemble, head, Body, BodyReader};

/// One replayed message, encoded: the array items it contributes and, for APIs that merge
/// consecutive messages of one role, that role. A flat layout's kept piece gives its items to the
/// history's flat text and keeps none itself: requests read them from there, and holding both
/// doubled what a long history kept in memory.
#[derive(Debug)]
pub struct Piece {
    role: &'static str,
    items: Vec<Box<[u8]>>,
}

/// How an API lays its history out.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// Each item is an element of the array (Chat Completions, Responses).
    Flat,
    /// Consecutive messages of one role become one `{"<field>":[items],"role":role}` element
    /// (Anthropic's content blocks, Gemini's parts); `mark_last` puts Anthropic's cache breakpoint
    /// on the very last block.
    Merged {
        field: &'static str,
        mark_last: bool,
    },
}

/// What a message's encoding depends on besides the message.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    api: Api,
    provider: String,
    id: String,
    reasoning: bool,
}

impl Key {
    fn of(model: &Model) -> Key {
        Key {
            api: model.api,
            provider: model.provider.clone(),
            id: model.id.clone(),
            reasoning: model.reasoning,
        }
    }
}

/// The history as every provider may see it, one message at a time: assistant messages that
/// ended in `error` or `aborted` are dropped (replaying half a reasoning item or tool call is
/// rejected), a tool result is kept only for a call of the assistant message before it, and a
/// call left without a result gets a synthetic error result once the next message shows none is
/// coming (or at the end of the history).
#[derive(Clone, Debug, Default)]
pub struct Replay {
    open: Vec<(String, String)>,
}

impl Replay {
    /// Feeds one message; what it makes final goes to `out`.
    pub fn feed<'a>(&mut self, message: &'a AgentMessage, out: &mut Vec<Cow<'a, AgentMessage>>) {
        match message {
            AgentMessage::Assistant(a)
                if matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) => {}
            AgentMessage::Assistant(a) => {
                out.extend(self.take_open().into_iter().map(Cow::Owned));
                self.open = a
                    .tool_calls()
                    .map(|c| (c.id.clone(), c.name.clone()))
                    .collect();
                out.push(Cow::Borrowed(message));
            }
            AgentMessage::ToolResult(r) => {
                if let Some(pos) = self.open.iter().position(|(id, _)| *id == r.tool_call_id) {
                    self.open.remove(pos);
                    out.push(Cow::Borrowed(message));
                }
            }
            _ => {
                out.extend(self.take_open().into_iter().map(Cow::Owned));
                out.push(Cow::Borrowed(message));
            }
        }
    }

    /// The synthetic results the calls still open would get if the history ended here.
    pub fn closing(&self) -> Vec<AgentMessage> {
        self.open
            .iter()
            .map(|(id, name)| {
                AgentMessage::ToolResult(ToolResultMessage {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    content: vec![Content::text("No result provided")],
                    details: None,
                    is_error: true,
                    timestamp: 0,
                })
            })
            .collect()
    }

    fn take_open(&mut self) -> Vec<AgentMessage> {
        let closing = self.closing();
        self.open.clear();
        closing
    }
}

/// The encoded messages of one context, kept across requests.
#[derive(Debug, Default)]
pub struct HistoryCache {
    key: Option<Key>,
    /// How many messages of the context have been fed.
    consumed: usize,
    replay: Replay,
    /// Shared with the histories handed out: a request holds the list as it was, and appending
    /// copies it only while an earlier request still holds it (it is usually done by then), so a
    /// turn costs no pass over the history's pieces.
    pieces: Arc<Vec<Arc<Piece>>>,
    /// For the flat layout, the kept pieces' items as text (the pieces keep no copy).
    flat: FlatText,
    tool_results: bool,
}

/// A flat layout's kept items as text, each preceded by a comma, in chunks of about
/// [`FlatText::CHUNK`] bytes. Writing a body then takes a few segments, not one per item: going
/// from item to item through their own allocations cost a cache miss or more each, at every turn.
/// The chunks are shared with the requests like the pieces; only the last one grows, and it is
/// copied first (at most a chunk) when a request still holds it.
#[derive(Clone, Debug, Default)]
struct FlatText {
    chunks: Vec<Arc<Vec<u8>>>,
    /// Each item's length, to split the text into items again (tests).
    #[cfg(test)]
    lens: Vec<usize>,
}

impl FlatText {
    const CHUNK: usize = 64 << 10;

    fn push(&mut self, item: &[u8]) {
        #[cfg(test)]
        self.lens.push(item.len());
        let room = |c: &Vec<u8>| c.is_empty() || c.len() + 1 + item.len() <= Self::CHUNK;
        if !self.chunks.last().is_some_and(|c| room(c)) {
            self.chunks.push(Arc::new(Vec::with_capacity(Self::CHUNK)));
        }
        if let Some(last) = self.chunks.last_mut() {
            let chunk = Arc::make_mut(last);
            chunk.push(b',');
            chunk.extend_from_slice(item);
        }
    }
}

/// The encoded history of one request: the shared pieces, then the synthetic results of calls
/// still open at the end (encoded for this request only).
#[derive(Clone, Debug)]
pub struct History {
    kept: Arc<Vec<Arc<Piece>>>,
    flat: FlatText,
    closing: Vec<Arc<Piece>>,
    /// Whether the context holds a tool result (Chat Completions then always declares tools).
    pub has_tool_results: bool,
    layout: Layout,
}

impl HistoryCache {
    /// The history of `messages` for `model`: the pieces kept from the last call when they still
    /// apply, plus the new messages encoded. `messages` must be the messages of the last call
    /// with more appended, unless the cache was dropped in between.
    pub fn encode(&mut self, model: &Model, messages: &[AgentMessage]) -> History {
        let key = Key::of(model);
        if self.key.as_ref() != Some(&key) || messages.len() < self.consumed {
            *self = HistoryCache {
                key: Some(key),
                ..HistoryCache::default()
            };
        }
        // The scripted provider speaks no wire API: nothing is encoded for it, as an empty
        // history is what it would get.
        let wire = model.api.wire();
        let layout = wire.map_or(Layout::Flat, |w| w.layout());
        let encode = |m: &AgentMessage, model: &Model| match wire {
            Some(w) => w.encode_message(m, model),
            None => ("", Vec::new()),
        };
        let mut replayed = Vec::new();
        for message in &messages[self.consumed..] {
            self.tool_results |= matches!(message, AgentMessage::ToolResult(_));
            self.replay.feed(message, &mut replayed);
        }
        self.consumed = messages.len();
        let piece = |m: &AgentMessage| Arc::new(Piece::new(encode(m, model)));
        if !replayed.is_empty() {
            let flat = &mut self.flat;
            let new = replayed.iter().map(|m| {
                let mut piece = Piece::new(encode(m, model));
                if matches!(layout, Layout::Flat) {
                    for item in std::mem::take(&mut piece.items) {
                        flat.push(&item);
                    }
                }
                Arc::new(piece)
            });
            Arc::make_mut(&mut self.pieces).extend(new);
        }
        History {
            kept: self.pieces.clone(),
            flat: self.flat.clone(),
            closing: self.replay.closing().iter().map(piece).collect(),
            has_tool_results: self.tool_results,
            layout,
        }
    }

    /// How many encoded messages are kept.
    pub fn kept(&self) -> usize {
        self.pieces.len()
    }
}

impl History {
    /// `messages` encoded from scratch (a request with no cache, such as a compaction's).
    pub fn fresh(model: &Model, messages: &[AgentMessage]) -> History {
        HistoryCache::default().encode(model, messages)
    }

    /// The encoded items, in order (tests): a flat layout's kept ones cut from its text.
    #[cfg(test)]
    pub fn items(&self) -> Vec<&[u8]> {
        let mut lens = self.flat.lens.iter();
        let mut kept = Vec::new();
        for chunk in &self.flat.chunks {
            let mut at = 0;
            while at < chunk.len() {
                let len = lens.next().expect("a length per item");
                kept.push(&chunk[at + 1..at + 1 + len]);
                at += 1 + len;
            }
        }
        kept.into_iter()
            .chain(self.pieces().flat_map(|p| p.items.iter().map(|i| &i[..])))
            .collect()
    }

    /// The pieces, kept ones first.
    fn pieces(&self) -> impl Iterator<Item = &Arc<Piece>> {
        self.kept.iter().chain(&self.closing)
    }

    fn piece_count(&self) -> usize {
        self.kept.len() + self.closing.len()
    }

    fn piece(&self, n: usize) -> Option<&Arc<Piece>> {
        match n.checked_sub(self.kept.len()) {
            None => self.kept.get(n),
            Some(extra) => self.closing.get(extra),
        }
    }

    /// Whether `self` and `other` share their `n`-th piece (the same bytes, not a copy).
    pub fn shares_piece(&self, other: &History, n: usize) -> bool {
        match (self.piece(n), other.piece(n)) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Piece {
    fn new((role, items): (&'static str, Vec<Value>)) -> Piece {
        Piece {
            role,
            items: items
                .iter()
                .map(|v| v.to_string().into_bytes().into_boxed_slice())
                .collect(),
        }
    }
}

/// A model of `api` for tests: reasoning, provider `p`.
#[cfg(test)]
pub fn test_model(api: Api, id: &str) -> Model {
    Model {
        id: id.into(),
        name: id.into(),
        api,
        provider: "p".into(),
        base_url: "http://127.0.0.1:9".into(),
        reasoning: true,
        input: vec!["text".into(), "image".into()],
        cost: super::catalog::ModelCost::default(),
        context_window: 100_000,
        max_tokens: 8_000,
        xhigh: false,
        headers: Default::default(),
        compat: None,
    }
}

#[cfg(test)]
mod tests;
