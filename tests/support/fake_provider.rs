//! A model provider on 127.0.0.1 over real HTTP/1.1 (std `TcpListener`, a thread per
//! connection). It serves a queue of scripted responses, records every request, and injects faults:
//! status codes with headers, chunks released by a gate, pauses, a stall, a drop mid-stream.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::Value;

/// One piece of a response body.
pub enum Chunk {
    Bytes(Vec<u8>),
    /// Waits until the test sends on (or drops) the gate's sender.
    Gate(Receiver<()>),
    Pause(Duration),
    /// Runs work on the connection's thread before the next piece (a benchmark's floor: work
    /// done by the least client at the same point of a turn).
    Run(Box<dyn FnOnce() + Send>),
    /// Never sends anything more; the connection stays open until the client closes it.
    Stall,
    /// As `Stall`, and reports when the client's close (or reset) arrived.
    StallUntilClosed(Sender<std::time::Instant>),
    /// Closes the connection without finishing the body.
    Drop,
    /// `len` copies of `byte`, written in 1 MiB pieces so that a huge body costs no memory here.
    Repeat {
        byte: u8,
        len: usize,
    },
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub chunks: Vec<Chunk>,
}

impl Reply {
    pub fn sse(body: impl Into<Vec<u8>>) -> Reply {
        Reply::sse_chunks(vec![Chunk::Bytes(body.into())])
    }

    pub fn sse_chunks(chunks: Vec<Chunk>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks,
        }
    }

    pub fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![Chunk::Bytes(body.as_bytes().to_vec())],
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// The body's length in bytes (also when bodies are not parsed).
    pub body_len: usize,
    /// When the whole request had arrived.
    pub received: std::time::Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct FakeProvider {
    pub base_url: String,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Receiver<Request>,
    /// TCP connections accepted so far.
    connections: Arc<AtomicUsize>,
    /// Whether request bodies are parsed into `Request::body` (benchmarks turn it off, so the
    /// server's own parse of a long history is not timed as the client's).
    parse_bodies: Arc<AtomicBool>,
}

impl FakeProvider {
    pub fn start() -> FakeProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let replies: Arc<Mutex<VecDeque<Reply>>> = Arc::default();
        let (tx, requests) = unbounded();
        let queue = replies.clone();
        let connections = Arc::new(AtomicUsize::new(0));
        let parse_bodies = Arc::new(AtomicBool::new(true));
        let (accepted, parse) = (connections.clone(), parse_bodies.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                let (queue, tx, parse) = (queue.clone(), tx.clone(), parse.clone());
                std::thread::spawn(move || serve(stream, queue, tx, parse));
            }
        });
        FakeProvider {
            base_url,
            replies,
            requests,
            connections,
            parse_bodies,
        }
    }

    /// How many TCP connections the server has accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Stops parsing request bodies: `Request::body` is `null` from now on.
    pub fn skip_bodies(&self) {
        self.parse_bodies.store(false, Ordering::SeqCst);
    }

    pub fn push(&self, reply: Reply) {
        self.replies.lock().unwrap().push_back(reply);
    }

    /// The next request the server received, within `timeout`.
    pub fn request(&self, timeout: Duration) -> Request {
        self.requests
            .recv_timeout(timeout)
            .expect("the fake provider received no request in time")
    }

    pub fn try_request(&self) -> Option<Request> {
        self.requests.try_recv().ok()
    }
}

fn serve(
    stream: TcpStream,
    queue: Arc<Mutex<VecDeque<Reply>>>,
    tx: Sender<Request>,
    parse: Arc<AtomicBool>,
) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let Some(request) = read_request(&mut reader, parse.load(Ordering::SeqCst)) else {
            return;
        };
        let reply = queue.lock().unwrap().pop_front();
        let _ = tx.send(request);
        let reply = reply.unwrap_or_else(|| {
            Reply::status(
                500,
                r#"{"error":{"message":"fake provider: no reply queued"}}"#,
            )
        });
        if !write_reply(&stream, reply) {
            return;
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>, parse: bool) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse().unwrap_or(0);
            }
            if k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked") {
                chunked = true;
            }
            headers.push((k, v));
        }
    }
    let body = if chunked {
        read_chunked(reader)?
    } else {
        let mut b = vec![0u8; length];
        reader.read_exact(&mut b).ok()?;
        b
    };
    let body_len = body.len();
    let body = match parse {
        true => serde_json::from_slice(&body).unwrap_or(Value::Null),
        false => Value::Null,
    };
    Some(Request {
        method,
        path,
        headers,
        body,
        body_len,
        received: std::time::Instant::now(),
    })
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let size = usize::from_str_radix(line.trim(), 16).ok()?;
        let mut chunk = vec![0u8; size + 2];
        reader.read_exact(&mut chunk).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// Writes a chunked response. `false` when the connection must close.
