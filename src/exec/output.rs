//! Bounded capture of a command's output: the last `tail_bytes` bytes stay in memory, and once
//! anything would be dropped the full output goes to a spill file, so memory stays flat however
//! much a command prints and truncation is exact wherever the pipe splits its chunks. Spill files
//! are created new (never through an existing name or link) and readable by their owner only.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// Output limits shared by the user `bash` command and the bash tool.
pub const TAIL_BYTES: usize = 50 * 1024;
pub const TAIL_LINES: usize = 2000;

pub struct OutputSink {
    tail: VecDeque<u8>,
    cap: usize,
    total_bytes: u64,
    total_lines: u64,
    /// `None` when there is nowhere to spill (the spill folder could not be made).
    spill_path: Option<PathBuf>,
    spill: Option<File>,
    spill_error: Option<String>,
}

/// What is left once a command has finished.
#[derive(Debug, Clone, PartialEq)]
pub struct Captured {
    pub output: String,
    pub truncated: bool,
    pub total_bytes: u64,
    pub total_lines: u64,
    pub full_output_path: Option<PathBuf>,
}

impl OutputSink {
    pub fn new(spill_path: Option<PathBuf>) -> OutputSink {
        OutputSink::with_cap(spill_path, TAIL_BYTES)
    }

    pub fn with_cap(spill_path: Option<PathBuf>, cap: usize) -> OutputSink {
        OutputSink {
            tail: VecDeque::with_capacity(cap.min(64 * 1024)),
            cap,
            total_bytes: 0,
            total_lines: 0,
            spill_path,
            spill: None,
            spill_error: None,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        self.total_lines += bytes.iter().filter(|b| **b == b'\n').count() as u64;
        if self.spill.is_none()
            && self.spill_error.is_none()
            && self.tail.len() + bytes.len() > self.cap
        {
            self.open_spill();
        }
        if let Some(f) = &mut self.spill {
            if let Err(e) = f.write_all(bytes) {
                self.spill_error = Some(e.to_string());
                self.spill = None;
            }
        }
        if bytes.len() >= self.cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.cap..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.cap);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// Starts the spill file with everything captured so far: nothing has been dropped yet.
    fn open_spill(&mut self) {
        let Some(path) = &self.spill_path else {
            self.spill_error = Some("no spill folder".into());
            return;
        };
        let opened = create_private(path).and_then(|mut f| {
            let (a, b) = self.tail.as_slices();
            f.write_all(a)?;
            f.write_all(b)?;
            Ok(f)
        });
        match opened {
            Ok(f) => self.spill = Some(f),
            Err(e) => self.spill_error = Some(e.to_string()),
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The tail as text: whole lines only (the first partial line is dropped when truncated), at
    /// most `TAIL_LINES` lines, invalid UTF-8 replaced.
    pub fn finish(mut self) -> Captured {
        if let Some(f) = &mut self.spill {
            let _ = f.flush();
        }
        let bytes: Vec<u8> = self.tail.iter().copied().collect();
        let cut = self.total_bytes > bytes.len() as u64;
        let (text, truncated) = tail_text(&bytes, cut);
        let full_output_path = self
            .spill_path
            .filter(|_| truncated && self.spill.is_some());
        if let Some(e) = &self.spill_error {
            log::warn!("bash output spill failed: {e}");
        }
        Captured {
            output: text,
            truncated,
            total_bytes: self.total_bytes,
            total_lines: self.total_lines,
            full_output_path,
        }
    }
}

/// The kept tail of an output as the model sees it: when its start was `cut`, the first
/// (partial) line is dropped; at most `TAIL_LINES` lines; invalid UTF-8 replaced. Also whether
/// anything is missing. The same rules whoever kept the tail (gjc's sink, an editor's terminal).
pub fn tail_text(bytes: &[u8], cut: bool) -> (String, bool) {
    let mut truncated = cut;
    let mut start = 0;
    if cut {
        if let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            if nl + 1 < bytes.len() {
                start = nl + 1;
            }
        }
    }
    let mut text = String::from_utf8_lossy(&bytes[start..]).into_owned();
    let lines = text.split_inclusive('\n').count();
    if lines > TAIL_LINES {
        let skip: usize = text
            .split_inclusive('\n')
            .take(lines - TAIL_LINES)
            .map(str::len)
            .sum();
        text.drain(..skip);
        truncated = true;
    }
    (text, truncated)
}

/// A new file only its owner can read: `O_EXCL` fails on any existing name (a planted file or
/// link), and `O_NOFOLLOW` says so again for links.
fn create_private(path: &std::path::Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(cap: usize) -> (OutputSink, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (
            OutputSink::with_cap(Some(dir.path().join("out.log")), cap),
            dir,
        )
    }

    #[test]
    fn spill_files_are_new_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let (mut s, dir) = sink(4);
        s.push(b"more than four bytes\n");
        let c = s.finish();
        let path = c.full_output_path.expect("spilled");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // A name that already exists, as a link, is refused rather than followed.
        let target = dir.path().join("target");
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut s = OutputSink::with_cap(Some(link), 4);
        s.push(b"more than four bytes\n");
        let c = s.finish();
        assert!(c.truncated && c.full_output_path.is_none());
        assert!(!target.exists(), "the link was followed");
    }

    #[test]
    fn small_output_is_kept_whole() {
        let (mut s, _d) = sink(100);
        s.push(b"hello\nworld\n");
        let c = s.finish();
        assert_eq!(c.output, "hello\nworld\n");
        assert!(!c.truncated);
        assert!(c.full_output_path.is_none());
    }

    #[test]
    fn truncation_is_exact_for_any_chunking() {
        let data: Vec<u8> = (0..500)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        for chunk in [1, 3, 7, 64, 1000, 5000] {
            let (mut s, _d) = sink(256);
            for c in data.chunks(chunk) {
                s.push(c);
            }
            let c = s.finish();
            assert!(c.truncated, "chunk {chunk}");
            assert!(c.output.ends_with("line 499\n"));
            assert!(
                c.output.starts_with("line "),
                "{chunk}: {:?}",
                &c.output[..10]
            );
            let full = std::fs::read(c.full_output_path.unwrap()).unwrap();
            assert_eq!(full, data, "chunk {chunk}");
            assert_eq!(c.total_bytes, data.len() as u64);
            assert_eq!(c.total_lines, 500);
        }
    }
}
