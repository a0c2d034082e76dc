//! The `gjc-bash` thread: the one owner of child processes. It spawns every shell command (the
//! user's `bash` command and the bash tool), keeps the table of running process groups, enforces
//! timeouts, and kills groups on abort and shutdown. Spawning happens on this long-lived thread
//! because the parent-death signal fires when the *spawning thread* exits.
//!
//! Per command, one `gjc-bash-io` thread reads the merged output pipe into an `OutputSink` and
//! waits for the shell; when the shell exits, the rest of its group (`sleep 1000 &`) is killed so
//! no orphan keeps the pipe open or outlives the command.

pub mod output;
pub mod process;

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{after, never, select_biased, unbounded, Receiver, Sender};

use output::{Captured, OutputSink};

/// Who started a command; aborts target one owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JobOwner {
    User,
    Tool(String),
}

pub struct BashJob {
    pub owner: JobOwner,
    pub command: String,
    pub cwd: PathBuf,
    pub timeout: Option<Duration>,
    /// Forward output chunks as they arrive (the bash tool streams them).
    pub stream: bool,
    pub reply: Sender<BashEvent>,
}

pub enum BashRequest {
    Run(BashJob),
    Abort(JobOwner),
    /// The session ended: remove spill files of finished commands (unless they are kept).
    ClearSpill,
    Shutdown,
}

#[derive(Debug)]
pub enum BashEvent {
    Output { owner: JobOwner, text: String },
    Exit { owner: JobOwner, result: BashResult },
}

#[derive(Debug, Clone, PartialEq)]
pub struct BashResult {
    pub output: String,
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub timed_out: bool,
    pub truncated: bool,
    pub total_bytes: u64,
    pub total_lines: u64,
    pub full_output_path: Option<PathBuf>,
    pub spawn_error: Option<String>,
}

/// What the owner of the bash thread keeps.
#[derive(Clone)]
pub struct BashHandle {
    tx: Sender<BashRequest>,
}

impl BashHandle {
    pub fn run(&self, job: BashJob) {
        let _ = self.tx.send(BashRequest::Run(job));
    }

    pub fn abort(&self, owner: JobOwner) {
        let _ = self.tx.send(BashRequest::Abort(owner));
    }

    pub fn shutdown(&self) {
        let _ = self.tx.send(BashRequest::Shutdown);
    }

    pub fn clear_spill(&self) {
        let _ = self.tx.send(BashRequest::ClearSpill);
    }
}

struct Running {
    owner: JobOwner,
    pgid: i32,
    deadline: Option<Instant>,
    cancelled: Arc<AtomicBool>,
    timed_out: Arc<AtomicBool>,
}

struct Finished(u64);

pub struct BashActor {
    requests: Receiver<BashRequest>,
    finished_tx: Sender<Finished>,
    finished: Receiver<Finished>,
    running: HashMap<u64, Running>,
    next_id: u64,
    spill_dir: PathBuf,
    keep_spill: bool,
}

/// Spawns `gjc-bash`. Spill files go under `spill_dir`, removed at shutdown unless `keep_spill`.
pub fn spawn(
    spill_dir: PathBuf,
    keep_spill: bool,
) -> std::io::Result<(BashHandle, std::thread::JoinHandle<()>)> {
    let (tx, requests) = unbounded();
    let (finished_tx, finished) = unbounded();
    let actor = BashActor {
        requests,
        finished_tx,
        finished,
        running: HashMap::new(),
        next_id: 0,
        spill_dir,
        keep_spill,
    };
    let thread = std::thread::Builder::new()
        .name("gjc-bash".into())
        .spawn(move || actor.run())?;
    Ok((BashHandle { tx }, thread))
}

impl BashActor {
    fn run(mut self) {
        loop {
            let timer = self
                .next_deadline()
                .map(|d| after(d.saturating_duration_since(Instant::now())))
                .unwrap_or(never());
            select_biased! {
                recv(self.requests) -> req => match req {
                    Ok(BashRequest::Run(job)) => self.start(job),
                    Ok(BashRequest::ClearSpill) => self.clear_spill(),
                    Ok(BashRequest::Abort(owner)) => self.abort(&owner),
                    Ok(BashRequest::Shutdown) | Err(_) => break,
                },
                recv(self.finished) -> done => {
                    if let Ok(Finished(id)) = done {
                        self.running.remove(&id);
                    }
                },
                recv(timer) -> _ => self.expire(),
            }
        }
        self.shutdown();
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.running.values().filter_map(|r| r.deadline).min()
    }