fn write_reply(mut stream: &TcpStream, reply: Reply) -> bool {
    let mut head = format!(
        "HTTP/1.1 {} Fake\r\ntransfer-encoding: chunked\r\n",
        reply.status
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return false;
    }
    for chunk in reply.chunks {
        match chunk {
            Chunk::Bytes(b) if !b.is_empty() => {
                let framed = [
                    format!("{:x}\r\n", b.len()).into_bytes(),
                    b,
                    b"\r\n".to_vec(),
                ]
                .concat();
                if stream
                    .write_all(&framed)
                    .and_then(|_| stream.flush())
                    .is_err()
                {
                    return false;
                }
            }
            Chunk::Bytes(_) => {}
            Chunk::Repeat { byte, len } => {
                if !write_repeated(stream, byte, len) {
                    return false;
                }
            }
            Chunk::Gate(rx) => {
                let _ = rx.recv();
            }
            Chunk::Pause(d) => std::thread::sleep(d),
            Chunk::Run(work) => work(),
            Chunk::Stall => {
                // Hold the connection until the client goes away.
                let mut probe = [0u8; 1];
                let _ = stream.set_read_timeout(None);
                let _ = stream.read(&mut probe);
                return false;
            }
            Chunk::StallUntilClosed(closed) => {
                let mut probe = [0u8; 1];
                let _ = stream.set_read_timeout(None);
                let _ = stream.read(&mut probe);
                let _ = closed.send(std::time::Instant::now());
                return false;
            }
            Chunk::Drop => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return false;
            }
        }
    }
    stream.write_all(b"0\r\n\r\n").is_ok()
}

/// Writes `len` bytes of `byte` as chunks; `false` once the client has gone away.
fn write_repeated(mut stream: &TcpStream, byte: u8, len: usize) -> bool {
    const PIECE: usize = 1 << 20;
    let piece = vec![byte; PIECE];
    let mut left = len;
    while left > 0 {
        let n = left.min(PIECE);
        let framed = stream
            .write_all(format!("{n:x}\r\n").as_bytes())
            .and_then(|_| stream.write_all(&piece[..n]))
            .and_then(|_| stream.write_all(b"\r\n"));
        if framed.is_err() {
            return false;
        }
        left -= n;
    }
    stream.flush().is_ok()
}

/// Frames JSON payloads as SSE events (`event:` lines when `named`).
pub fn sse_events(events: &[Value], named: bool) -> String {
    let mut out = String::new();
    for e in events {
        if named {
            if let Some(t) = e.get("type").and_then(Value::as_str) {
                out.push_str(&format!("event: {t}\n"));
            }
        }
        out.push_str(&format!("data: {e}\n\n"));
    }
    out
}

/// An OpenAI chat stream answering with `text` in pieces.
pub fn openai_text(pieces: &[&str]) -> String {
    let mut events: Vec<Value> = pieces
        .iter()
        .map(|p| serde_json::json!({"choices":[{"index":0,"delta":{"content":p},"finish_reason":null}]}))
        .collect();
    events.push(serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
    events.push(serde_json::json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}));
    let mut s = sse_events(&events, false);
    s.push_str("data: [DONE]\n\n");
    s
}

/// An OpenAI chat stream of `n` short text deltas (`w0 `, `w1 `, ... cycling through ten), no
/// usage: the benchmarks' long reply.
pub fn openai_deltas(n: usize) -> String {
    let mut events: Vec<Value> = (0..n)
        .map(|i| serde_json::json!({"choices":[{"index":0,"delta":{"content":format!("w{} ", i % 10)}}]}))
        .collect();
    events.push(serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}));
    let mut s = sse_events(&events, false);
    s.push_str("data: [DONE]\n\n");
    s
}

/// An OpenAI chat stream that calls one tool.
pub fn openai_tool_call(id: &str, name: &str, args: &Value) -> String {
    let events = vec![
        serde_json::json!({"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":id,"type":"function","function":{"name":name,"arguments":""}}]},"finish_reason":null}]}),
        serde_json::json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":args.to_string()}}]},"finish_reason":null}]}),
        serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
    ];
    let mut s = sse_events(&events, false);
    s.push_str("data: [DONE]\n\n");
    s
}

/// An Anthropic stream with optional thinking and text.
pub fn anthropic_text(thinking: Option<(&str, &str)>, text: &str) -> String {
    let mut events = vec![
        serde_json::json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":12,"cache_read_input_tokens":3,"cache_creation_input_tokens":0,"output_tokens":1}}}),
    ];
    let mut idx = 0;
    if let Some((t, sig)) = thinking {
        events.push(serde_json::json!({"type":"content_block_start","index":idx,"content_block":{"type":"thinking","thinking":"","signature":""}}));
        events.push(serde_json::json!({"type":"content_block_delta","index":idx,"delta":{"type":"thinking_delta","thinking":t}}));
        events.push(serde_json::json!({"type":"content_block_delta","index":idx,"delta":{"type":"signature_delta","signature":sig}}));
        events.push(serde_json::json!({"type":"content_block_stop","index":idx}));
        idx += 1;
    }
    events.push(serde_json::json!({"type":"content_block_start","index":idx,"content_block":{"type":"text","text":""}}));
    events.push(serde_json::json!({"type":"content_block_delta","index":idx,"delta":{"type":"text_delta","text":text}}));
    events.push(serde_json::json!({"type":"content_block_stop","index":idx}));
    events.push(serde_json::json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}));
    events.push(serde_json::json!({"type":"message_stop"}));
    sse_events(&events, true)
}
