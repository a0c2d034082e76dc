//! The line reader below both front ends: one LF-terminated line at a time with a byte cap, the
//! bytes of an over-long line discarded as they arrive (RPC's `gjc-stdin` and ACP's `gjc-acp-in`
//! read stdin with it).

use std::io::{BufRead, ErrorKind};

pub enum LineRead {
    Line,
    Eof,
    /// The line was longer than the cap; its bytes were discarded as they arrived.
    TooLong(usize),
}

/// Reads one LF-terminated line into `line` (without the LF). A final line without LF counts.
pub fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead> {
    line.clear();
    let mut seen = 0usize;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(match seen {
                0 => LineRead::Eof,
                n if n > max => LineRead::TooLong(n),
                _ => LineRead::Line,
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        seen += chunk.len();
        if seen <= max {
            line.extend_from_slice(chunk);
        } else if !line.is_empty() {
            line.clear();
            line.shrink_to(64 * 1024);
        }
        let used = done.unwrap_or(chunk.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(if seen > max {
                LineRead::TooLong(seen)
            } else {
                LineRead::Line
            });
        }
    }
}
