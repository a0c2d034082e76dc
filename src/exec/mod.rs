//! The `gjc-bash` thread: the one owner of child processes. It spawns every shell command (the
//! user's `bash` command and the bash tool), keeps the table of running process groups, enforces
//! timeouts, and kills groups on abort and shutdown. Spawning happens on this long-lived thread
//! because the parent-death signal fires when the *spawning thread* exits.
//!
//! Per command, one `gjc-bash-io` thread reads the merged output pipe into an `OutputSink` and
//! waits for the shell; when the shell exits, the rest of its group (`sleep 1000 &`) is killed so
//! no orphan keeps the pipe open or outlives the command. What left the group (`setsid`) is found
//! and killed here (`orphans`) before the command's result is passed on.
//!
//! Spill files live in a private folder with a random name (0700, created on first use), removed
//! at shutdown unless kept.

pub mod orphans;
pub mod output;
pub mod process;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
        test_panic_point();
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

/// A command's end, passed on to whoever asked once what escaped it is gone.
struct Finished {
    id: u64,
    owner: JobOwner,
    result: BashResult,
    reply: Sender<BashEvent>,
}

/// Numbers the bash threads of this process (one in gjc; unit tests start several), so that
/// each recognises its own commands' descendants.
static RUNNERS: AtomicU64 = AtomicU64::new(0);

/// How long shutdown waits for killed commands to end and their escapees to be reaped.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

pub struct BashActor {
    requests: Receiver<BashRequest>,
    finished_tx: Sender<Finished>,
    finished: Receiver<Finished>,
    running: HashMap<u64, Running>,
    runner: u64,
    next_id: u64,
    spill_parent: PathBuf,
    /// Made on the first command, so a session that runs none creates nothing.
    spill_dir: Option<tempfile::TempDir>,
    keep_spill: bool,
}

/// Spawns `gjc-bash`. Spill files go to a private folder made under `spill_parent`, removed at
/// shutdown unless `keep_spill`.
pub fn spawn(
    spill_parent: PathBuf,
    keep_spill: bool,
) -> std::io::Result<(BashHandle, std::thread::JoinHandle<()>)> {
    let (tx, requests) = unbounded();
    let (finished_tx, finished) = unbounded();
    let actor = BashActor {
        requests,
        finished_tx,
        finished,
        running: HashMap::new(),
        runner: RUNNERS.fetch_add(1, Ordering::Relaxed) + 1,
        next_id: 0,
        spill_parent,
        spill_dir: None,
        keep_spill,
    };
    let thread = std::thread::Builder::new()
        .name("gjc-bash".into())
        .spawn(move || actor.run())?;
    Ok((BashHandle { tx }, thread))
}

impl BashActor {
    fn run(mut self) {
        test_panic_point();
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
                    if let Ok(done) = done {
                        self.finish(done);
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

    /// Where command `id` spills, making the private folder on first use.
    fn spill_path(&mut self, id: u64) -> Option<PathBuf> {
        if self.spill_dir.is_none() {
            let made = std::fs::create_dir_all(&self.spill_parent).and_then(|_| {
                tempfile::Builder::new()
                    .prefix("gjc-")
                    .permissions(std::fs::Permissions::from_mode(0o700))
                    .tempdir_in(&self.spill_parent)
            });
            match made {
                Ok(dir) => self.spill_dir = Some(dir),
                Err(e) => log::warn!(
                    "cannot make a spill folder in {}: {e}",
                    self.spill_parent.display()
                ),
            }
        }
        let dir = self.spill_dir.as_ref()?;
        Some(dir.path().join(format!("bash-{id}.log")))
    }

    fn start(&mut self, job: BashJob) {
        self.next_id += 1;
        let id = self.next_id;
        let spill = self.spill_path(id);
        let spawned = match process::spawn(&job.command, &job.cwd, (self.runner, id)) {
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
        let pgid = spawned.pgid;
        let io = std::thread::Builder::new()
            .name("gjc-bash-io".into())
            .spawn(move || {
                let supervised = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    supervise(spawned, spill, &job, &flags)
                }));
                let result = supervised.unwrap_or_else(|_| {
                    // Unwaited, the shell is left to the sweeps to reap.
                    orphans::shell_ended(pgid);
                    process::kill_group(pgid);
                    BashResult {
                        spawn_error: Some("the command's supervisor failed unexpectedly".into()),
                        ..empty_result()
                    }
                });
                let _ = finished.send(Finished {
                    id,
                    owner: job.owner,
                    result,
                    reply: job.reply,
                });
            });
        if let Err(e) = io {
            log::error!("cannot start bash io thread: {e}");
        }
    }

