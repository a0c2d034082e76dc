//! Starting a shell without `fork`. A fork copies gjc's page tables and leaves every page of the
//! running threads copy-on-write until the child execs; on a per-tool-call path that copy (and
//! the faults after it) costs more than the command. Here the child shares gjc's memory
//! (`clone(CLONE_VM | CLONE_VFORK)`, as the C library's `posix_spawn` does) and runs on a stack
//! of its own; the calling thread sleeps until the child has called `execve` or exited.
//!
//! Sharing memory is what makes this sound only under strict rules, which every line of the
//! child below keeps:
//! - Everything the child reads (program, argv, envp, cwd, descriptors) is prepared before the
//!   clone and outlives it: the calling thread, which owns it, is suspended until the child has
//!   exec'd or exited.
//! - The child makes only raw, async-signal-safe calls: no allocation, no lock, no unwinding,
//!   no thread-local other than the C library's `errno` (the suspended thread's, which nothing
//!   else reads while it sleeps).
//! - All signals are blocked across the clone, so no handler of gjc's can run in the child; the
//!   child sets every handled signal back to its default before it unblocks them.
//! - A failure is written into the shared arguments before the child's `_exit(127)`, and read by
//!   the parent once the clone returns, which the kernel orders after the child's exit.

use std::ffi::{c_char, c_int, c_void, CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::ptr;

/// Room for the child's few frames (signal resets, a handful of syscalls); the C library's own
/// spawn gets by with about half of it.
const CHILD_STACK: usize = 64 * 1024;

/// What to run, as the C strings `execve` takes, built before the clone.
pub struct Launch {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    /// The sandbox the child enters before exec (`crate::sandbox`), kept alive with the launch.
    confine: Option<std::sync::Arc<crate::sandbox::Confinement>>,
}

impl Launch {
    /// `program -c command` in `cwd` with exactly the variables `env`. A NUL byte anywhere is an
    /// `InvalidInput` error, as with `std::process::Command`.
    pub fn shell_command(
        program: &str,
        command: &str,
        cwd: &Path,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> io::Result<Launch> {
        let program = c_string(program.as_bytes().to_vec())?;
        let argv = vec![
            program.clone(),
            c_string(b"-c".to_vec())?,
            c_string(command.as_bytes().to_vec())?,
        ];
        let envp = env
            .into_iter()
            .map(|(name, value)| {
                let mut var = name.into_vec();
                var.push(b'=');
                var.extend_from_slice(value.as_bytes());
                c_string(var)
            })
            .collect::<io::Result<_>>()?;
        let cwd = c_string(cwd.as_os_str().as_bytes().to_vec())?;
        Ok(Launch {
            program,
            argv,
            envp,
            cwd,
            confine: None,
        })
    }

    /// The child confines itself (`sandbox::enter`) after its set-up, right before `execve`.
    pub fn confined(
        mut self,
        confine: Option<std::sync::Arc<crate::sandbox::Confinement>>,
    ) -> Self {
        self.confine = confine;
        self
    }
}

fn c_string(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// A started shell: the `std::process::Child` calls the bash thread uses, on a pid we own.
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
}

impl Child {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// The exit status if the shell has ended, reaping it; later calls return the same status.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let mut raw = 0;
        // SAFETY: waitpid on our own unreaped child; `raw` is a valid place for the status.
        let r = unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) };
        match r {
            0 => Ok(None),
            r if r < 0 => Err(io::Error::last_os_error()),
            _ => {
                self.status = Some(ExitStatus::from_raw(raw));
                Ok(self.status)
            }
        }
    }

    /// Waits for the shell to end.
    #[cfg(test)]
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = ExitStatus::from_raw(wait_blocking(self.pid)?);
        self.status = Some(status);
        Ok(status)
    }
}

