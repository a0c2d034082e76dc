//! Processes that escaped their command's process group. Killing the group when the shell exits
//! does not reach a child that called `setsid` (`setsid sleep 1000 &`, a daemon that double-
//! forks). gjc therefore becomes a child subreaper at start-up: when such a process loses its
//! parent, the kernel makes gjc its parent instead of init, and `gjc-bash` finds it among its own
//! children, kills it and reaps it.
//!
//! Telling these apart from gjc's other children: every command runs in a session of its own,
//! while nothing else gjc starts (the find tool's `git`) leaves gjc's session. So a child whose
//! session differs from gjc's, and that is not the shell of a running command, came from a
//! command. Which one is read from the marker in its environment
//! (`GJC_COMMAND_ID=<pid>.<runner>.<id>`, set for each command and inherited by everything it
//! starts), so that finishing one command does not kill what another one still running has
//! started. (`runner` tells apart the bash threads of one process; gjc has one, tests several.)

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The variable naming the command a process descends from.
pub const MARKER: &str = "GJC_COMMAND_ID";

/// Kill-and-reap rounds per sweep: each round reaches one more generation below a killed
/// escapee (its children are handed to gjc when it dies).
const MAX_ROUNDS: usize = 16;
/// How long one round waits for the processes it killed to become reapable.
const REAP_WAIT: Duration = Duration::from_millis(200);

/// The pids of the shells of running commands: their waiters own them, so a sweep must neither
/// kill nor reap them (once exited, a shell has no environment left to show its marker). It is
/// also held while a command is spawned: between `fork` and `exec` a new shell is already in a
/// session of its own but still has gjc's environment, and would pass for an unmarked escapee.
static SHELLS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// The running shells, locked (see `SHELLS`); push a new shell's pid before letting go.
pub fn shells() -> MutexGuard<'static, Vec<i32>> {
    SHELLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shell was waited for: from now on it is not ours to skip.
pub fn shell_ended(pid: i32) {
    shells().retain(|p| *p != pid);
}

/// Makes this process the reaper of its descendants' orphans. Linux only; elsewhere escaped
/// children go to init as before.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a process attribute.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) != 0 {
            log::warn!(
                "cannot become a child subreaper: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Which command of which runner of this process.
pub type CommandId = (u64, u64);

/// The marker value of a command of this process.
pub fn marker((runner, id): CommandId) -> String {
    format!("{}.{runner}.{id}", std::process::id())
}

/// A child of this process that came from a command.
#[derive(Debug, Clone, PartialEq)]
pub struct Escaped {
    pub pid: i32,
    /// The command it descends from, when its environment still says so.
    pub command: Option<CommandId>,
}

/// Kills and reaps the escaped children for which `kill` says yes, generation by generation.
pub fn sweep(kill: impl Fn(Option<CommandId>) -> bool) -> usize {
    let mut killed = 0;
    for _ in 0..MAX_ROUNDS {
        let shells = shells();
        let doomed: Vec<i32> = escaped(&shells)
            .into_iter()
            .filter(|e| kill(e.command))
            .map(|e| e.pid)
            .collect();
        if doomed.is_empty() {
            break;
        }
        for pid in &doomed {
            // SAFETY: plain syscall. `pid` is an unreaped child of ours, so it cannot have been
            // recycled for another process.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        drop(shells);
        reap(&doomed);
        killed += doomed.len();
    }
    killed
}

/// Waits (boundedly: a process stuck in the kernel may not die at once) for killed children.
fn reap(pids: &[i32]) {
    let deadline = Instant::now() + REAP_WAIT;
    let mut left: Vec<i32> = pids.to_vec();
    while !left.is_empty() {
        left.retain(|pid| {
            let mut status = 0;
            // SAFETY: plain syscall on our own child.
            let r = unsafe { libc::waitpid(*pid, &mut status, libc::WNOHANG) };
            r == 0
        });
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// This process's children that came from commands, other than the running shells.
pub fn escaped(shells: &[i32]) -> Vec<Escaped> {
    // SAFETY: getsid(0) has no preconditions.
    let own_session = unsafe { libc::getsid(0) };
    let me = std::process::id();
    children()
        .into_iter()
        .filter(|pid| !shells.contains(pid))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (parent, session) = parent_and_session(&stat)?;
            (parent == me as i32 && session != own_session).then(|| Escaped {
                pid,
                command: std::fs::read(format!("/proc/{pid}/environ"))
                    .ok()
                    .and_then(|env| command_of(&env, me)),
            })
        })
        .collect()
}

/// The children an orphan can be among: those of this process's main thread, or, where the
/// kernel has no `children` files, every process whose parent is us.
///
/// The kernel hands an orphan to the first live thread of its reaper, which is the main thread
/// until the process exits (`find_alive_thread` walks the group from its leader); gjc's main
/// thread lives as long as gjc. Other threads' children are the commands' shells, which are
/// skipped anyway, and the find tool's `git`, which stays in gjc's session. Reading one list
/// instead of every thread's keeps this check, made after every command, to one file.
fn children() -> Vec<i32> {
    let main = format!("/proc/self/task/{}/children", std::process::id());
    let mut pids: Vec<i32> = match std::fs::read_to_string(main) {
        Ok(text) => text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .collect(),
    };
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// The parent pid and session id from a `/proc/<pid>/stat` line (the name in parentheses may
/// contain anything, so fields are counted from its closing parenthesis).
fn parent_and_session(stat: &str) -> Option<(i32, i32)> {
    let (_, rest) = stat.rsplit_once(") ")?;
    let mut fields = rest.split(' ');
    let parent = fields.nth(1)?.parse().ok()?;
    let session = fields.nth(1)?.parse().ok()?;
    Some((parent, session))
}

/// The command in a NUL-separated environment, when its marker names process `me`.
fn command_of(environ: &[u8], me: u32) -> Option<CommandId> {
    let prefix = format!("{MARKER}={me}.");
    let value = environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))?;
    let (runner, id) = std::str::from_utf8(value).ok()?.split_once('.')?;
    Some((runner.parse().ok()?, id.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_name() {
        let stat = "4242 (a) b (c) S 17 4242 4242 0 -1 4194560 95 0 0 0";
        assert_eq!(parent_and_session(stat), Some((17, 4242)));
        assert_eq!(parent_and_session("garbage"), None);
    }

    #[test]
    fn the_marker_names_this_process_and_a_command() {
        let me = std::process::id();
        let env = format!("A=1\0{MARKER}={me}.2.7\0B=2\0");
        assert_eq!(command_of(env.as_bytes(), me), Some((2, 7)));
        let other = format!("{MARKER}={}.2.7\0", me + 1);
        assert_eq!(command_of(other.as_bytes(), me), None);
        assert_eq!(command_of(b"A=1\0", me), None);
        assert_eq!(marker((2, 7)), format!("{me}.2.7"));
    }

    #[test]
    fn children_in_our_own_session_are_never_escapees() {
        // A child that stays in this process's session, as the find tool's `git` does.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(escaped(&[]).iter().all(|e| e.pid != pid));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