    fn start(&mut self, job: BashJob) {
        self.next_id += 1;
        let id = self.next_id;
        if let Err(e) = std::fs::create_dir_all(&self.spill_dir) {
            log::warn!("cannot create {}: {e}", self.spill_dir.display());
        }
        let spill = self.spill_dir.join(format!("bash-{id}.log"));
        let spawned = match process::spawn(&job.command, &job.cwd) {
            Ok(s) => s,
            Err(e) => {
                let result = BashResult {
                    spawn_error: Some(format!("cannot run command: {e}")),
                    ..empty_result()
                };
                let _ = job.reply.send(BashEvent::Exit {
                    owner: job.owner,
                    result,
                });
                return;
            }
        };
        let cancelled = Arc::new(AtomicBool::new(false));
        let timed_out = Arc::new(AtomicBool::new(false));
        self.running.insert(
            id,
            Running {
                owner: job.owner.clone(),
                pgid: spawned.pgid,
                deadline: job.timeout.map(|t| Instant::now() + t),
                cancelled: cancelled.clone(),
                timed_out: timed_out.clone(),
            },
        );
        let finished = self.finished_tx.clone();
        let flags = (cancelled, timed_out);
        let io = std::thread::Builder::new()
            .name("gjc-bash-io".into())
            .spawn(move || {
                let result = supervise(spawned, spill, &job, &flags);
                let _ = job.reply.send(BashEvent::Exit {
                    owner: job.owner.clone(),
                    result,
                });
                let _ = finished.send(Finished(id));
            });
        if let Err(e) = io {
            log::error!("cannot start bash io thread: {e}");
        }
    }

    fn abort(&mut self, owner: &JobOwner) {
        for r in self.running.values().filter(|r| &r.owner == owner) {
            r.cancelled.store(true, Ordering::SeqCst);
            process::kill_group(r.pgid);
        }
    }

    fn expire(&mut self) {
        let now = Instant::now();
        for r in self
            .running
            .values_mut()
            .filter(|r| r.deadline.is_some_and(|d| d <= now))
        {
            r.deadline = None;
            r.timed_out.store(true, Ordering::SeqCst);
            process::kill_group(r.pgid);
        }
    }