/// Starts `launch` in a new session with the parent-death signal set, stdin from `stdin`,
/// stdout to `output` and stderr to `stderr`. An error of any step before `execve` (a missing cwd or
/// shell) comes back as that step's OS error, and the child is reaped.
pub fn spawn(
    launch: &Launch,
    stdin: BorrowedFd,
    output: BorrowedFd,
    stderr: BorrowedFd,
) -> io::Result<Child> {
    // The child's dup2 calls need sources that no earlier dup2 overwrites.
    let stdin_copy = above_stdio(stdin)?;
    let output_copy = above_stdio(output)?;
    let stderr_copy = above_stdio(stderr)?;
    let argv = null_terminated(&launch.argv);
    let envp = null_terminated(&launch.envp);
    let stack_top = ChildStack::kept_top()?;
    let mut args = ChildArgs {
        program: launch.program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: launch.cwd.as_ptr(),
        stdin: stdin_copy
            .as_ref()
            .map_or(stdin.as_raw_fd(), |f| f.as_raw_fd()),
        output: output_copy
            .as_ref()
            .map_or(output.as_raw_fd(), |f| f.as_raw_fd()),
        stderr: stderr_copy
            .as_ref()
            .map_or(stderr.as_raw_fd(), |f| f.as_raw_fd()),
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        last_signal: libc::SIGRTMAX(),
        confine: launch.confine.as_ref().map(|c| c.raw()),
        error: 0,
    };
    let pid = with_signals_blocked(|| {
        // SAFETY: the child runs `child_main` on its own stack (this thread's kept stack,
        // mapped and large enough, which only this thread uses) and keeps the rules in the
        // module comment; `args` and everything its pointers reach live in this frame or in
        // `launch`, and this thread is suspended (CLONE_VFORK) until the child has exec'd or
        // exited, so none of it is freed or changed meanwhile.
        let pid = unsafe {
            libc::clone(
                child_main,
                stack_top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                ptr::addr_of_mut!(args).cast::<c_void>(),
            )
        };
        if pid < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(pid)
        }
    })?;
    // SAFETY: the child has exec'd or exited (the clone returned), so nothing writes `error`
    // any more; the volatile read keeps the compiler from assuming it still holds 0.
    let error = unsafe { ptr::read_volatile(ptr::addr_of!(args.error)) };
    if error != 0 {
        wait_blocking(pid)?;
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(Child { pid, status: None })
}

/// What the child needs, by pointer into the parent's memory.
struct ChildArgs {
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    stdin: RawFd,
    output: RawFd,
    stderr: RawFd,
    /// Who the parent is, to notice a parent that died before the death signal was armed.
    parent: libc::pid_t,
    /// The highest signal number (real-time signals included).
    last_signal: c_int,
    /// The sandbox to enter, pointing into the `Launch`'s confinement.
    confine: Option<crate::sandbox::RawConfinement>,
    /// The errno of the step that failed; 0 while none has.
    error: c_int,
}

/// The child: from the clone to `execve`. Never returns.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    let args = arg.cast::<ChildArgs>();
    // SAFETY: `arg` is the parent's `ChildArgs`, alive and unchanged while the parent thread is
    // suspended; `exec` only makes async-signal-safe calls with pointers prepared by the parent.
    let error = unsafe { exec(&*args) };
    // SAFETY: as above; the parent reads `error` only after this process has exited. `_exit`
    // ends the child without running any of the parent's exit handlers.
    unsafe {
        ptr::write_volatile(ptr::addr_of_mut!((*args).error), error);
        libc::_exit(127)
    }
}

/// Sets the child up and execs the shell; returns the errno of the step that failed.
///
/// # Safety
/// Only in the child of `spawn`, with `args` as `spawn` prepared them: every pointer then points
/// at a NUL-terminated string or a NULL-terminated array the suspended parent keeps alive, and
/// each call below is a plain async-signal-safe syscall wrapper (resolved at load time: gjc is
/// linked with immediate binding, so no lazy symbol lookup runs in the child).
unsafe fn exec(args: &ChildArgs) -> c_int {
    default_signal_handlers(args.last_signal);
    if libc::setsid() < 0 {
        return errno();
    }
    // The kernel reads the signal as an unsigned long: pass one, not a variadic int.
    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
        return errno();
    }
    // The parent died before the signal was armed: nothing would ever kill this child.
    if libc::getppid() != args.parent {
        libc::_exit(127);
    }
    crate::sched::restore_in_child();
    for (from, to) in [
        (args.stdin, libc::STDIN_FILENO),
        (args.output, libc::STDOUT_FILENO),
        (args.stderr, libc::STDERR_FILENO),
    ] {
        // `spawn` keeps the sources above 2, so the copies are fresh (close-on-exec cleared).
        if libc::dup2(from, to) < 0 {
            return errno();
        }
    }
    if libc::chdir(args.cwd) < 0 {
        return errno();
    }
    // Last, so every step above ran unconfined (the cwd may lie outside the writable roots).
    if let Some(confine) = &args.confine {
        if let Err(e) = crate::sandbox::enter(confine) {
            return e;
        }
    }
    // Signals arriving from here on see only default or ignored dispositions.
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::pthread_sigmask(libc::SIG_SETMASK, &none, ptr::null_mut());
    libc::execve(args.program, args.argv, args.envp);
    errno()
}

