//! The `gjc-bash` thread: the one owner of child processes. It spawns every shell command (the
//! user's `bash` command and the bash tool), keeps the table of running process groups, enforces
//! timeouts, and kills groups on abort and shutdown. Spawning happens on this long-lived thread
//! because the parent-death signal fires when the *spawning thread* exits.
//!
//! The thread also does every command's I/O: it sleeps in poll(2) on the commands' merged output
//! pipes, a pidfd per shell and a wake-up pipe for requests (`job`, `wake`), so a command costs
//! no thread. When a shell exits, the rest of its group (`sleep 1000 &`) is killed so no orphan
//! keeps the pipe open or outlives the command. What left the group (`setsid`) is found and
//! killed here (`orphans`) before the command's result is passed on.
//!
//! Spill files live in a private folder with a random name (0700, created on first use), removed
//! at shutdown unless kept.

mod job;
pub mod orphans;
pub mod output;
pub mod process;
#[cfg(target_os = "linux")]
pub(crate) mod spawn;
mod wake;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};

use job::Job;

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
    /// The sandbox the command runs in (`None`: none).
    pub confine: process::Confine,
    /// Where its stderr goes instead of the output pipe (a file gjc opened: a confined command
    /// could not open one outside its writable roots itself).
    pub stderr: Option<std::fs::File>,
    /// Kill the command as soon as it has printed more than this many bytes (a hook, whose output
    /// is useless past its cap, fails then instead of at its timeout). Its result is truncated.
    pub output_limit: Option<u64>,
    pub reply: Reply,
}

/// Where a command's events go.
pub enum Reply {
    /// A channel its owner waits on.
    Channel(Sender<BashEvent>),
    /// Run on `gjc-bash` for each event: a tool call started on no thread of its own turns them
    /// into its messages here, so no thread waits for the command.
    Deliver(Box<dyn FnMut(BashEvent) + Send>),
}

impl Reply {
    fn send(&mut self, event: BashEvent) {
        match self {
            Reply::Channel(tx) => {
                let _ = tx.send(event);
            }
            Reply::Deliver(deliver) => {
                // A fault in one command's delivery must not take the thread that runs every
                // command down with it.
                let delivered =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(event)));
                if delivered.is_err() {
                    log::error!("delivering a command's event failed");
                }
            }
        }
    }
}

impl From<Sender<BashEvent>> for Reply {
    fn from(tx: Sender<BashEvent>) -> Reply {
        Reply::Channel(tx)
    }
}

/// Requests carry the session they come from (the number of the handle that sent them): owners
/// are a session's own names, so an abort reaches only that session's commands.
pub enum BashRequest {
    Run(u64, BashJob),
    Abort(u64, JobOwner),
    /// A session ended: kill its commands (their results still go to it).
    EndSession(u64),
    /// The session started anew: remove the spill files of its finished commands (unless they
    /// are kept); the other sessions' stay.
    ClearSpill(u64),
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
    inner: Arc<HandleInner>,
    /// The session this handle runs commands for (0: the process's own, as hooks at start).
    session: u64,
}

/// The request channel and the wake-up that goes with every request. When the last handle goes,
/// the channel is closed first and the thread woken after, so it sees the disconnection.
struct HandleInner {
    tx: Option<Sender<BashRequest>>,
    waker: wake::Waker,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        drop(self.tx.take());
        self.waker.wake();
    }
}

impl BashHandle {
    fn send(&self, request: BashRequest) {
        if let Some(tx) = &self.inner.tx {
            let _ = tx.send(request);
        }
        self.inner.waker.wake();
    }

    pub fn run(&self, job: BashJob) {
        self.send(BashRequest::Run(self.session, job));
    }

    pub fn abort(&self, owner: JobOwner) {
        self.send(BashRequest::Abort(self.session, owner));
    }

    /// The same bash thread, for the commands of session `session` (a number the session host
    /// gives each live session).
    pub fn for_session(&self, session: u64) -> BashHandle {
        BashHandle {
            inner: self.inner.clone(),
            session,
        }
    }

    /// Kills the commands of this handle's session; the thread goes on for the others.
    pub fn end_session(&self) {
        self.send(BashRequest::EndSession(self.session));
    }

    pub fn shutdown(&self) {
        self.send(BashRequest::Shutdown);
    }

    pub fn clear_spill(&self) {
        self.send(BashRequest::ClearSpill(self.session));
    }
}

