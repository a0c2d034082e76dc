//! A request body written from the encoded history's pieces: byte segments assembled per
//! request around the shared items, and the reader that streams them to the connection.

use std::io::Read;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{History, Layout};

/// A request body as a list of byte segments: small ones assembled for this request, and items
/// of the history's pieces, which the body reads from the history it holds (an index per item,
/// not a reference count touched per item: a body is built every turn).
#[derive(Debug, Default)]
pub struct Body {
    segments: Vec<Segment>,
    len: usize,
    history: Option<History>,
}

#[derive(Debug)]
enum Segment {
    Bytes(Vec<u8>),
    /// Punctuation: no allocation for the comma between two items.
    Static(&'static [u8]),
    /// Item `.1` of the history's piece `.0`.
    Item(usize, usize),
    /// Chunk `.0` of the history's flat text, without its leading comma if `.1`.
    Chunk(usize, bool),
    /// Bytes shared with every request (the encoded tools).
    Shared(Arc<[u8]>),
}

impl Segment {
    fn bytes<'a>(&'a self, history: Option<&'a History>) -> &'a [u8] {
        match self {
            Segment::Bytes(b) => b,
            Segment::Static(b) => b,
            Segment::Shared(b) => b,
            Segment::Item(piece, i) => history
                .and_then(|h| h.piece(*piece))
                .map_or(&[], |p| &p.items[*i]),
            Segment::Chunk(n, bare) => history
                .and_then(|h| h.flat.chunks.get(*n))
                .map_or(&[], |c| &c[usize::from(*bare)..]),
        }
    }
}

impl Body {
    fn push(&mut self, bytes: &'static [u8]) {
        self.len += bytes.len();
        if let Some(Segment::Bytes(last)) = self.segments.last_mut() {
            last.extend_from_slice(bytes);
        } else {
            self.segments.push(Segment::Static(bytes));
        }
    }

    fn push_vec(&mut self, bytes: Vec<u8>) {
        self.len += bytes.len();
        match self.segments.last_mut() {
            Some(Segment::Bytes(last)) => last.extend_from_slice(&bytes),
            _ => self.segments.push(Segment::Bytes(bytes)),
        }
    }

    fn push_item(&mut self, history: &History, piece: usize, i: usize) {
        if let Some(p) = history.piece(piece) {
            self.len += p.items[i].len();
            self.segments.push(Segment::Item(piece, i));
        }
    }

    fn push_shared(&mut self, bytes: &Arc<[u8]>) {
        self.len += bytes.len();
        self.segments.push(Segment::Shared(bytes.clone()));
    }

    fn push_json(&mut self, value: &impl serde::Serialize) {
        // Serializing a `Value` or a string cannot fail.
        if let Ok(bytes) = serde_json::to_vec(value) {
            self.push_vec(bytes);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole body in one buffer (tests, logs).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for s in &self.segments {
            out.extend_from_slice(s.bytes(self.history.as_ref()));
        }
        out
    }

    /// Reads the body segment by segment, without joining it.
    pub fn into_reader(self) -> BodyReader {
        BodyReader {
            segments: self.segments.into_iter(),
            history: self.history,
            current: None,
            at: 0,
        }
    }
}

pub struct BodyReader {
    segments: std::vec::IntoIter<Segment>,
    history: Option<History>,
    current: Option<Segment>,
    at: usize,
}

impl Read for BodyReader {
    /// Fills `buf` from as many segments as fit: the HTTP client sends what each read returns,
    /// and one small send per piece would cost a system call per message.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            if let Some(segment) = &self.current {
                let rest = &segment.bytes(self.history.as_ref())[self.at..];
                if !rest.is_empty() {
                    let n = rest.len().min(buf.len() - filled);
                    buf[filled..filled + n].copy_from_slice(&rest[..n]);
                    self.at += n;
                    filled += n;
                    continue;
                }
            }
            match self.segments.next() {
                Some(next) => (self.current, self.at) = (Some(next), 0),
                None => break,
            }
        }
        Ok(filled)
    }
}

/// The cache breakpoint Anthropic reads on a block; it goes right after the block's opening brace
/// (key order carries no meaning in JSON; what matters for the provider's prompt cache is that the
/// same history is written with the same bytes on every request, which the cached pieces ensure).
const CACHE_CONTROL: &[u8] = br#""cache_control":{"type":"ephemeral"}"#;