/// Every signal gjc handles goes back to its default (a handler of gjc's must never run in a
/// child that shares its memory; exec would reset them anyway), and SIGPIPE, which the Rust
/// runtime ignores, too: shell pipelines rely on it (`yes | head -1`). Other ignored signals stay
/// ignored, as they would across a plain exec.
///
/// # Safety
/// Only in the child of `spawn`, with all signals blocked.
unsafe fn default_signal_handlers(last_signal: c_int) {
    let mut default: libc::sigaction = std::mem::zeroed();
    default.sa_sigaction = libc::SIG_DFL;
    for signal in 1..=last_signal {
        let mut current: libc::sigaction = std::mem::zeroed();
        // Fails for SIGKILL and SIGSTOP, which cannot be handled, and for the C library's two
        // internal signals, which it only ever sends to its own threads by thread id.
        if libc::sigaction(signal, ptr::null(), &mut current) != 0 {
            continue;
        }
        let handled =
            current.sa_sigaction != libc::SIG_DFL && current.sa_sigaction != libc::SIG_IGN;
        if handled || signal == libc::SIGPIPE {
            libc::sigaction(signal, &default, ptr::null_mut());
        }
    }
}

fn errno() -> c_int {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// A close-on-exec copy of `fd` numbered 3 or above when `fd` is 0, 1 or 2 (possible only when
/// gjc's own standard streams were closed), so the child's dup2 calls cannot clobber it.
fn above_stdio(fd: BorrowedFd) -> io::Result<Option<OwnedFd>> {
    if fd.as_raw_fd() > libc::STDERR_FILENO {
        return Ok(None);
    }
    // SAFETY: fcntl duplicating a descriptor we borrow; the result is a new descriptor or -1.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just created and nothing else owns it.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(copy) }))
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

/// Runs `f` with every signal blocked in this thread, then restores the thread's mask. The
/// child inherits the blocked mask, so no signal reaches it before its handlers are reset.
fn with_signals_blocked<T>(f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    // SAFETY: sigset_t is plain data; sigfillset initialises it fully.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `previous` is filled by pthread_sigmask before it is read.
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to initialised sets; only this thread's mask changes.
    let r = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous)
    };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    let result = f();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, ptr::null_mut()) };
    result
}

