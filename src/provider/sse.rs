//! Server-Sent Events decoding over any `BufRead`, shared by every provider. Lines end at CRLF, LF
//! or a lone CR; bytes are decoded as UTF-8 only after a whole line is assembled, so characters
//! split across network reads survive; a pending event is dispatched at EOF.

use std::io::{BufRead, ErrorKind};

pub use crate::settings::SseLimits;

/// Why a stream could not be read.
#[derive(Debug)]
pub enum SseError {
    Io(std::io::Error),
    /// A line or an event grew past its limit; reading stopped there, nothing more was buffered.
    TooLarge {
        what: &'static str,
        limit: usize,
        setting: &'static str,
    },
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::Io(e) => write!(f, "{e}"),
            SseError::TooLarge {
                what,
                limit,
                setting,
            } => write!(
                f,
                "the provider sent an {what} over the limit of {} ({setting}); stream abandoned",
                size(*limit)
            ),
        }
    }
}

impl From<std::io::Error> for SseError {
    fn from(e: std::io::Error) -> SseError {
        SseError::Io(e)
    }
}

fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

pub struct SseReader<R> {
    reader: R,
    limits: SseLimits,
    line: Vec<u8>,
    /// A CR ended the previous line; a LF right after it belongs to the same line ending.
    after_cr: bool,
    done: bool,
    /// The stream's last event id (the `id` field; it stays until another one replaces it).
    last_id: Option<String>,
    /// The reconnection time the stream asked for (`retry`, in milliseconds).
    retry: Option<u64>,
}

impl<R: BufRead> SseReader<R> {
    /// A reader with the default limits.
    pub fn new(reader: R) -> SseReader<R> {
        SseReader::with_limits(reader, SseLimits::default())
    }

    pub fn with_limits(reader: R, limits: SseLimits) -> SseReader<R> {
        SseReader {
            reader,
            limits,
            line: Vec::new(),
            after_cr: false,
            done: false,
            last_id: None,
            retry: None,
        }
    }

