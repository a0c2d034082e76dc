//! Threads kept for the next job. A model request and a tool call each run on a thread of their
//! own, so the session thread never blocks on them and an abort can walk away from one that does
//! not stop at once. Starting and ending a thread for every turn costs more than a short turn's
//! own work: the stack is mapped, and unmapping it interrupts the other cores to flush their
//! TLBs. So a thread that finished its job waits for the next one instead, up to `keep` of
//! them. A job that arrives while every kept thread is busy (an aborted call still winding
//! down, say) gets a new thread, so one slow job never delays the next.
//!
//! A waiting thread is named `gjc-idle` (in /proc and in `ps`), and takes its own name back for
//! each job, so what a thread list shows as `gjc-provider` is a request under way.
//!
//! `idle` counts the waiting threads no job has claimed yet. A job claims one before it is sent,
//! so every sent job has a thread that will take it; a thread stops waiting (and ends) only
//! when it can give up its own place in that count, never while a claimed job is on its way.

use std::ffi::CStr;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::{unbounded, Receiver, Sender};

type Job = Box<dyn FnOnce() + Send>;

pub struct Workers {
    name: &'static CStr,
    keep: usize,
    idle: AtomicUsize,
    jobs: Sender<Job>,
    waiting: Receiver<Job>,
}

impl Workers {
    /// A set of threads named `name`, of which at most `keep` wait for work when there is none.
    pub fn new(name: &'static CStr, keep: usize) -> Workers {
        let (jobs, waiting) = unbounded();
        Workers {
            name,
            keep,
            idle: AtomicUsize::new(0),
            jobs,
            waiting,
        }
    }

    /// Runs `job` on a waiting thread, or on a new one when none waits.
    pub fn run(&'static self, job: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let claimed = self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if claimed {
            // The receiver lives in `self`, which is static: the send cannot fail.
            let _ = self.jobs.send(Box::new(job));
            return Ok(());
        }
        std::thread::Builder::new()
            .name(self.name.to_string_lossy().into_owned())
            .spawn(move || {
                if run_caught(Box::new(job)) {
                    self.serve();
                }
            })
            .map(drop)
    }

    /// Waits for the next job while there is room among the waiting threads.
    fn serve(&self) {
        loop {
            let room = self
                .idle
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < self.keep).then_some(n + 1)
                })
                .is_ok();
            if !room {
                return;
            }
            set_name(c"gjc-idle");
            let Ok(job) = crate::park::recv(&self.waiting) else {
                return;
            };
            set_name(self.name);
            if !run_caught(job) {
                return;
            }
        }
    }

    /// How many threads wait for work (for tests and logs).
    pub fn idle(&self) -> usize {
        self.idle.load(Ordering::Acquire)
    }
}

/// Names the calling thread as the kernel shows it (at most 15 bytes).
fn set_name(name: &CStr) {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_NAME reads a NUL-terminated string, which a CStr is.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}