    /// Removes the spill files of commands that are no longer running.
    fn clear_spill(&mut self) {
        if self.keep_spill {
            return;
        }
        let live: Vec<String> = self
            .running
            .keys()
            .map(|id| format!("bash-{id}.log"))
            .collect();
        for entry in std::fs::read_dir(&self.spill_dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            if !live.iter().any(|l| entry.file_name() == l.as_str()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    fn shutdown(&mut self) {
        for r in self.running.values() {
            r.cancelled.store(true, Ordering::SeqCst);
            process::kill_group(r.pgid);
        }
        if !self.keep_spill {
            let _ = std::fs::remove_dir_all(&self.spill_dir);
        }
    }
}

/// Reads the output to EOF on a helper thread while waiting for the shell here; once the shell
/// is gone its group is killed so background children cannot hold the pipe open.
fn supervise(
    spawned: process::Spawned,
    spill: PathBuf,
    job: &BashJob,
    flags: &(Arc<AtomicBool>, Arc<AtomicBool>),
) -> BashResult {
    let process::Spawned {
        mut child,
        output,
        pgid,
    } = spawned;
    let stream = job.stream.then(|| (job.reply.clone(), job.owner.clone()));
    let reader = std::thread::Builder::new()
        .name("gjc-bash-read".into())
        .spawn(move || read_all(output, spill, stream));
    let status = child.wait();
    process::kill_group(pgid);
    let captured = match reader {
        Ok(handle) => handle.join().unwrap_or_else(|_| empty_capture()),
        Err(e) => {
            log::error!("cannot start bash reader: {e}");
            empty_capture()
        }
    };
    let cancelled = flags.0.load(Ordering::SeqCst);
    let timed_out = flags.1.load(Ordering::SeqCst);
    let exit_code = status
        .ok()
        .and_then(|s| s.code())
        .filter(|_| !cancelled && !timed_out);
    BashResult {
        output: captured.output,
        exit_code,
        cancelled,
        timed_out,
        truncated: captured.truncated,
        total_bytes: captured.total_bytes,
        total_lines: captured.total_lines,
        full_output_path: captured.full_output_path,
        spawn_error: None,
    }
}

fn read_all(
    mut pipe: std::io::PipeReader,
    spill: PathBuf,
    stream: Option<(Sender<BashEvent>, JobOwner)>,
) -> Captured {
    let mut sink = OutputSink::new(spill);
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending_utf8: Vec<u8> = Vec::new();
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                sink.push(&buf[..n]);
                if let Some((tx, owner)) = &stream {
                    pending_utf8.extend_from_slice(&buf[..n]);
                    let text = take_valid_utf8(&mut pending_utf8);
                    if !text.is_empty() {
                        let _ = tx.send(BashEvent::Output {
                            owner: owner.clone(),
                            text,
                        });
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    sink.finish()
}

/// Decodes the complete UTF-8 prefix, keeping an incomplete trailing sequence for the next read.
fn take_valid_utf8(buf: &mut Vec<u8>) -> String {
    let keep = match std::str::from_utf8(buf) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => buf.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let rest = buf.split_off(buf.len() - keep);
    let text = String::from_utf8_lossy(buf).into_owned();
    *buf = rest;
    text
}

fn empty_capture() -> Captured {
    Captured {
        output: String::new(),
        truncated: false,
        total_bytes: 0,
        total_lines: 0,
        full_output_path: None,
    }
}

fn empty_result() -> BashResult {
    BashResult {
        output: String::new(),
        exit_code: None,
        cancelled: false,
        timed_out: false,
        truncated: false,
        total_bytes: 0,
        total_lines: 0,
        full_output_path: None,
        spawn_error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(command: &str, timeout: Option<Duration>) -> BashResult {
        let dir = tempfile::tempdir().unwrap();
        let (handle, thread) = spawn(dir.path().join("spill"), false).unwrap();
        let (tx, rx) = unbounded();
        handle.run(BashJob {
            owner: JobOwner::User,
            command: command.into(),
            cwd: dir.path().into(),
            timeout,
            stream: false,
            reply: tx,
        });
        let result = loop {
            match rx
                .recv_timeout(Duration::from_secs(20))
                .expect("bash result")
            {
                BashEvent::Exit { result, .. } => break result,
                BashEvent::Output { .. } => {}
            }
        };
        handle.shutdown();
        thread.join().unwrap();
        result
    }

    #[test]
    fn merges_streams_and_reports_exit_code() {
        let r = run("echo out; echo err 1>&2; exit 3", None);
        assert_eq!(r.exit_code, Some(3));
        assert!(
            r.output.contains("out\n") && r.output.contains("err\n"),
            "{:?}",
            r.output
        );
    }

    #[test]
    fn background_children_do_not_hold_the_command_open() {
        let started = Instant::now();
        let r = run("sleep 1000 & echo started", None);
        assert_eq!(r.exit_code, Some(0));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn timeout_kills_the_group() {
        let r = run("sleep 30", Some(Duration::from_millis(200)));
        assert!(r.timed_out);
        assert_eq!(r.exit_code, None);
    }

    #[test]
    fn utf8_split_across_reads_is_kept() {
        let mut buf = "é".as_bytes()[..1].to_vec();
        assert_eq!(take_valid_utf8(&mut buf), "");
        buf.push("é".as_bytes()[1]);
        assert_eq!(take_valid_utf8(&mut buf), "é");
    }

    #[test]
    fn invalid_utf8_is_replaced_and_valid_text_kept() {
        let r = run(r"printf 'a\377b \303\251 \360\237\230\200\n'", None);
        assert_eq!(r.exit_code, Some(0));
        assert_eq!(r.output, "a\u{fffd}b é 😀\n");
    }
}