/// Numbers the bash threads of this process (one in gjc; unit tests start several), so that
/// each recognises its own commands' descendants.
static RUNNERS: AtomicU64 = AtomicU64::new(0);

/// How long shutdown waits for killed commands to end and their escapees to be reaped.
const SHUTDOWN_WAIT: Duration = Duration::from_millis(2000);
/// Where pidfds are missing, how often a shell's exit is checked while its pipe stays open.
const EXIT_CHECK: Duration = Duration::from_millis(20);
/// One read of a command's pipe.
const READ_CHUNK: usize = 64 * 1024;

pub struct BashActor {
    requests: Receiver<BashRequest>,
    woken: wake::Woken,
    running: HashMap<u64, Job>,
    runner: u64,
    next_id: u64,
    spill_parent: PathBuf,
    /// Made on the first command, so a session that runs none creates nothing.
    spill_dir: Option<tempfile::TempDir>,
    keep_spill: bool,
    /// The session of each command given a spill path, until its file is cleared.
    spilled: HashMap<u64, u64>,
    buf: Vec<u8>,
}

/// Spawns `gjc-bash`. Spill files go to a private folder made under `spill_parent`, removed at
/// shutdown unless `keep_spill`. `test_panic` is `Settings::test_panic`.
pub fn spawn(
    spill_parent: PathBuf,
    keep_spill: bool,
    test_panic: Option<String>,
) -> std::io::Result<(BashHandle, std::thread::JoinHandle<()>)> {
    let (tx, requests) = unbounded();
    let (waker, woken) = wake::pair()?;
    let actor = BashActor {
        requests,
        woken,
        running: HashMap::new(),
        runner: RUNNERS.fetch_add(1, Ordering::Relaxed) + 1,
        next_id: 0,
        spill_parent,
        spill_dir: None,
        keep_spill,
        spilled: HashMap::new(),
        buf: vec![0u8; READ_CHUNK],
    };
    let thread = std::thread::Builder::new()
        .name("gjc-bash".into())
        .spawn(move || {
            test_panic_point(test_panic.as_deref());
            actor.run()
        })?;
    let inner = HandleInner {
        tx: Some(tx),
        waker,
    };
    Ok((
        BashHandle {
            inner: Arc::new(inner),
            session: 0,
        },
        thread,
    ))
}

impl BashActor {
    fn run(mut self) {
        while self.take_requests() {
            self.expire();
            self.wait(self.next_deadline());
            self.finish_completed();
        }
        self.shutdown();
    }

