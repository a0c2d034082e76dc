//! The `gjc-stdout` thread: the only writer of stdout. It owns the event envelope (`seq`,
//! `frame_id`, `protocol_version`), writes one JSON object and `\n` per frame, escapes U+2028 and
//! U+2029, and flushes whenever its queue is empty, which batches bursts without adding latency.
#![allow(clippy::print_stdout)]

use std::io::Write;

use crossbeam_channel::Receiver;
use serde::Serialize;
use serde_json::Value;

use crate::protocol::{AgentEvent, Outbound};

/// Event frames carry this protocol version.
pub const PROTOCOL_VERSION: u32 = 2;

/// The frame buffer is reused; past this capacity it is given back after the frame.
const BUF_KEEP: usize = 1 << 20;

pub struct Writer<W: Write> {
    out: std::io::BufWriter<W>,
    session_id: String,
    seq: u64,
    buf: Vec<u8>,
}

#[derive(Serialize)]
struct EventFrame<'a, P: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    protocol_version: u32,
    session_id: &'a str,
    seq: u64,
    frame_id: String,
    payload: P,
}

#[derive(Serialize)]
struct Payload<'a> {
    event_type: &'static str,
    event: &'a AgentEvent,
}

#[derive(Serialize)]
struct CompactPayload<'a> {
    event_type: &'static str,
    compact: bool,
    message_id: Value,
    content_index: Option<usize>,
    #[serde(rename = "assistantMessageEvent")]
    assistant_message_event: &'a crate::protocol::message::StreamEvent,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W, session_id: String) -> Writer<W> {
        Writer {
            out: std::io::BufWriter::with_capacity(64 * 1024, out),
            session_id,
            seq: 0,
            buf: Vec::with_capacity(4096),
        }
    }

    /// Writes frames until every sender is gone or stdout fails. Returns the write error, if any.
    pub fn run(mut self, frames: Receiver<Outbound>) -> std::io::Result<()> {
        while let Ok(frame) = frames.recv() {
            self.write_owned(frame)?;
            while let Ok(frame) = frames.try_recv() {
                self.write_owned(frame)?;
            }
            self.out.flush()?;
        }
        self.out.flush()
    }

    pub fn write(&mut self, frame: &Outbound) -> std::io::Result<()> {
        self.buf.clear();
        match frame {
            Outbound::Ready => self.buf.extend_from_slice(br#"{"type":"ready"}"#),
            Outbound::Response(r) => serde_json::to_writer(&mut self.buf, r)?,
            Outbound::Frame(f) => serde_json::to_writer(&mut self.buf, f)?,
            Outbound::Event(ev) => self.encode_event(ev)?,
        }
        escape_line_separators(&mut self.buf);
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)
    }

    /// Writes a frame and drops it. After an outsized one (a long `get_messages`), the buffer
    /// and the frame's memory go back to the system instead of staying resident for good.
    fn write_owned(&mut self, frame: Outbound) -> std::io::Result<()> {
        self.write(&frame)?;
        drop(frame);
        if self.buf.capacity() > BUF_KEEP {
            self.buf = Vec::with_capacity(4096);
            crate::memory::release_free_pages();
        }
        Ok(())
    }

    fn encode_event(&mut self, event: &AgentEvent) -> std::io::Result<()> {
        self.seq += 1;
        let frame_id = crate::ids::uuid_v4();
        let (seq, session_id) = (self.seq, self.session_id.as_str());
        if let AgentEvent::MessageUpdate {
            message: _,
            assistant_message_event,
            compact: true,
        } = event
        {
            let payload = CompactPayload {
                event_type: "message_update",
                compact: true,
                message_id: Value::Null,
                content_index: assistant_message_event.content_index(),
                assistant_message_event,
            };
            let frame = EventFrame {
                kind: "event",
                protocol_version: PROTOCOL_VERSION,
                session_id,
                seq,
                frame_id,
                payload,
            };
            return serde_json::to_writer(&mut self.buf, &frame).map_err(Into::into);
        }
        let payload = Payload {
            event_type: event.kind(),
            event,
        };
        let frame = EventFrame {
            kind: "event",
            protocol_version: PROTOCOL_VERSION,
            session_id,
            seq,
            frame_id,
            payload,
        };
        serde_json::to_writer(&mut self.buf, &frame).map_err(Into::into)
    }
}

/// JSON allows raw U+2028/U+2029 in strings, but JavaScript line readers split on them. They can
/// only occur inside strings here, so replacing their UTF-8 bytes with escapes keeps the JSON valid.
/// Frames can be megabytes (`get_messages`), so the scan jumps between 0xE2 lead bytes.
fn escape_line_separators(buf: &mut Vec<u8>) {
    let is_separator = |at: usize| matches!(buf.get(at..at + 3), Some([0xe2, 0x80, 0xa8 | 0xa9]));
    let Some(first) = memchr::memchr_iter(0xe2, buf).find(|&i| is_separator(i)) else {
        return;
    };
    let mut out = Vec::with_capacity(buf.len() + 16);
    out.extend_from_slice(&buf[..first]);
    let mut i = first;
    while i < buf.len() {
        if is_separator(i) {
            out.extend_from_slice(if buf[i + 2] == 0xa8 {
                b"\\u2028"
            } else {
                b"\\u2029"
            });
            i += 3;
            continue;
        }
        let next = memchr::memchr(0xe2, &buf[i + 1..]).map_or(buf.len(), |n| i + 1 + n);
        out.extend_from_slice(&buf[i..next]);
        i = next;
    }
    *buf = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Response;

    fn written(frames: &[Outbound]) -> Vec<Value> {
        let mut out = Vec::new();
        {
            let mut w = Writer::new(&mut out, "sess".into());
            for f in frames {
                w.write(f).unwrap();
            }
            w.out.flush().unwrap();
        }
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn events_get_monotonic_seq_and_unique_frame_ids() {
        let frames = written(&[
            Outbound::Ready,
            Outbound::Event(Box::new(AgentEvent::AgentStart {})),
            Outbound::Response(Response::ok(None, "x", None)),
            Outbound::Event(Box::new(AgentEvent::TurnStart {})),
        ]);
        assert_eq!(frames[0], serde_json::json!({"type":"ready"}));
        assert_eq!(frames[1]["seq"], 1);
        assert_eq!(frames[3]["seq"], 2);
        assert_eq!(frames[1]["protocol_version"], 2);
        assert_eq!(frames[1]["session_id"], "sess");
        assert_eq!(frames[3]["payload"]["event_type"], "turn_start");
        assert_eq!(frames[3]["payload"]["event"]["type"], "turn_start");
        assert_ne!(frames[1]["frame_id"], frames[3]["frame_id"]);
        assert!(frames[2].get("seq").is_none());
    }

    #[test]
    fn line_separators_are_escaped() {
        let r = Response::err(None, "parse", "a\u{2028}b\u{2029}c\u{20ac}\u{2028}");
        let mut out = Vec::new();
        {
            let mut w = Writer::new(&mut out, "s".into());
            w.write(&Outbound::Response(r)).unwrap();
            w.out.flush().unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("a\\u2028b\\u2029c\u{20ac}\\u2028"), "{text}");
        let v: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(v["error"], "a\u{2028}b\u{2029}c\u{20ac}\u{2028}");
    }
}
