//! Spawning a shell command in its own process group, with stdin null, stdout and stderr merged
//! into one pipe, and the parent-death signal set, so nothing it starts can outlive gjc. The
//! environment loses the API-key variables (`crate::secrets`) and gains the command's marker
//! (`orphans::MARKER`), by which processes that escape the group are traced back to it.

use std::io::PipeReader;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Spawned {
    pub child: Child,
    pub output: PipeReader,
    pub pgid: i32,
}

/// The shell used for commands: bash when present, else sh.
pub fn shell() -> &'static str {
    if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

/// Runs `command` as command `id` of this process.
pub fn spawn(command: &str, cwd: &Path, id: super::orphans::CommandId) -> std::io::Result<Spawned> {
    let (reader, writer) = std::io::pipe()?;
    let writer_err = writer.try_clone()?;
    let mut cmd = Command::new(shell());
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env(super::orphans::MARKER, super::orphans::marker(id))
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_err);
    for var in crate::secrets::installed().hidden_env() {
        cmd.env_remove(var);
    }
    // SAFETY: only async-signal-safe calls (setsid, prctl) run between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = {
        let mut shells = super::orphans::shells();
        let child = cmd.spawn()?;
        shells.push(child.id() as i32);
        child
    };
    // The Command still holds the write ends; dropping it closes them here so EOF can arrive.
    drop(cmd);
    let pgid = child.id() as i32;
    Ok(Spawned {
        child,
        output: reader,
        pgid,
    })
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
