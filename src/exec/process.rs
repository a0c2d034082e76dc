//! Spawning a shell command in its own session, with stdin null, stdout and stderr merged into
//! one pipe, and the parent-death signal set, so nothing it starts can outlive gjc. The
//! environment loses the API-key variables (`crate::secrets`) and gains the command's marker
//! (`orphans::MARKER`), by which processes that escape the group are traced back to it.
//!
//! On Linux the shell is started without fork's copy of gjc's page tables (`spawn`); elsewhere
//! through `std::process::Command`.

use std::io::{PipeReader, PipeWriter};
use std::path::Path;

use super::orphans;

/// A running shell: `wait`-able by pid (`id`, `try_wait`).
#[cfg(target_os = "linux")]
pub type Shell = super::spawn::Child;
#[cfg(not(target_os = "linux"))]
pub type Shell = std::process::Child;

pub struct Spawned {
    pub child: Shell,
    pub output: PipeReader,
    pub pgid: i32,
}

/// The shell used for commands: bash when present, else sh (looked up once).
pub fn shell() -> &'static str {
    static SHELL: std::sync::OnceLock<&str> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        if Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        }
    })
}

/// How a command is confined (`crate::sandbox`); `None` runs it unconfined.
#[cfg(target_os = "linux")]
pub type Confine = Option<std::sync::Arc<crate::sandbox::Confinement>>;
#[cfg(not(target_os = "linux"))]
pub type Confine = Option<std::convert::Infallible>;

/// How a command is set up besides its text: its sandbox, and a file for its stderr.
type Setup<'a> = (Confine, Option<&'a std::fs::File>);

/// Runs `command` as command `id` of this process.
pub fn spawn(
    command: &str,
    cwd: &Path,
    id: orphans::CommandId,
    confine: Confine,
    stderr: Option<&std::fs::File>,
) -> std::io::Result<Spawned> {
    let hidden = crate::secrets::installed().hidden_env();
    spawn_hiding(
        command,
        cwd,
        &orphans::marker(id),
        hidden,
        (confine, stderr),
    )
}

/// `spawn` with the marker value and the variables to remove given.
fn spawn_hiding(
    command: &str,
    cwd: &Path,
    marker: &str,
    hidden: &[String],
    setup: Setup,
) -> std::io::Result<Spawned> {
    let (reader, writer) = std::io::pipe()?;
    let child = start(command, cwd, marker, hidden, writer, setup)?;
    // `start` consumed the write end, so only the shell and its children hold it: EOF arrives
    // once they are all gone.
    let pgid = child.id() as i32;
    Ok(Spawned {
        child,
        output: reader,
        pgid,
    })
}

/// Starts the shell with the write end of its output pipe and registers it as a running shell.
fn start(
    command: &str,
    cwd: &Path,
    marker: &str,
    hidden: &[String],
    output: PipeWriter,
    (confine, stderr): Setup,
) -> std::io::Result<Shell> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::OsString;
        use std::os::fd::AsFd;

        // A confined command writes its temporary files to the sandbox's private temp dir.
        let tmpdir = confine.as_ref().and_then(|c| c.tmpdir.clone());
        let own_tmpdir = tmpdir.is_some();
        let env = std::env::vars_os()
            .filter(|(name, _)| {
                name != orphans::MARKER
                    && !(own_tmpdir && name == "TMPDIR")
                    && !hidden.iter().any(|h| name == h.as_str())
            })
            .chain([(OsString::from(orphans::MARKER), OsString::from(marker))])
            .chain(tmpdir.map(|t| (OsString::from("TMPDIR"), t.into_os_string())));
        let launch =
            super::spawn::Launch::shell_command(shell(), command, cwd, env)?.confined(confine);
        let stdin = std::fs::File::open("/dev/null")?;
        let mut shells = orphans::shells();
        let stderr = stderr.map_or(output.as_fd(), |f| f.as_fd());
        let child = super::spawn::spawn(&launch, stdin.as_fd(), output.as_fd(), stderr)?;
        shells.push(child.id() as i32);
        Ok(child)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = confine;
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};

        let output_err = match stderr {
            Some(f) => Stdio::from(f.try_clone()?),
            None => Stdio::from(output.try_clone()?),
        };
        let mut cmd = Command::new(shell());
        cmd.arg("-c")
            .arg(command)
            .current_dir(cwd)
            .env(orphans::MARKER, marker)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(output_err);
        for var in hidden {
            cmd.env_remove(var);
        }
        // SAFETY: only an async-signal-safe call (setsid) runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut shells = orphans::shells();
        let child = cmd.spawn()?;
        shells.push(child.id() as i32);
        Ok(child)
    }
}

