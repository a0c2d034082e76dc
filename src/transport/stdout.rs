//! The `gjc-stdout` thread: the only writer of stdout. It owns the event envelope (`seq`,
//! `frame_id`, `protocol_version`), writes one JSON object and `\n` per frame, escapes U+2028 and
//! U+2029, and flushes whenever its queue is empty, which batches bursts without adding latency.
//!
//! It also follows the assistant message being streamed (from its `message_start`, through every
//! delta) and builds each `message_update`'s snapshot itself, so the session thread never pays for
//! snapshots and the output lane holds deltas, not copies of the message.
#![allow(clippy::print_stdout)]

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use crate::output::OutRx;
use crate::protocol::event::write_message_update;
use crate::protocol::message::{AgentMessage, AssistantMessage, MessageRef, StreamEvent};
use crate::protocol::{AgentEvent, Data, Outbound};

pub use crate::protocol::PROTOCOL_VERSION;

/// The frame buffer is reused; past this capacity it is given back after the frame.
const BUF_KEEP: usize = 1 << 20;

/// Response payloads at least this large, and all assembled ones, are written straight from the
/// response, not copied into the frame buffer first (`get_messages` of a long session is
/// megabytes).
const DIRECT_DATA: usize = 64 * 1024;

pub struct Writer<W: Write> {
    out: std::io::BufWriter<W>,
    session_id: String,
    /// `Settings::emit_title`: whether `setTitle` requests are written.
    titles: bool,
    seq: u64,
    buf: Vec<u8>,
    /// The assistant message being streamed, as the host has been told of it so far.
    partial: Option<AssistantMessage>,
    /// Where its snapshot is serialized, once per `message_update`.
    snapshot: Vec<u8>,
}

/// An event frame without its payload (which the writer appends itself).
#[derive(Serialize)]
struct EnvelopeHead<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    protocol_version: u32,
    session_id: &'a str,
    seq: u64,
    frame_id: String,
}

#[derive(Serialize)]
struct Payload<E: Serialize> {
    event_type: &'static str,
    event: E,
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
    pub fn new(out: W, session_id: String, titles: bool) -> Writer<W> {
        Writer {
            out: std::io::BufWriter::with_capacity(64 * 1024, out),
            session_id,
            titles,
            seq: 0,
            buf: Vec::with_capacity(4096),
            partial: None,
            snapshot: Vec::new(),
        }
    }

    /// Writes frames until every sender is gone or stdout fails. Returns the write error, if any.
    pub fn run(mut self, frames: OutRx) -> std::io::Result<()> {
        while let Some(queued) = frames.recv() {
            let cost = queued.cost();
            let written = self.write_owned(queued.frame);
            frames.written(cost);
            written?;
            loop {
                match frames.try_recv() {
                    Ok(queued) => {
                        let cost = queued.cost();
                        let written = self.write_owned(queued.frame);
                        frames.written(cost);
                        written?;
                    }
                    Err(true) => return self.out.flush(),
                    Err(false) => break,
                }
            }
            self.out.flush()?;
        }
        self.out.flush()
    }