    /// The last event id the stream gave (an empty `id` field clears it), for resuming it.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref().filter(|id| !id.is_empty())
    }

    /// The reconnection time the stream asked for, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The next event, `Ok(None)` at EOF. Comment lines are skipped; `on_comment` is not needed by
    /// the providers, which treat only data as progress.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        let mut event = SseEvent::default();
        let mut has_data = false;
        loop {
            let Some(line) = self.next_line()? else {
                return Ok((has_data || event.event.is_some()).then_some(event));
            };
            if line.is_empty() {
                if has_data || event.event.is_some() {
                    return Ok(Some(event));
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field_end, value_start) = split_field(&line);
            match &line[..field_end] {
                "data" => {
                    let joined =
                        event.data.len() + usize::from(has_data) + line.len() - value_start;
                    if joined > self.limits.event {
                        return Err(SseError::TooLarge {
                            what: "SSE event",
                            limit: self.limits.event,
                            setting: "GJC_SSE_MAX_EVENT_BYTES",
                        });
                    }
                    if has_data {
                        event.data.push('\n');
                        event.data.push_str(&line[value_start..]);
                    } else {
                        // The first line's buffer becomes the data: a large payload is not copied.
                        let mut line = line;
                        line.drain(..value_start);
                        event.data = line;
                    }
                    has_data = true;
                }
                "event" => event.event = Some(line[value_start..].to_string()),
                // As the SSE standard says: an id holding NUL is ignored, a retry must be digits.
                "id" if !line[value_start..].contains('\0') => {
                    self.last_id = Some(line[value_start..].to_string());
                }
                "retry" => {
                    let value = &line[value_start..];
                    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
                        self.retry = Some(value.parse().unwrap_or(u64::MAX));
                    }
                }
                _ => {}
            }
        }
    }

    fn next_line(&mut self) -> Result<Option<String>, SseError> {
        if self.done {
            return Ok(None);
        }
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if buf.is_empty() {
                self.done = true;
                return Ok((!self.line.is_empty()).then(|| self.take_line()));
            }
            let mut start = 0;
            if self.after_cr {
                self.after_cr = false;
                if buf[0] == b'\n' {
                    start = 1;
                }
            }
            let end = buf[start..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .map(|i| start + i);
            let piece = end.unwrap_or(buf.len()) - start;
            // Checked before the bytes are kept: an endless line costs at most the limit.
            if self.line.len() + piece > self.limits.line {
                self.line = Vec::new();
                self.done = true;
                return Err(SseError::TooLarge {
                    what: "SSE line",
                    limit: self.limits.line,
                    setting: "GJC_SSE_MAX_LINE_BYTES",
                });
            }
            match end {
                Some(end) => {
                    self.line.extend_from_slice(&buf[start..end]);
                    self.after_cr = buf[end] == b'\r';
                    self.reader.consume(end + 1);
                    return Ok(Some(self.take_line()));
                }
                None => {
                    self.line.extend_from_slice(&buf[start..]);
                    let n = buf.len();
                    self.reader.consume(n);
                }
            }
        }
    }

    /// The assembled line as text (invalid UTF-8 replaced), leaving the buffer empty.
    fn take_line(&mut self) -> String {
        let bytes = std::mem::take(&mut self.line);
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// Where a line's field name ends and its value starts (one space after the colon is dropped).
fn split_field(line: &str) -> (usize, usize) {
    match line.find(':') {
        Some(i) if line[i + 1..].starts_with(' ') => (i, i + 2),
        Some(i) => (i, i + 1),
        None => (line.len(), line.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `chunk` bytes per read, to split lines anywhere.
    pub struct Chunked<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl std::io::Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn events(data: &[u8], chunk: usize) -> Vec<SseEvent> {
        let reader = std::io::BufReader::with_capacity(chunk.max(1), Chunked { data, chunk });
        let mut sse = SseReader::new(reader);
        let mut out = Vec::new();
        while let Some(e) = sse.next_event().unwrap() {
            out.push(e);
        }
        out
    }

    #[test]
    fn fields_comments_multiline_and_eof_flush() {
        let data =
            b": keep-alive\nevent: a\ndata: {\"x\":1}\n\ndata:one\ndata: two\r\n\r\ndata: last";
        for chunk in 1..8 {
            let got = events(data, chunk);
            assert_eq!(got.len(), 3, "chunk {chunk}");
            assert_eq!(
                got[0],
                SseEvent {
                    event: Some("a".into()),
                    data: "{\"x\":1}".into()
                }
            );
            assert_eq!(got[1].data, "one\ntwo");
            assert_eq!(got[2].data, "last");
        }
    }

    #[test]
    fn the_last_event_id_and_retry_are_kept_across_events() {
        let data =
            b"id: e1\nretry: 2500\ndata: a\n\ndata: b\n\nid: e2\nretry: x\n\ndata: c\n\nid\n\n";
        let mut sse = SseReader::new(&data[..]);
        assert_eq!(sse.last_event_id(), None);
        assert_eq!(sse.next_event().unwrap().unwrap().data, "a");
        assert_eq!((sse.last_event_id(), sse.retry()), (Some("e1"), Some(2500)));
        assert_eq!(sse.next_event().unwrap().unwrap().data, "b");
        assert_eq!(
            sse.last_event_id(),
            Some("e1"),
            "an event without id keeps the last one"
        );
        // An event of only an id is not dispatched, yet its id counts; a bad retry is ignored.
        assert_eq!(sse.next_event().unwrap().unwrap().data, "c");
        assert_eq!((sse.last_event_id(), sse.retry()), (Some("e2"), Some(2500)));
        assert!(sse.next_event().unwrap().is_none());
        assert_eq!(sse.last_event_id(), None, "an empty id clears it");
    }

    #[test]
    fn lone_cr_ends_lines_and_utf8_survives_splits() {
        let data = "data: 😊é\r\rdata: b\n\n".as_bytes();
        for chunk in 1..5 {
            let got = events(data, chunk);
            assert_eq!(got[0].data, "😊é");
            assert_eq!(got[1].data, "b");
        }
    }

    /// An endless stream of one byte that counts what was taken from it.
    struct Endless {
        byte: u8,
        taken: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl std::io::Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(self.byte);
            self.taken.set(self.taken.get() + buf.len());
            Ok(buf.len())
        }
    }

    #[test]
    fn an_endless_line_stops_at_the_limit_without_buffering_more() {
        let taken = std::rc::Rc::new(std::cell::Cell::new(0));
        let body = std::io::Read::chain(
            &b"data: "[..],
            Endless {
                byte: b'x',
                taken: taken.clone(),
            },
        );
        let limits = SseLimits {
            line: 1 << 20,
            event: 2 << 20,
        };
        let mut sse = SseReader::with_limits(std::io::BufReader::with_capacity(4096, body), limits);
        let err = sse.next_event().unwrap_err();
        assert_eq!(
            err.to_string(),
            "the provider sent an SSE line over the limit of 1 MiB \
             (GJC_SSE_MAX_LINE_BYTES); stream abandoned"
        );
        // Reading stopped within one buffer of the limit, and nothing is held any more.
        assert!(taken.get() <= (1 << 20) + 4096, "read {}", taken.get());
        assert_eq!(sse.line.capacity(), 0);
        assert!(sse.next_event().unwrap().is_none(), "the stream is over");
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes() {
        let limits = SseLimits {
            line: 16,
            event: 64,
        };
        let ok = b"data: 0123456789\n\n";
        for chunk in [1, 3, 16] {
            let reader = std::io::BufReader::with_capacity(chunk, Chunked { data: ok, chunk });
            let mut sse = SseReader::with_limits(reader, limits);
            assert_eq!(sse.next_event().unwrap().unwrap().data, "0123456789");
        }
        let long = b"data: 0123456789a\n\n";
        for chunk in [1, 3, 16] {
            let reader = std::io::BufReader::with_capacity(chunk, Chunked { data: long, chunk });
            let err = SseReader::with_limits(reader, limits).next_event();
            assert!(
                matches!(err, Err(SseError::TooLarge { limit: 16, .. })),
                "{err:?}"
            );
        }
    }

    #[test]
    fn an_event_joining_too_many_data_lines_fails() {
        let limits = SseLimits {
            line: 16,
            event: 20,
        };
        // Two lines of 9 bytes join to 19 (with the newline); a third would make 29.
        let data =
            b"data: 123456789\ndata: 123456789\n\ndata: 123456789\ndata: 123456789\ndata: 1\n\n";
        let reader = std::io::BufReader::new(&data[..]);
        let mut sse = SseReader::with_limits(reader, limits);
        assert_eq!(sse.next_event().unwrap().unwrap().data.len(), 19);
        let err = sse.next_event().unwrap_err();
        assert_eq!(
            err.to_string(),
            "the provider sent an SSE event over the limit of 20 bytes \
             (GJC_SSE_MAX_EVENT_BYTES); stream abandoned"
        );
    }
}