/// Kills every process of a group.
pub fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: plain syscall; a group that is already gone gives ESRCH, which is fine.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    /// Runs `command` to the end: its merged output and exit status.
    fn run_hiding(command: &str, cwd: &Path, hidden: &[String]) -> (String, ExitStatus) {
        let marker = test_marker();
        let Spawned {
            mut child,
            mut output,
            ..
        } = spawn_hiding(command, cwd, &marker, hidden, (None, None)).expect("spawn");
        let mut text = String::new();
        output.read_to_string(&mut text).expect("read output");
        let status = child.wait().expect("wait");
        orphans::shell_ended(child.id() as i32);
        (text, status)
    }

    fn run(command: &str) -> (String, ExitStatus) {
        run_hiding(command, Path::new("/"), &[])
    }

    /// A marker of runner 0, which no bash thread has (they count from 1).
    fn test_marker() -> String {
        orphans::marker((0, 1))
    }

    #[test]
    fn output_and_exit_status_with_stderr_merged() {
        let (text, status) = run("echo out; echo err >&2; exit 3");
        assert_eq!(text, "out\nerr\n");
        assert_eq!(status.code(), Some(3));
    }

    #[test]
    fn stdin_is_dev_null() {
        let (text, status) = run("readlink /proc/self/fd/0; cat; echo end");
        assert_eq!(text, "/dev/null\nend\n");
        assert!(status.success());
    }

    #[test]
    fn cwd_is_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let (text, _) = run_hiding("pwd -P", dir.path(), &[]);
        let expected = dir.path().canonicalize().unwrap();
        assert_eq!(text.trim_end(), expected.to_str().unwrap());
    }

    #[test]
    fn a_missing_cwd_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let err = match spawn_hiding("true", &missing, &test_marker(), &[], (None, None)) {
            Err(e) => e,
            Ok(_) => panic!("spawned in a missing folder"),
        };
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn a_nul_byte_in_the_command_is_an_error() {
        let err = match spawn_hiding(
            "echo a\0b",
            Path::new("/"),
            &test_marker(),
            &[],
            (None, None),
        ) {
            Err(e) => e,
            Ok(_) => panic!("spawned a command with a NUL byte"),
        };
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    }

    #[test]
    fn the_shell_leads_its_own_session_and_group() {
        let Spawned {
            mut child,
            mut output,
            pgid,
        } = spawn_hiding(
            "exec cat /proc/self/stat",
            Path::new("/"),
            &test_marker(),
            &[],
            (None, None),
        )
        .expect("spawn");
        let mut stat = String::new();
        output.read_to_string(&mut stat).unwrap();
        assert!(child.wait().unwrap().success());
        orphans::shell_ended(child.id() as i32);
        let (_, rest) = stat.rsplit_once(") ").expect(&stat);
        let fields: Vec<&str> = rest.split(' ').collect();
        let pid = child.id().to_string();
        assert_eq!(
            (fields[2], fields[3]),
            (pid.as_str(), pid.as_str()),
            "{stat}"
        );
        assert_eq!(pgid.to_string(), pid);
    }

    #[test]
    fn the_marker_is_set_and_hidden_variables_are_removed() {
        let victim = std::env::vars()
            .map(|(name, _)| name)
            .find(|name| name != "PATH" && name != orphans::MARKER)
            .expect("a variable to hide");
        let (text, status) = run_hiding("env", Path::new("/"), std::slice::from_ref(&victim));
        assert!(status.success());
        let marker_line = format!("{}={}", orphans::MARKER, test_marker());
        assert!(text.lines().any(|l| l == marker_line), "{text}");
        assert!(
            !text.lines().any(|l| l.starts_with(&format!("{victim}="))),
            "{victim} was passed on: {text}"
        );
        assert!(text.lines().any(|l| l.starts_with("PATH=")), "{text}");
    }

    #[test]
    fn signals_start_unblocked_and_sigpipe_default() {
        let (text, _) = run("exec cat /proc/self/status");
        let mask = |name: &str| {
            let line = text.lines().find_map(|l| l.strip_prefix(name)).expect(name);
            u64::from_str_radix(line.trim(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{text}");
        assert_eq!(mask("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "{text}");
        // And in practice: `yes` dies of SIGPIPE once `head` has gone, instead of reporting a
        // write error.
        let (text, _) = run("yes | head -n 1");
        assert_eq!(text, "y\n");
    }

    #[test]
    fn the_shell_is_killed_when_the_spawning_thread_ends() {
        let spawner = std::thread::spawn(|| {
            spawn_hiding(
                "exec sleep 30",
                Path::new("/"),
                &test_marker(),
                &[],
                (None, None),
            )
            .expect("spawn")
        });
        let Spawned { mut child, .. } = spawner.join().unwrap();
        let status = wait_bounded(&mut child, 10_000);
        orphans::shell_ended(child.id() as i32);
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }

    /// Waits for `child` on its pidfd, for at most `ms` milliseconds.
    fn wait_bounded(child: &mut Shell, ms: i32) -> ExitStatus {
        // SAFETY: plain syscalls on our own child's pid and the descriptor they return.
        unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) as i32;
            assert!(fd >= 0, "pidfd_open");
            let mut entry = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ready = libc::poll(&mut entry, 1, ms);
            libc::close(fd);
            assert_eq!(ready, 1, "the shell is still running");
        }
        child.try_wait().unwrap().expect("exited")
    }
}