/// The fields of a request body built as a JSON object, taken rather than copied (its tools'
/// schemas are the bulk of it).
pub fn head(body: Value) -> Map<String, Value> {
    match body {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The request body: the object `head` (which has no `key`) with `key` set to an array of
/// `prefix` followed by the history: the same JSON value serde_json would write for one tree (no
/// spaces; `key` placed before the first head key that sorts after it). When `tools` is given,
/// those bytes are the value of the head's `tools` field, whose own value only holds its place
/// (the tools are encoded once per tool set, `wire::encoded_tools`).
pub fn assemble(
    head: &Map<String, Value>,
    key: &str,
    prefix: &[Value],
    history: &History,
    tools: Option<&Arc<[u8]>>,
) -> Body {
    let mut body = Body {
        // Two segments an item at most (the item and the comma after it).
        segments: Vec::with_capacity(2 * history.piece_count() + 16),
        ..Body::default()
    };
    body.push(b"{");
    let mut first = true;
    let mut placed = false;
    for (k, v) in head {
        if !placed && k.as_str() > key {
            write_key(&mut body, key, &mut first);
            write_history(&mut body, prefix, history);
            placed = true;
        }
        write_key(&mut body, k, &mut first);
        match tools.filter(|_| k == "tools") {
            Some(bytes) => body.push_shared(bytes),
            None => body.push_json(v),
        }
    }
    if !placed {
        write_key(&mut body, key, &mut first);
        write_history(&mut body, prefix, history);
    }
    body.push(b"}");
    body.history = Some(history.clone());
    body
}

fn write_key(body: &mut Body, key: &str, first: &mut bool) {
    if !std::mem::take(first) {
        body.push(b",");
    }
    body.push_json(&key);
    body.push(b":");
}

fn write_history(body: &mut Body, prefix: &[Value], history: &History) {
    body.push(b"[");
    let mut first = true;
    let mut comma = |body: &mut Body| {
        if !std::mem::take(&mut first) {
            body.push(b",");
        }
    };
    for v in prefix {
        comma(body);
        body.push_json(v);
    }
    match history.layout {
        Layout::Flat => {
            // Each kept item brings its comma; the array's first element must not.
            let mut any = !prefix.is_empty();
            for (n, chunk) in history.flat.chunks.iter().enumerate() {
                let bare = !std::mem::replace(&mut any, true);
                body.len += chunk.len() - usize::from(bare);
                body.segments.push(Segment::Chunk(n, bare));
            }
            for n in history.kept.len()..history.piece_count() {
                for i in 0..history.piece(n).map_or(0, |p| p.items.len()) {
                    if std::mem::replace(&mut any, true) {
                        body.push(b",");
                    }
                    body.push_item(history, n, i);
                }
            }
        }
        Layout::Merged { field, mark_last } => {
            let last = (0..history.piece_count())
                .rev()
                .find(|&n| history.piece(n).is_some_and(|p| !p.items.is_empty()));
            let mut open: Option<&'static str> = None;
            for (n, piece) in history.pieces().enumerate() {
                if piece.items.is_empty() {
                    continue;
                }
                match open {
                    Some(role) if role == piece.role => body.push(b","),
                    _ => {
                        close_group(body, open);
                        comma(body);
                        body.push(b"{");
                        body.push_json(&field);
                        body.push(b":[");
                        open = Some(piece.role);
                    }
                }
                let marked = mark_last && Some(n) == last;
                write_items(body, history, n, marked);
            }
            close_group(body, open);
        }
    }
    body.push(b"]");
}

/// Ends a merged element: its items, then its role (`"role"` sorts after the item field).
fn close_group(body: &mut Body, role: Option<&'static str>) {
    if let Some(role) = role {
        body.push(b"],\"role\":");
        body.push_json(&role);
        body.push(b"}");
    }
}

fn write_items(body: &mut Body, history: &History, n: usize, mark_last: bool) {
    let Some(piece) = history.piece(n) else {
        return;
    };
    let count = piece.items.len();
    for i in 0..count {
        if i > 0 {
            body.push(b",");
        }
        if mark_last && i + 1 == count {
            let item = &piece.items[i];
            body.push(b"{");
            body.push(CACHE_CONTROL);
            match &item[1..] {
                b"}" => body.push(b"}"),
                rest => {
                    body.push(b",");
                    body.push_vec(rest.to_vec());
                }
            }
        } else {
            body.push_item(history, n, i);
        }
    }
}
