//! `gjc --sandbox-exec SPEC -- PROGRAM ARGS...`: gjc as the small launcher an editor's terminal
//! runs, so a command there gets the same sandbox as one gjc starts itself. The launcher is one
//! thread from `main`'s first line: it builds the confinement, enters it, and execs the program,
//! which inherits it with everything it starts.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Confinement, SandboxError};

/// The flag that makes gjc a launcher; it must be the first argument.
pub const FLAG: &str = "--sandbox-exec";

/// What the launcher confines itself to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// Writable folders (none: read-only).
    pub roots: Vec<PathBuf>,
    pub network: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmpdir: Option<PathBuf>,
}

impl Confinement {
    /// The words that run a command in this confinement: `gjc --sandbox-exec SPEC --`.
    pub fn launcher(&self) -> Result<Vec<String>, SandboxError> {
        let exe = std::env::current_exe().map_err(|e| {
            SandboxError::Unavailable(format!("gjc cannot find its own program: {e}"))
        })?;
        let spec = Spec {
            roots: self.roots.clone(),
            network: self.network,
            tmpdir: self.tmpdir.clone(),
        };
        let spec = serde_json::to_string(&spec).unwrap_or_default();
        Ok(vec![
            exe.display().to_string(),
            FLAG.to_string(),
            spec,
            "--".to_string(),
        ])
    }
}

/// Runs the launcher when gjc was started as one; `None` otherwise. It returns only on failure:
/// 126 when the sandbox cannot be entered (the program never runs), 127 when exec fails.
pub fn run_if_asked() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != FLAG {
        return None;
    }
    let fail = |code: i32, what: String| {
        eprintln!("gjc {FLAG}: {what}");
        Some(code)
    };
    let spec = args
        .next()
        .and_then(|s| serde_json::from_slice::<Spec>(s.as_encoded_bytes()).ok());
    let Some(spec) = spec else {
        return fail(
            126,
            "the first argument must be the sandbox's JSON spec".into(),
        );
    };
    if args.next().as_deref() != Some(std::ffi::OsStr::new("--")) {
        return fail(126, "expected -- before the program".into());
    }
    let mut words: Vec<OsString> = args.collect();
    if words.is_empty() {
        return fail(126, "no program to run".into());
    }
    let program = words.remove(0);
    // The launcher is a process of its own: its settings are resolved here, at its start.
    let cap = crate::settings::Settings::from_env().landlock_abi_cap;
    let abi = super::landlock_abi(cap);
    let confinement = match Confinement::prepare(&spec.roots, spec.network, spec.tmpdir, abi) {
        Ok(c) => c,
        Err(e) => return fail(126, format!("{}: {e}", e.code())),
    };
    // SAFETY: gjc is one thread here (nothing else has started), so confining this thread
    // confines the whole process, and the program exec'd below inherits it.
    if let Err(errno) = unsafe { super::enter(&confinement.raw()) } {
        let e = std::io::Error::from_raw_os_error(errno);
        return fail(126, format!("cannot enter the sandbox: {e}"));
    }
    let mut command = std::process::Command::new(&program);
    command.args(words);
    if let Some(tmpdir) = &confinement.tmpdir {
        command.env("TMPDIR", tmpdir);
    }
    let e = command.exec();
    fail(
        127,
        format!("cannot run {}: {e}", program.to_string_lossy()),
    )
}