/// Waits for child `pid` to end and returns its raw status.
fn wait_blocking(pid: libc::pid_t) -> io::Result<c_int> {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid on our own child; `raw` is a valid place for the status.
        if unsafe { libc::waitpid(pid, &mut raw, 0) } >= 0 {
            return Ok(raw);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The child's stack: an anonymous mapping with an inaccessible lowest page, so an overflow
/// faults instead of running into other memory.
struct ChildStack {
    base: *mut c_void,
    len: usize,
}

thread_local! {
    /// The spawning thread's child stack, kept for its next spawn: mapping and unmapping one per
    /// command cost three system calls and, at the unmap, a TLB shoot-down on every core running
    /// one of gjc's threads. A child is done with the stack when `clone` returns (it has exec'd
    /// or exited), and a thread spawns one child at a time.
    static KEPT_STACK: std::cell::RefCell<Option<ChildStack>> =
        const { std::cell::RefCell::new(None) };
}

impl ChildStack {
    /// The top of this thread's kept stack, mapped on first use; unmapped when the thread ends.
    fn kept_top() -> io::Result<*mut c_void> {
        KEPT_STACK.with_borrow_mut(|kept| match kept {
            Some(stack) => Ok(stack.top()),
            None => Ok(kept.insert(ChildStack::new()?).top()),
        })
    }

    fn new() -> io::Result<ChildStack> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = CHILD_STACK + page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = ChildStack { base, len };
        // SAFETY: the first page of the mapping just made, which nothing uses yet.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The stack grows down from the end of the mapping (page-aligned, so suitably aligned).
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, which is what clone expects.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the child that used it has exec'd or exited.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// Spawns `program -c true` in `cwd` on a thread named `name`, which the child inherits as
    /// its command name; returns the error and whether a child of that name is left unreaped.
    /// The shell list stays locked meanwhile, so no sweep elsewhere reaps the child first.
    fn failed_spawn(name: &'static str, program: &'static str, cwd: &'static str) -> io::Error {
        let spawner = std::thread::Builder::new().name(name.into());
        let thread = spawner
            .spawn(move || {
                let _shells = super::super::orphans::shells();
                let launch = Launch::shell_command(program, "true", Path::new(cwd), [])?;
                let null = std::fs::File::open("/dev/null")?;
                let (_reader, writer) = std::io::pipe()?;
                let result = spawn(&launch, null.as_fd(), writer.as_fd(), writer.as_fd());
                assert_eq!(children_named(name), 0, "a zombie is left");
                result.map(|_| ())
            })
            .unwrap();
        thread.join().unwrap().expect_err("spawn succeeded")
    }

    /// Children of this process whose command name is `name`.
    fn children_named(name: &str) -> usize {
        let me = std::process::id().to_string();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let Some((head, rest)) = stat.rsplit_once(") ") else {
                    return false;
                };
                let comm = head.split_once(" (").map(|(_, c)| c);
                comm == Some(name) && rest.split(' ').nth(1) == Some(me.as_str())
            })
            .count()
    }

    /// A thread keeps one child stack: after a child that failed before `execve` (and wrote
    /// on the stack) and one that ran, the next child starts on the same stack and runs.
    #[test]
    fn the_child_stack_is_kept_and_reused() {
        let spawner = std::thread::spawn(|| {
            let run = |program: &str| -> io::Result<ExitStatus> {
                let launch = Launch::shell_command(program, "exit 3", Path::new("/"), [])?;
                let null = std::fs::File::open("/dev/null")?;
                let (_reader, writer) = std::io::pipe()?;
                let _shells = super::super::orphans::shells();
                spawn(&launch, null.as_fd(), writer.as_fd(), writer.as_fd())?.wait()
            };
            assert!(run("/nonexistent/sh").is_err());
            let top = ChildStack::kept_top().unwrap();
            for _ in 0..2 {
                assert_eq!(run("/bin/sh").unwrap().code(), Some(3));
                assert_eq!(ChildStack::kept_top().unwrap(), top, "the same stack");
            }
        });
        spawner.join().unwrap();
    }

    #[test]
    fn a_missing_shell_is_reported_and_reaped() {
        let err = failed_spawn("spawn-no-shell", "/nonexistent/sh", "/");
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn a_missing_cwd_is_reported_and_reaped() {
        let err = failed_spawn("spawn-no-cwd", "/bin/sh", "/nonexistent/folder");
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn the_callers_signal_mask_is_restored() {
        // SAFETY: sets and reads this test thread's own mask through initialised sets.
        let mask = |how: c_int, signal: c_int| unsafe {
            let mut change: libc::sigset_t = std::mem::zeroed();
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut change);
            libc::sigaddset(&mut change, signal);
            libc::pthread_sigmask(how, &change, &mut now);
            (
                libc::sigismember(&now, libc::SIGUSR2),
                libc::sigismember(&now, libc::SIGTERM),
            )
        };
        mask(libc::SIG_BLOCK, libc::SIGUSR2);
        let launch = Launch::shell_command("/nonexistent/sh", "true", Path::new("/"), []).unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let err = spawn(&launch, null.as_fd(), null.as_fd(), null.as_fd()).expect_err("spawned");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(mask(libc::SIG_UNBLOCK, libc::SIGUSR2), (1, 0));
    }
}
