//! Reading a session file's entry lines. A long file is cut at a line boundary into one range per
//! core and each range is parsed on its own short-lived thread (`gjc-load`): parsing is most of
//! what switching to a long session costs, and the ranges share nothing but the open file, which
//! each reads with positioned reads.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileExt;

/// Ranges shorter than this are not worth a thread.
const MIN_PART: u64 = 1 << 20;
/// More threads than this would only compete with the host reading the response.
const MAX_PARTS: usize = 4;

/// What a scan yielded: one item per non-blank line, in file order.
pub struct Scanned<T> {
    pub items: Vec<T>,
    /// The length of an unparsable last line, skipped as a torn write.
    pub torn: Option<usize>,
}

#[derive(Debug)]
pub enum ScanError {
    Io(String),
    /// A line that does not parse and is not the last one; `line` counts from 1 at the scan's
    /// first line.
    Corrupt {
        line: usize,
        error: String,
    },
}

/// Parses every non-blank line of `file` from `from` up to `to` (exclusive) with `parse`, which
/// gets the line without its newline and the line's offset in the file. A line that does not
/// parse is a torn write when no non-blank line follows it, and corruption otherwise.
pub fn scan<T, P>(file: &File, from: u64, to: u64, parse: &P) -> Result<Scanned<T>, ScanError>
where
    T: Send,
    P: Fn(&[u8], u64) -> serde_json::Result<T> + Sync,
{
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parts = cores
        .min(MAX_PARTS)
        .min(((to - from) / MIN_PART) as usize)
        .max(1);
    scan_in_parts(file, from, to, parts, parse)
}

fn scan_in_parts<T, P>(
    file: &File,
    from: u64,
    to: u64,
    parts: usize,
    parse: &P,
) -> Result<Scanned<T>, ScanError>
where
    T: Send,
    P: Fn(&[u8], u64) -> serde_json::Result<T> + Sync,
{
    let bounds = split(file, from, to, parts).map_err(|e| ScanError::Io(e.to_string()))?;
    let parts: Vec<Result<Part<T>, ScanError>> = if bounds.len() <= 2 {
        vec![scan_part(file, from, to, parse)]
    } else {
        std::thread::scope(|scope| {
            let workers: Vec<_> = bounds[1..]
                .windows(2)
                .map(|w| {
                    let (start, end) = (w[0], w[1]);
                    let worker = std::thread::Builder::new()
                        .name("gjc-load".into())
                        .spawn_scoped(scope, move || scan_part(file, start, end, parse));
                    (start, end, worker)
                })
                .collect();
            let first = scan_part(file, bounds[0], bounds[1], parse);
            // A range whose thread could not start is read here instead.
            let rest = workers
                .into_iter()
                .map(|(start, end, worker)| match worker {
                    Ok(handle) => handle.join().unwrap_or_else(|_| {
                        Err(ScanError::Io("a session-loading thread panicked".into()))
                    }),
                    Err(_) => scan_part(file, start, end, parse),
                });
            std::iter::once(first).chain(rest).collect()
        })
    };
    merge(parts)
}

/// `from`, a line start near each equal share of the range, and `to`.
fn split(file: &File, from: u64, to: u64, parts: usize) -> std::io::Result<Vec<u64>> {
    let mut bounds = vec![from];
    for k in 1..parts {
        let guess = from + (to - from) * k as u64 / parts as u64;
        match next_line_start(file, guess.max(*bounds.last().unwrap()), to)? {
            Some(at) if at < to => bounds.push(at),
            _ => break,
        }
    }
    bounds.push(to);
    Ok(bounds)
}

/// The offset just past the first newline at or after `at`, if there is one before `to`.
fn next_line_start(file: &File, mut at: u64, to: u64) -> std::io::Result<Option<u64>> {
    let mut block = vec![0u8; 64 * 1024];
    while at < to {
        let want = block.len().min((to - at) as usize);
        let n = file.read_at(&mut block[..want], at)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = memchr::memchr(b'\n', &block[..n]) {
            return Ok(Some(at + i as u64 + 1));
        }
        at += n as u64;
    }
    Ok(None)
}

/// One range's result: its items, how many lines it had (blank ones too, for line numbers),
/// and an unparsable last line if there was one.
struct Part<T> {
    items: Vec<T>,
    lines: usize,
    unparsed: Option<(usize, usize, String)>,
}