/// Runs a job; false when it panicked (the thread then ends rather than serve again with
/// whatever the panic left behind).
fn run_caught(job: Job) -> bool {
    match catch_unwind(AssertUnwindSafe(job)) {
        Ok(()) => true,
        Err(_) => {
            log::error!(
                "a job on thread {} panicked",
                std::thread::current().name().unwrap_or("?")
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, LazyLock, Mutex};
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(10);

    fn thread_id_of(workers: &'static Workers) -> std::thread::ThreadId {
        let (tx, rx) = crossbeam_channel::bounded(1);
        workers
            .run(move || tx.send(std::thread::current().id()).unwrap())
            .unwrap();
        rx.recv_timeout(WAIT).unwrap()
    }

    /// Waits until `n` threads wait for work (a finished job's thread becomes idle just after).
    fn until_idle(workers: &Workers, n: usize) {
        let deadline = std::time::Instant::now() + WAIT;
        while workers.idle() != n {
            assert!(std::time::Instant::now() < deadline, "never {n} idle");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_finished_thread_takes_the_next_job() {
        static W: LazyLock<Workers> = LazyLock::new(|| Workers::new(c"test-reuse", 2));
        let first = thread_id_of(&W);
        until_idle(&W, 1);
        assert_eq!(thread_id_of(&W), first);
        until_idle(&W, 1);
    }

    #[test]
    fn a_busy_thread_does_not_hold_up_the_next_job() {
        static W: LazyLock<Workers> = LazyLock::new(|| Workers::new(c"test-busy", 2));
        let (release, held) = crossbeam_channel::bounded::<()>(0);
        W.run(move || {
            let _ = held.recv_timeout(WAIT);
        })
        .unwrap();
        // The first thread is stuck in its job; the second job runs at once on another.
        let (tx, rx) = crossbeam_channel::bounded(1);
        W.run(move || tx.send(()).unwrap()).unwrap();
        rx.recv_timeout(WAIT).unwrap();
        release.send(()).unwrap();
        until_idle(&W, 2);
    }

    /// The kernel's name of the thread that runs a job, and that thread's /proc entry.
    fn comm_of_job(workers: &'static Workers) -> (String, std::path::PathBuf) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        workers
            .run(move || {
                let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
                let task = std::fs::read_link("/proc/thread-self").unwrap();
                tx.send((comm, task)).unwrap()
            })
            .unwrap();
        let (comm, task) = rx.recv_timeout(WAIT).unwrap();
        (
            comm.trim_end().to_string(),
            std::path::Path::new("/proc").join(task),
        )
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_waiting_thread_is_named_idle_and_a_working_one_by_its_role() {
        static W: LazyLock<Workers> = LazyLock::new(|| Workers::new(c"test-names", 1));
        let (comm, task) = comm_of_job(&W);
        assert_eq!(comm, "test-names");
        let deadline = std::time::Instant::now() + WAIT;
        while std::fs::read_to_string(task.join("comm"))
            .unwrap()
            .trim_end()
            != "gjc-idle"
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the thread never waited"
            );
            std::thread::yield_now();
        }
        let (comm, again) = comm_of_job(&W);
        assert_eq!(again, task, "the waiting thread took the job");
        assert_eq!(comm, "test-names", "and its name back");
    }

    #[test]
    fn no_more_than_keep_threads_wait() {
        static W: LazyLock<Workers> = LazyLock::new(|| Workers::new(c"test-keep", 1));
        let barrier = Arc::new(Barrier::new(4));
        for _ in 0..3 {
            let b = barrier.clone();
            W.run(move || {
                b.wait();
            })
            .unwrap();
        }
        barrier.wait();
        until_idle(&W, 1);
        // The two others ended rather than wait; the one left still serves.
        let ran = Arc::new(Mutex::new(0));
        for _ in 0..5 {
            let (ran, (tx, rx)) = (ran.clone(), crossbeam_channel::bounded(1));
            W.run(move || {
                *ran.lock().unwrap() += 1;
                tx.send(()).unwrap();
            })
            .unwrap();
            rx.recv_timeout(WAIT).unwrap();
        }
        assert_eq!(*ran.lock().unwrap(), 5);
    }

    #[test]
    fn a_panicking_job_ends_its_thread_and_the_next_job_still_runs() {
        static W: LazyLock<Workers> = LazyLock::new(|| Workers::new(c"test-panic", 2));
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        W.run(move || {
            let _tx = tx;
            panic!("job failed");
        })
        .unwrap();
        // The panic dropped the sender: the job is over.
        assert!(rx.recv_timeout(WAIT).is_err());
        assert_eq!(W.idle(), 0, "the panicked thread does not wait for work");
        let (tx, rx) = crossbeam_channel::bounded(1);
        W.run(move || tx.send(()).unwrap()).unwrap();
        rx.recv_timeout(WAIT).unwrap();
    }
}