    pub fn write(&mut self, frame: &Outbound) -> std::io::Result<()> {
        self.buf.clear();
        if let Outbound::Response(r) = frame {
            let direct =
                |d: &&Data| matches!(d, Data::Assembled(_)) || d.get().len() >= DIRECT_DATA;
            if let Some(data) = r.data.as_ref().filter(direct) {
                return self.write_with_data(r, data.get().as_bytes());
            }
        }
        match frame {
            Outbound::Ready => {
                serde_json::to_writer(&mut self.buf, &crate::protocol::Ready::new())?
            }
            Outbound::Response(r) => serde_json::to_writer(&mut self.buf, r)?,
            Outbound::Frame(f) => serde_json::to_writer(&mut self.buf, f)?,
            Outbound::Show(show) => match super::render::render(show, self.titles) {
                Some(f) => serde_json::to_writer(&mut self.buf, &f)?,
                None => return Ok(()),
            },
            // RPC mode never offers a terminal (no policy enables one), so none is asked for.
            Outbound::Terminal(_) => return Ok(()),
            Outbound::Event(ev) => {
                if !self.follow(ev) {
                    return Ok(());
                }
                self.encode_event(ev)?
            }
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

    /// A response as its head (`{...,"data":`), its payload escaped on the way out, and `}`.
    /// The same bytes as serializing the whole response: `data` is its last field when present.
    fn write_with_data(
        &mut self,
        r: &crate::protocol::Response,
        data: &[u8],
    ) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.buf, &r.head())?;
        self.buf.pop();
        self.buf.extend_from_slice(b",\"data\":");
        escape_line_separators(&mut self.buf);
        self.out.write_all(&self.buf)?;
        for_each_escaped(data, |chunk| self.out.write_all(chunk))?;
        self.out.write_all(b"}\n")
    }

    /// Keeps the streamed assistant message up to date. Returns whether the event is written
    /// (a whole block that arrived without deltas only shows in the next snapshot).
    fn follow(&mut self, event: &AgentEvent) -> bool {
        match event {
            AgentEvent::MessageStart {
                message: AgentMessage::Assistant(m),
            } => self.partial = Some(m.clone()),
            AgentEvent::MessageEnd { .. } => {
                self.partial = None;
                if self.snapshot.capacity() > BUF_KEEP {
                    self.snapshot = Vec::new();
                }
            }
            AgentEvent::MessageUpdate {
                assistant_message_event: ev,
                ..
            } => {
                if let Some(p) = &mut self.partial {
                    p.apply(ev);
                }
                return !matches!(ev, StreamEvent::Block { .. });
            }
            _ => {}
        }
        true
    }

