//! Server-Sent Events decoding over any `BufRead`, shared by every provider. Lines end at CRLF, LF
//! or a lone CR; bytes are decoded as UTF-8 only after a whole line is assembled, so characters
//! split across network reads survive; a pending event is dispatched at EOF.

use std::io::{BufRead, ErrorKind};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

pub struct SseReader<R> {
    reader: R,
    line: Vec<u8>,
    /// A CR ended the previous line; a LF right after it belongs to the same line ending.
    after_cr: bool,
    done: bool,
}

impl<R: BufRead> SseReader<R> {
    pub fn new(reader: R) -> SseReader<R> {
        SseReader {
            reader,
            line: Vec::new(),
            after_cr: false,
            done: false,
        }
    }

    /// The next event, `Ok(None)` at EOF. Comment lines are skipped; `on_comment` is not needed by
    /// the providers, which treat only data as progress.
    pub fn next_event(&mut self) -> std::io::Result<Option<SseEvent>> {
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
            let (field, value) = match line.find(':') {
                Some(i) => (
                    &line[..i],
                    line[i + 1..].strip_prefix(' ').unwrap_or(&line[i + 1..]),
                ),
                None => (line.as_str(), ""),
            };
            match field {
                "data" => {
                    if has_data {
                        event.data.push('\n');
                    }
                    event.data.push_str(value);
                    has_data = true;
                }
                "event" => event.event = Some(value.to_string()),
                _ => {}
            }
        }
    }

    fn next_line(&mut self) -> std::io::Result<Option<String>> {
        if self.done {
            return Ok(None);
        }
        self.line.clear();
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                self.done = true;
                return Ok((!self.line.is_empty())
                    .then(|| String::from_utf8_lossy(&self.line).into_owned()));
            }
            let mut start = 0;
            if self.after_cr {
                self.after_cr = false;
                if buf[0] == b'\n' {
                    start = 1;
                }
            }
            match buf[start..].iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    let end = start + i;
                    self.line.extend_from_slice(&buf[start..end]);
                    self.after_cr = buf[end] == b'\r';
                    self.reader.consume(end + 1);
                    return Ok(Some(String::from_utf8_lossy(&self.line).into_owned()));
                }
                None => {
                    self.line.extend_from_slice(&buf[start..]);
                    let n = buf.len();
                    self.reader.consume(n);
                }
            }
        }
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
    fn lone_cr_ends_lines_and_utf8_survives_splits() {
        let data = "data: 😊é\r\rdata: b\n\n".as_bytes();
        for chunk in 1..5 {
            let got = events(data, chunk);
            assert_eq!(got[0].data, "😊é");
            assert_eq!(got[1].data, "b");
        }
    }
}