    /// A command ended: what it left running outside its group is killed, then the result goes
    /// out, so a host that sees the result never sees the command's processes still alive.
    fn finish(&mut self, done: Finished) {
        self.running.remove(&done.id);
        self.sweep(false);
        let _ = done.reply.send(BashEvent::Exit {
            owner: done.owner,
            result: done.result,
        });
    }

    /// Kills escaped descendants of this runner's finished commands; at shutdown (`all`), of
    /// every command. An escapee whose environment no longer names its command is killed when
    /// no command is running (it cannot belong to a live one), or at shutdown.
    fn sweep(&self, all: bool) {
        let runner = self.runner;
        let killed = orphans::sweep(|command| match command {
            Some((r, id)) if r == runner => all || !self.running.contains_key(&id),
            Some(_) => false,
            None => all || self.running.is_empty(),
        });
        if killed > 0 {
            log::debug!("killed {killed} processes that escaped their command");
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
        let Some(dir) = self.spill_dir.as_ref().filter(|_| !self.keep_spill) else {
            return;
        };
        let live: Vec<String> = self
            .running
            .keys()
            .map(|id| format!("bash-{id}.log"))
            .collect();
        for entry in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            if !live.iter().any(|l| entry.file_name() == l.as_str()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Kills every command, waits (boundedly) for their ends, kills what escaped them, and
    /// removes the spill folder unless it is kept.
    fn shutdown(&mut self) {
        for r in self.running.values() {
            r.cancelled.store(true, Ordering::SeqCst);
            process::kill_group(r.pgid);
        }
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        while !self.running.is_empty() {
            match self.finished.recv_deadline(deadline) {
                Ok(done) => self.finish(done),
                Err(_) => break,
            }
        }
        self.sweep(true);
        if let Some(dir) = self.spill_dir.take() {
            if self.keep_spill {
                let _ = dir.keep();
            } else if let Err(e) = dir.close() {
                log::warn!("cannot remove the spill folder: {e}");
            }
        }
    }
}

/// Test-only, in debug builds: panics when `GJC_TEST_PANIC` names the current thread, so tests
/// can see what a crash of that thread does. Called where role threads start and where shell
/// commands are requested (from the session and from tool workers); release builds skip it.
pub fn test_panic_point() {
    if !cfg!(debug_assertions) {
        return;
    }
    let Ok(wanted) = std::env::var("GJC_TEST_PANIC") else {
        return;
    };
    if std::thread::current().name() == Some(wanted.as_str()) {
        panic!("GJC_TEST_PANIC asked {wanted} to panic");
    }
}

/// Reads the output to EOF on a helper thread while waiting for the shell here; once the shell
/// is gone its group is killed so background children cannot hold the pipe open.
fn supervise(
    spawned: process::Spawned,
    spill: Option<PathBuf>,
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
    orphans::shell_ended(pgid);
    process::kill_group(pgid);
    let mut captured = match reader {
        Ok(handle) => handle.join().unwrap_or_else(|_| empty_capture()),
        Err(e) => {
            log::error!("cannot start bash reader: {e}");
            empty_capture()
        }
    };
    if let std::borrow::Cow::Owned(clean) = crate::secrets::installed().scrub(&captured.output) {
        captured.output = clean;
    }
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
    spill: Option<PathBuf>,
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
        let (handle, thread) = spawn(dir.path().to_path_buf(), false).unwrap();
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
