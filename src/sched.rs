//! The kernel scheduling policy of gjc's own threads.
//!
//! A streamed turn passes every delta from thread to thread: the provider's reader, the session,
//! the writer of stdout, and then the host reading it. Under the default policy a thread that
//! wakes another lets the woken one take the core at once when it has run less (wakeup
//! preemption), so with fewer cores than busy threads every hand-off becomes a pair of context
//! switches, and two sessions streaming at once spend more time switching between their six
//! threads than working. `SCHED_BATCH` gives the same share of the CPU at the same nice value, but
//! a woken thread waits until the running one blocks or its slice ends: frames pile up and move
//! in batches. On two cores, a 1,000-delta ACP turn took about a tenth of the context switches,
//! and two sessions streaming at once went from 2.2–2.7× a lone session's wall to 1.5–1.7×
//! (benches/live_sessions.rs). An idle core still takes a woken thread at once, so a host's
//! command is not delayed when the machine has room.
//!
//! Only gjc's own threads: what gjc starts for the user (shell commands, hooks, MCP servers)
//! runs under the policy gjc itself was started with, so every spawn path calls
//! [`restore_in_child`] between fork and exec. A policy other than the default at start (a user's
//! `chrt`) is left as it is.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether [`batch_own_threads`] changed the policy, so children get the default one back.
static BATCHED: AtomicBool = AtomicBool::new(false);

/// Puts the calling thread, and every thread it starts from now on (they inherit it), under
/// `SCHED_BATCH`, when it runs under the default policy. Call first thing in `main`, before any
/// other thread exists. Failing changes nothing but speed, so it is only logged.
pub fn batch_own_threads() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscalls on the calling thread (pid 0).
        let policy = unsafe { libc::sched_getscheduler(0) };
        if policy != libc::SCHED_OTHER {
            return;
        }
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: as above; `param` outlives the call.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) } == 0 {
            BATCHED.store(true, Ordering::Relaxed);
        } else {
            log::debug!("SCHED_BATCH refused: {}", std::io::Error::last_os_error());
        }
    }
}

/// Gives the calling thread the default policy back, for a thread that another process wakes
/// and that has only to hand what it read on: an MCP server's reader (stdio), a request's or
/// the GET stream's (HTTP). Under `SCHED_BATCH` it would wait for whatever runs on a busy core to block, between
/// the server's answer and the session.
pub fn prompt_thread() {
    restore_in_child();
}

/// In a child between fork and exec: gives back the default policy if gjc left it. Only a load
/// and one syscall, so it is async-signal-safe.
pub fn restore_in_child() {
    #[cfg(target_os = "linux")]
    if BATCHED.load(Ordering::Relaxed) {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: plain syscall on the calling (child) process; failure leaves SCHED_BATCH,
        // which is no reason to fail the spawn.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn policy() -> i32 {
        // SAFETY: plain syscall.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn threads_started_after_inherit_batch_and_a_child_gets_the_default_back() {
        // On a thread of its own: the policy is per thread, and the test harness's stay as they are.
        std::thread::spawn(|| {
            assert_eq!(policy(), libc::SCHED_OTHER, "the default at start");
            batch_own_threads();
            assert_eq!(policy(), libc::SCHED_BATCH);
            let inherited = std::thread::spawn(policy).join().unwrap();
            assert_eq!(inherited, libc::SCHED_BATCH, "a thread started later");
            // What a spawn path runs in the child, run here on a thread standing in for it.
            let restored = std::thread::spawn(|| {
                restore_in_child();
                policy()
            });
            assert_eq!(restored.join().unwrap(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }
}
