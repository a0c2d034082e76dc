//! The `gjc-stdin` thread: reads stdin line by line with a size cap, decodes each line and routes
//! it. Cancellations go to the control lane, host replies to `gjc-host`, everything else (including
//! ready-made error responses, so they keep their place in the order) to the command lane.
//! At EOF it drops its senders; the session sees the command lane disconnect after draining it.

use std::io::{BufRead, ErrorKind, Read};

use crossbeam_channel::Sender;

use crate::host::HostRequest;
use crate::protocol::{decode_line, Inbound, Response, MAX_LINE_BYTES};
use crate::session::{CommandFrame, ControlFrame};

pub struct StdinRoutes {
    pub control: Sender<ControlFrame>,
    pub commands: Sender<CommandFrame>,
    pub host: Sender<HostRequest>,
}

/// Reads until EOF (or a read error, which is treated the same).
pub fn run(input: impl Read, routes: StdinRoutes, max_line: usize) {
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        match read_line(&mut reader, &mut line, max_line) {
            Ok(LineRead::Eof) => break,
            Ok(LineRead::Line) => route(decode_line(&line), &routes),
            Ok(LineRead::TooLong(len)) => {
                let msg = format!(
                    "Failed to parse command: line of {len} bytes exceeds the {max_line}-byte limit"
                );
                route(
                    Some(Inbound::Invalid(Response::err(None, "parse", msg))),
                    &routes,
                );
            }
            Err(e) => {
                log::warn!("stdin read failed: {e}");
                break;
            }
        }
    }
    log::debug!("stdin closed");
}

/// The line cap: `GJC_MAX_LINE_BYTES` when set, else 64 MiB.
pub fn default_max_line() -> usize {
    std::env::var("GJC_MAX_LINE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(MAX_LINE_BYTES)
}

fn route(inbound: Option<Inbound>, routes: &StdinRoutes) {
    let Some(inbound) = inbound else { return };
    // Send failures mean the receiving thread has gone (shutdown); nothing is left to do.
    match inbound {
        Inbound::Command { id, command } if command.is_control() => {
            let _ = routes.control.send(ControlFrame::Command { id, command });
        }
        Inbound::Command { id, command } => {
            let _ = routes.commands.send(CommandFrame::Command { id, command });
        }
        Inbound::HostReply(reply) => {
            let _ = routes.host.send(HostRequest::Reply(reply));
        }
        Inbound::Invalid(response) => {
            let _ = routes.commands.send(CommandFrame::Invalid(response));
        }
    }
}

enum LineRead {
    Line,
    Eof,
    /// The line was longer than the cap; its bytes were discarded as they arrived.
    TooLong(usize),
}

/// Reads one LF-terminated line into `line` (without the LF). A final line without LF counts.
fn read_line(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Result<Vec<u8>, usize>> {
        let mut r = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        let mut line = Vec::new();
        loop {
            match read_line(&mut r, &mut line, max).unwrap() {
                LineRead::Eof => return out,
                LineRead::Line => out.push(Ok(line.clone())),
                LineRead::TooLong(n) => out.push(Err(n)),
            }
        }
    }

    #[test]
    fn splits_on_lf_and_keeps_last_unterminated_line() {
        let got = lines(b"ab\ncd\r\n\nef", 100);
        assert_eq!(
            got,
            vec![
                Ok(b"ab".to_vec()),
                Ok(b"cd\r".to_vec()),
                Ok(vec![]),
                Ok(b"ef".to_vec())
            ]
        );
    }

    #[test]
    fn oversize_lines_are_reported_and_skipped() {
        let got = lines(b"0123456789\nok\n", 5);
        assert_eq!(got, vec![Err(10), Ok(b"ok".to_vec())]);
    }

    #[test]
    fn u2028_is_not_a_line_break() {
        let got = lines("a\u{2028}b\n".as_bytes(), 100);
        assert_eq!(got.len(), 1);
    }
}