fn scan_part<T, P>(file: &File, from: u64, to: u64, parse: &P) -> Result<Part<T>, ScanError>
where
    P: Fn(&[u8], u64) -> serde_json::Result<T>,
{
    let mut lines = Lines::new(file, from, to);
    let mut part = Part {
        items: Vec::new(),
        lines: 0,
        unparsed: None,
    };
    while lines.advance().map_err(|e| ScanError::Io(e.to_string()))? {
        part.lines += 1;
        if lines.line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if let Some((line, _, error)) = part.unparsed.take() {
            return Err(ScanError::Corrupt { line, error });
        }
        match parse(&lines.line, lines.offset) {
            Ok(item) => part.items.push(item),
            Err(e) => part.unparsed = Some((part.lines, lines.line.len(), e.to_string())),
        }
    }
    Ok(part)
}

/// Joins the parts in order: an unparsable line at the end of one part is corruption when a
/// later part has any line, and line numbers run on across parts.
fn merge<T>(parts: Vec<Result<Part<T>, ScanError>>) -> Result<Scanned<T>, ScanError> {
    let mut items = Vec::new();
    let mut before = 0;
    let mut pending: Option<(usize, usize, String)> = None;
    for part in parts {
        let part = part.map_err(|e| match e {
            ScanError::Corrupt { line, error } => ScanError::Corrupt {
                line: before + line,
                error,
            },
            io => io,
        })?;
        if !part.items.is_empty() || part.unparsed.is_some() {
            if let Some((line, _, error)) = pending.take() {
                return Err(ScanError::Corrupt { line, error });
            }
        }
        if items.is_empty() {
            items = part.items;
        } else {
            items.extend(part.items);
        }
        if let Some((line, len, error)) = part.unparsed {
            pending = Some((before + line, len, error));
        }
        before += part.lines;
    }
    Ok(Scanned {
        items,
        torn: pending.map(|(_, len, _)| len),
    })
}

/// The lines of a range of a file, each with its offset, the newline removed.
pub struct Lines<'f> {
    reader: BufReader<Range<'f>>,
    pub line: Vec<u8>,
    /// Where `line` starts in the file.
    pub offset: u64,
    next: u64,
}

impl<'f> Lines<'f> {
    pub fn new(file: &'f File, from: u64, to: u64) -> Lines<'f> {
        Lines {
            reader: BufReader::with_capacity(
                256 * 1024,
                Range {
                    file,
                    at: from,
                    end: to,
                },
            ),
            line: Vec::new(),
            offset: from,
            next: from,
        }
    }

    /// Reads the next line into `line`; false at the end of the range.
    pub fn advance(&mut self) -> std::io::Result<bool> {
        self.line.clear();
        let n = self.reader.read_until(b'\n', &mut self.line)?;
        self.offset = self.next;
        self.next += n as u64;
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        }
        Ok(n > 0)
    }

    /// Where the line after the current one starts.
    pub fn position(&self) -> u64 {
        self.next
    }
}

/// A byte range of a file read with positioned reads, so several can read one file at once.
struct Range<'f> {
    file: &'f File,
    at: u64,
    end: u64,
}

impl Read for Range<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(self.end.saturating_sub(self.at) as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file of `lines`, each line's text parsed as a JSON number.
    fn file_of(lines: &[String]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        f
    }

    /// The file's lines as numbers with their offsets, read in three parts.
    fn numbers(f: &File) -> Result<Scanned<(u64, u64)>, ScanError> {
        let len = f.metadata().unwrap().len();
        scan_in_parts(f, 0, len, 3, &|line, offset| {
            serde_json::from_slice(line).map(|n| (n, offset))
        })
    }

    fn many() -> Vec<String> {
        (0..3_000u64).map(|n| format!("{n:>7}")).collect()
    }

    #[test]
    fn parts_join_in_order_with_offsets() {
        let lines = many();
        let f = file_of(&lines);
        let got = numbers(f.as_file()).unwrap();
        assert_eq!(got.items.len(), lines.len());
        for (i, (n, offset)) in got.items.iter().enumerate() {
            assert_eq!((*n, *offset), (i as u64, i as u64 * 8));
        }
        assert_eq!(got.torn, None);
    }

    #[test]
    fn a_bad_line_anywhere_but_the_end_is_corruption_with_its_line_number() {
        let mut lines = many();
        // At, before and after the boundaries between the parts (near lines 1,000 and 2,000),
        // with a blank line before each.
        for at in [1, 999, 1_000, 1_001, 1_999, 2_000, 2_001, 2_998] {
            let mut damaged = lines.clone();
            damaged[at] = "{broken".into();
            damaged[at - 1] = String::new();
            let f = file_of(&damaged);
            match numbers(f.as_file()) {
                Err(ScanError::Corrupt { line, .. }) => assert_eq!(line, at + 1),
                other => panic!("line {at}: {:?}", other.map(|s| s.items.len())),
            }
        }
        lines[2_999] = "{tor".into();
        lines.push(String::new());
        let f = file_of(&lines);
        let got = numbers(f.as_file()).unwrap();
        assert_eq!((got.items.len(), got.torn), (2_999, Some(4)));
    }
}