    /// Handles every request queued; false at shutdown (asked for, or every handle gone).
    fn take_requests(&mut self) -> bool {
        loop {
            match self.requests.try_recv() {
                Ok(BashRequest::Run(session, job)) => self.start(session, job),
                Ok(BashRequest::ClearSpill(session)) => self.clear_spill(session),
                Ok(BashRequest::Abort(session, owner)) => self.abort(session, Some(&owner)),
                Ok(BashRequest::EndSession(session)) => self.abort(session, None),
                Ok(BashRequest::Shutdown) | Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => return true,
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let deadline = self.running.values().filter_map(|r| r.deadline).min();
        // Without pidfds a shell's exit is only seen by asking again.
        match self.running.values().any(Job::needs_exit_check) {
            true => Some(deadline.map_or(Instant::now() + EXIT_CHECK, |d| {
                d.min(Instant::now() + EXIT_CHECK)
            })),
            false => deadline,
        }
    }

    /// Sleeps in poll(2) until a request, output, a shell's exit or `deadline`, then reads what
    /// is ready (one chunk per pipe) and reaps the shells that exited.
    fn wait(&mut self, deadline: Option<Instant>) {
        let mut fds = vec![pollfd(self.woken.fd())];
        let mut owners = Vec::new();
        for (id, job) in &self.running {
            for fd in [job.pipe_fd(), job.exit_fd()].into_iter().flatten() {
                fds.push(pollfd(fd));
                owners.push(*id);
            }
        }
        let timeout = deadline.map_or(-1, |d| {
            // Rounded up, so the deadline has passed when poll returns.
            let left = d.saturating_duration_since(Instant::now());
            left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        });
        // SAFETY: `fds` is a valid array of pollfd for its whole length.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if ready < 0 {
            // EINTR: the loop simply comes round again.
            return;
        }
        if fds[0].revents != 0 {
            self.woken.drain();
        }
        for (pfd, id) in fds[1..].iter().zip(owners) {
            if pfd.revents == 0 {
                continue;
            }
            let Some(job) = self.running.get_mut(&id) else {
                continue;
            };
            if job.pipe_fd() == Some(pfd.fd) {
                job.read_once(&mut self.buf);
            } else {
                job.check_exit();
            }
        }
        for job in self.running.values_mut().filter(|j| j.needs_exit_check()) {
            job.check_exit();
        }
    }

    /// Passes on the result of every command whose shell has exited and whose pipe is closed.
    fn finish_completed(&mut self) {
        let done: Vec<u64> = self
            .running
            .iter()
            .filter(|(_, j)| j.is_complete())
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some(job) = self.running.remove(&id) {
                self.finish(job);
            }
        }
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

    fn start(&mut self, session: u64, job: BashJob) {
        self.next_id += 1;
        let id = self.next_id;
        let spill = self.spill_path(id);
        let spawned = process::spawn(
            &job.command,
            &job.cwd,
            (self.runner, id),
            job.confine.clone(),
            job.stderr.as_ref(),
        );
        match spawned {
            Ok(spawned) => {
                if spill.is_some() {
                    self.spilled.insert(id, session);
                }
                self.running
                    .insert(id, Job::start(session, job, spawned, spill));
            }
            Err(e) => {
                let result = BashResult {
                    spawn_error: Some(format!("cannot run command: {e}")),
                    ..empty_result()
                };
                let mut reply = job.reply;
                reply.send(BashEvent::Exit {
                    owner: job.owner,
                    result,
                });
            }
        }
    }

    /// A command ended: what it left running outside its group is killed, then the result goes
    /// out, so a host that sees the result never sees the command's processes still alive.
    fn finish(&mut self, job: Job) {
        self.sweep(false);
        let owner = job.owner.clone();
        let (result, mut reply) = job.result();
        reply.send(BashEvent::Exit { owner, result });
    }

    /// Kills escaped descendants of this runner's finished commands; at shutdown (`all`), of
    /// every command. An escapee whose environment no longer names its command is killed when
    /// no command is running (it cannot belong to a live one), or at shutdown.
    fn sweep(&self, all: bool) {
        // Only commands leave gjc's session; with none ever started there is nothing to find,
        // and an idle gjc's exit does not wait for a walk through /proc.
        if self.next_id == 0 {
            return;
        }
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

    /// Kills the commands of `session` started by `owner` (every one of them with `None`).
    fn abort(&mut self, session: u64, owner: Option<&JobOwner>) {
        let aborted = |r: &&mut Job| r.session == session && owner.is_none_or(|o| &r.owner == o);
        for r in self.running.values_mut().filter(aborted) {
            r.cancelled = true;
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
            r.timed_out = true;
            process::kill_group(r.pgid);
        }
    }

    /// Removes the spill files of `session`'s commands that are no longer running.
    fn clear_spill(&mut self, session: u64) {
        let Some(dir) = self.spill_dir.as_ref().filter(|_| !self.keep_spill) else {
            return;
        };
        let running = &self.running;
        self.spilled.retain(|id, owner| {
            if *owner != session || running.contains_key(id) {
                return true;
            }
            let _ = std::fs::remove_file(dir.path().join(format!("bash-{id}.log")));
            false
        });
    }

    /// Kills every command, waits (boundedly) for their ends, kills what escaped them, and
    /// removes the spill folder unless it is kept.
    fn shutdown(&mut self) {
        for r in self.running.values_mut() {
            r.cancelled = true;
            process::kill_group(r.pgid);
        }
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        while !self.running.is_empty() && Instant::now() < deadline {
            self.wait(Some(deadline));
            self.finish_completed();
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

/// Test-only, in debug builds: panics when `wanted` (`Settings::test_panic`, from
/// `GJC_TEST_PANIC`) names the current thread, so tests can see what a crash of that thread
/// does. Called where role threads start and where a tool worker starts a call; release builds
/// skip it.
pub fn test_panic_point(wanted: Option<&str>) {
    if !cfg!(debug_assertions) {
        return;
    }
    let Some(wanted) = wanted else {
        return;
    };
    if std::thread::current().name() == Some(wanted) {
        panic!("GJC_TEST_PANIC asked {wanted} to panic");
    }
}

/// A poll(2) entry waiting for input (or hang-up, which is always reported) on `fd`.
fn pollfd(fd: std::os::fd::RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
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
mod tests;
