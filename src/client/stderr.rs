//! gjc's stderr, read on its own thread: forwarded to the `log` facade (the default), to this
//! process's stderr with a prefix, or discarded.

use std::io::{BufRead, BufReader, Read};

/// Where gjc's stderr goes.
#[derive(Debug, Clone)]
pub enum StderrTo {
    /// Each line becomes a `log` record with target `gjc`, at the level the line names (gjc's
    /// log lines carry `ERROR`, `WARN`, ... after their timestamp), else `Info`.
    Log,
    /// Each line is written to this process's stderr after the prefix.
    Prefixed(String),
    /// Not read at all (`Stdio::null()`).
    Discard,
}

/// Longest stderr line kept whole; the rest of a longer line is dropped, so a child that writes
/// without newlines cannot grow this process's memory.
const MAX_LINE: u64 = 64 * 1024;

/// Reads `stderr` to its end on a named thread.
pub fn forward(stderr: impl Read + Send + 'static, to: StderrTo) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("rpc-client-stderr".into())
        .spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if line.last() != Some(&b'\n') && line.len() as u64 == MAX_LINE {
                    skip_rest_of_line(&mut reader);
                }
                let text = String::from_utf8_lossy(&line);
                emit(&to, text.trim_end_matches(['\n', '\r']));
            }
        })?;
    Ok(())
}

fn skip_rest_of_line(reader: &mut impl BufRead) {
    let mut sink = Vec::new();
    loop {
        sink.clear();
        match reader.take(MAX_LINE).read_until(b'\n', &mut sink) {
            Ok(n) if n > 0 && sink.last() != Some(&b'\n') => continue,
            _ => return,
        }
    }
}

fn emit(to: &StderrTo, line: &str) {
    match to {
        StderrTo::Log => log::log!(target: "gjc", level_of(line), "{line}"),
        StderrTo::Prefixed(prefix) => eprintln!("{prefix}{line}"),
        StderrTo::Discard => {}
    }
}

/// The level an env_logger line names among its first words (`[2026-06-05T05:00:00Z WARN gjc]`).
pub fn level_of(line: &str) -> log::Level {
    line.split([' ', '[', ']'])
        .take(4)
        .find_map(|word| word.parse().ok())
        .unwrap_or(log::Level::Info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_come_from_the_line() {
        assert_eq!(
            level_of("[2026-06-05T05:00:00Z WARN  gjc::provider] retry"),
            log::Level::Warn
        );
        assert_eq!(level_of("[x ERROR gjc] boom"), log::Level::Error);
        assert_eq!(level_of("thread panicked"), log::Level::Info);
    }
}
