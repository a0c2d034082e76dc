//! Hostile input volumes: a 64 MiB line leaves no memory behind, a host that writes commands
//! without reading stdout is held back (its writes block) instead of growing a queue, and EOF
//! behind a full queue still ends the process only after every queued command is answered.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use serde_json::{json, Value};

use crate::support::{gjc, TIMEOUT};

pub const MIB: u64 = 1024 * 1024;

/// A field of /proc/<pid>/status (VmRSS, VmHWM), in bytes.
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// `{"id":"big","type":"get_state","pad":"xxx…"}` of exactly `len` bytes plus its LF.
pub fn padded_get_state(id: &str, len: usize) -> Vec<u8> {
    let head = format!("{{\"id\":\"{id}\",\"type\":\"get_state\",\"pad\":\"");
    let mut line = head.into_bytes();
    line.resize(len - 2, b'x');
    line.extend_from_slice(b"\"}\n");
    line
}

#[test]
fn a_64_mib_line_leaves_no_memory_behind() {
    let mut g = gjc().spawn();
    let pid = g.client.pid();
    g.ok(json!({"type": "get_state"}));
    let idle = status_bytes(pid, "VmRSS:");
    let line = padded_get_state("big", 64 * MIB as usize - 1);
    g.client.send_raw(&line).unwrap();
    drop(line);
    let r = g
        .client
        .wait_for(|f| f["id"] == "big", TIMEOUT)
        .expect("the long line is answered");
    assert_eq!(r["success"], true, "{r}");
    g.ok(json!({"type": "get_state"}));
    assert_memory_back(pid, idle);
}

/// After a 64 MiB line has been answered: resident memory is back near idle, and the peak shows
/// the line was held once, not copied whole again while decoding.
pub fn assert_memory_back(pid: u32, idle: u64) {
    let after = status_bytes(pid, "VmRSS:");
    let peak = status_bytes(pid, "VmHWM:");
    eprintln!(
        "idle {} KiB, peak {} KiB, after {} KiB",
        idle / 1024,
        peak / 1024,
        after / 1024
    );
    assert!(
        after <= idle + 8 * MIB,
        "resident afterwards: {after} bytes, idle {idle}"
    );
    assert!(
        peak <= idle + 100 * MIB,
        "peak {peak} bytes with a 64 MiB line, idle {idle}"
    );
}

/// gjc spawned by hand, so the test decides when its stdout is read.
struct Unread {
    child: Child,
    stdin: Option<ChildStdin>,
    want: Sender<usize>,
    lines: Receiver<String>,
    _home: tempfile::TempDir,
}