    /// `{type:"event", protocol_version, session_id, seq, frame_id, payload}`: the envelope's
    /// head, then the payload in the shape the event needs.
    fn encode_event(&mut self, event: &AgentEvent) -> std::io::Result<()> {
        self.seq += 1;
        let head = EnvelopeHead {
            kind: "event",
            protocol_version: PROTOCOL_VERSION,
            session_id: &self.session_id,
            seq: self.seq,
            frame_id: crate::ids::uuid_v4(),
        };
        serde_json::to_writer(&mut self.buf, &head)?;
        // Reopen the head object for its last field.
        self.buf.pop();
        self.buf.extend_from_slice(br#","payload":"#);
        match (event, &self.partial) {
            (
                AgentEvent::MessageUpdate {
                    assistant_message_event,
                    compact: true,
                },
                _,
            ) => {
                let payload = CompactPayload {
                    event_type: "message_update",
                    compact: true,
                    message_id: Value::Null,
                    content_index: assistant_message_event.content_index(),
                    assistant_message_event,
                };
                serde_json::to_writer(&mut self.buf, &payload)?;
            }
            (
                AgentEvent::MessageUpdate {
                    assistant_message_event,
                    ..
                },
                Some(partial),
            ) => {
                self.snapshot.clear();
                serde_json::to_writer(&mut self.snapshot, &MessageRef::Assistant(partial))?;
                self.buf
                    .extend_from_slice(br#"{"event_type":"message_update","event":"#);
                write_message_update(&mut self.buf, &self.snapshot, assistant_message_event)?;
                self.buf.push(b'}');
            }
            _ => {
                let payload = Payload {
                    event_type: event.kind(),
                    event,
                };
                serde_json::to_writer(&mut self.buf, &payload)?;
            }
        }
        self.buf.push(b'}');
        Ok(())
    }
}

/// Asks for a 1 MiB stdout pipe (when stdout is a pipe; best effort, the kernel may refuse): a
/// multi-megabyte frame then goes out in a few large writes instead of hundreds of 64 KiB turns
/// with the reader.
pub fn widen_pipe() {
    #[cfg(target_os = "linux")]
    // SAFETY: F_SETPIPE_SZ only resizes the pipe's buffer; on anything else it fails harmlessly.
    unsafe {
        libc::fcntl(libc::STDOUT_FILENO, libc::F_SETPIPE_SZ, 1 << 20);
    }
}

/// JSON allows raw U+2028/U+2029 in strings, but JavaScript line readers split on them. They can
/// only occur inside strings here, so replacing their UTF-8 bytes with escapes keeps the JSON valid.
fn escape_line_separators(buf: &mut Vec<u8>) {
    if find_separator(buf).is_none() {
        return;
    }
    let mut out = Vec::with_capacity(buf.len() + 16);
    for_each_escaped(buf, |chunk| {
        out.extend_from_slice(chunk);
        Ok(())
    })
    .expect("writing to a Vec does not fail");
    *buf = out;
}

fn is_separator(bytes: &[u8], at: usize) -> bool {
    matches!(bytes.get(at..at + 3), Some([0xe2, 0x80, 0xa8 | 0xa9]))
}

/// Frames can be megabytes, so the scans jump between 0xE2 lead bytes.
fn find_separator(bytes: &[u8]) -> Option<usize> {
    memchr::memchr_iter(0xe2, bytes).find(|&i| is_separator(bytes, i))
}

/// Hands `bytes` to `emit` in chunks, with each line separator replaced by its escape.
fn for_each_escaped(
    mut bytes: &[u8],
    mut emit: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    while let Some(at) = find_separator(bytes) {
        emit(&bytes[..at])?;
        emit(if bytes[at + 2] == 0xa8 {
            b"\\u2028"
        } else {
            b"\\u2029"
        })?;
        bytes = &bytes[at + 3..];
    }
    emit(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Response;

    fn written(frames: &[Outbound]) -> Vec<Value> {
        let mut out = Vec::new();
        {
            let mut w = Writer::new(&mut out, "sess".into(), false);
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
            Outbound::Response(Response::done(None, "x")),
            Outbound::Event(Box::new(AgentEvent::TurnStart {})),
        ]);
        assert_eq!(frames[0]["type"], "ready");
        assert_eq!(frames[0]["protocol_version"], 2);
        assert_eq!(frames[0]["version"], env!("CARGO_PKG_VERSION"));
        assert!(frames[0]["capabilities"].is_array());
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
    fn large_payloads_are_written_as_the_whole_response_would_be() {
        let text = format!(
            "{}\u{2028}{}",
            "x".repeat(DIRECT_DATA),
            "\u{20ac}".repeat(10)
        );
        let data = serde_json::json!({"messages": [text, "a\u{2029}"]});
        let r = Response::ok(
            Some(serde_json::json!("id\u{2028}1")),
            "get_messages",
            Some(&data),
        );
        let mut direct = Vec::new();
        {
            let mut w = Writer::new(&mut direct, "s".into(), false);
            w.write(&Outbound::Response(r.clone())).unwrap();
            w.out.flush().unwrap();
        }
        let mut whole = serde_json::to_vec(&r).unwrap();
        escape_line_separators(&mut whole);
        whole.push(b'\n');
        assert_eq!(
            String::from_utf8(direct).unwrap(),
            String::from_utf8(whole).unwrap()
        );
    }

    #[test]
    fn line_separators_are_escaped() {
        let r = Response::err(None, "parse", "a\u{2028}b\u{2029}c\u{20ac}\u{2028}");
        let mut out = Vec::new();
        {
            let mut w = Writer::new(&mut out, "s".into(), false);
            w.write(&Outbound::Response(r)).unwrap();
            w.out.flush().unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("a\\u2028b\\u2029c\u{20ac}\\u2028"), "{text}");
        let v: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(v["error"], "a\u{2028}b\u{2029}c\u{20ac}\u{2028}");
    }
}