impl Unread {
    fn spawn() -> Unread {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_gjc"))
            .args(["--mode", "rpc", "--no-session"])
            // Nothing inherited: no API keys, no settings from the machine running the tests.
            .env_clear()
            .env("HOME", home.path())
            .env("GJC_CODING_AGENT_DIR", home.path().join("agent"))
            .current_dir(&project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn gjc");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (want, lines) = read_on_demand(stdout);
        let mut unread = Unread {
            stdin: child.stdin.take(),
            child,
            want,
            lines,
            _home: home,
        };
        let ready = unread.read(1);
        assert!(ready[0].starts_with(r#"{"type":"ready","#), "{ready:?}");
        unread
    }

    /// Reads `n` lines of stdout (each within the test timeout).
    fn read(&mut self, n: usize) -> Vec<String> {
        self.want.send(n).unwrap();
        (0..n)
            .map(|_| self.lines.recv_timeout(TIMEOUT).expect("a line of stdout"))
            .collect()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `n` get_state commands (ids g0…) on a thread, counting the lines written, then
    /// closes stdin. The writes block whenever gjc stops reading.
    fn flood(&mut self, n: usize) -> Arc<AtomicUsize> {
        let mut stdin = self.stdin.take().unwrap();
        let written = Arc::new(AtomicUsize::new(0));
        let count = written.clone();
        std::thread::spawn(move || {
            for i in 0..n {
                let line = format!("{{\"id\":\"g{i}\",\"type\":\"get_state\"}}\n");
                if stdin.write_all(line.as_bytes()).is_err() {
                    return;
                }
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        written
    }

    /// Reads every response to a flood of `n`, checking they come in order and succeed.
    fn read_flood_answers(&mut self, n: usize) {
        for (i, line) in self.read(n).iter().enumerate() {
            let r: Value = serde_json::from_str(line).unwrap();
            assert_eq!(r["id"], format!("g{i}"), "{line}");
            assert_eq!(r["success"], true, "{line}");
        }
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("gjc did not exit");
    }
}

impl Drop for Unread {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A thread that reads stdout only as far as asked (so the test can leave it unread), and
/// forwards each line.
fn read_on_demand(
    mut stdout: BufReader<std::process::ChildStdout>,
) -> (Sender<usize>, Receiver<String>) {
    let (want, asks) = unbounded::<usize>();
    let (tx, lines) = unbounded();
    std::thread::spawn(move || {
        for n in asks {
            for _ in 0..n {
                let mut line = String::new();
                if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let _ = tx.send(line.trim_end().to_string());
            }
        }
    });
    (want, lines)
}

/// Waits until `written` has not moved for half a second: gjc has stopped reading.
fn wait_for_stall(written: &AtomicUsize, n: usize) -> usize {
    let deadline = Instant::now() + TIMEOUT;
    let mut last = usize::MAX;
    let mut still_since = Instant::now();
    while Instant::now() < deadline {
        let now = written.load(Ordering::SeqCst);
        if now == n {
            return n;
        }
        if now != last {
            last = now;
            still_since = Instant::now();
        } else if still_since.elapsed() > Duration::from_millis(500) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the writer neither finished nor stalled");
}

/// Whether the process still has a thread of this name.
fn has_thread(pid: u32, name: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks
        .filter_map(Result::ok)
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name))
}

#[test]
fn unread_responses_hold_the_host_back_instead_of_growing_a_queue() {
    let mut g = Unread::spawn();
    g.stdin
        .as_mut()
        .unwrap()
        .write_all(b"{\"id\":\"warm\",\"type\":\"get_state\"}\n")
        .unwrap();
    g.read(1);
    let idle = status_bytes(g.pid(), "VmRSS:");
    let n = 20_000;
    let written = g.flood(n);
    let at_stall = wait_for_stall(&written, n);
    let held = status_bytes(g.pid(), "VmRSS:");
    eprintln!(
        "stalled after {at_stall} of {n} lines; idle {} KiB, held {} KiB",
        idle / 1024,
        held / 1024
    );
    assert!(
        at_stall < n,
        "gjc read all {n} commands without anyone reading its answers"
    );
    assert!(
        held <= idle + 16 * MIB,
        "resident with the host not reading: {held} bytes, idle {idle}"
    );
    // Once the host reads, everything is answered in order and the writer gets through.
    g.read_flood_answers(n);
    assert_eq!(written.load(Ordering::SeqCst), n);
    assert!(g.wait_exit().success());
}

#[test]
fn eof_behind_queued_commands_is_seen_at_once_and_every_command_is_answered() {
    let mut g = Unread::spawn();
    // Fewer than the pipes and queues hold, so gjc reads them all and reaches EOF while most
    // of the answers are still unwritten.
    let n = 1200;
    let written = g.flood(n);
    assert_eq!(wait_for_stall(&written, n), n);
    let deadline = Instant::now() + TIMEOUT;
    while has_thread(g.pid(), "gjc-stdin") {
        assert!(Instant::now() < deadline, "EOF was not noticed");
        std::thread::sleep(Duration::from_millis(10));
    }
    g.read_flood_answers(n);
    assert!(g.wait_exit().success());
}
