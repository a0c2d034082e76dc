//! Running one hook through `gjc-bash`: the payload goes in a private file fed to its stdin, its
//! stderr to another, and its stdout (JSON or nothing) comes back in the command's result. The
//! actor gives it its own process group, the timeout and the group kill on abort.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::unbounded;
use serde_json::Value;

use super::{Hook, Hooks};
use crate::exec::{BashEvent, BashJob, BashResult, JobOwner};

/// How much of a failing hook's stderr its error quotes.
const STDERR_TAIL: usize = 2000;
/// Beyond its own timeout, how long to wait for the actor's answer before giving up on it.
const GRACE: Duration = Duration::from_secs(10);

/// Runs `hook` with `payload` on stdin and returns what it printed: `None` for nothing, the JSON
/// object otherwise. Every failure (cannot start, non-zero exit, timeout, abort, output that is
/// not one JSON object) is an error that says which.
pub fn run(
    hooks: &Hooks,
    hook: &Hook,
    payload: &Value,
    owner: JobOwner,
) -> Result<Option<Value>, String> {
    run_cancellable(hooks, hook, payload, owner, &AtomicBool::new(false))
}

/// [`run`] for a caller that cancels by setting `cancel`, then aborting `owner` in the shell
/// actor. An abort that reaches the actor before the hook's job would find nothing to kill, so
/// the flag is read again once the job is queued: whichever side sees the other's write sends
/// the abort after the job, and the hook is killed either way.
pub fn run_cancellable(
    hooks: &Hooks,
    hook: &Hook,
    payload: &Value,
    owner: JobOwner,
    cancel: &AtomicBool,
) -> Result<Option<Value>, String> {
    if cancel.load(Ordering::SeqCst) {
        return Err("aborted".into());
    }
    let mut input = private_file()?;
    serde_json::to_writer(&mut input, payload)
        .map_err(|e| format!("cannot write its input: {e}"))?;
    input
        .flush()
        .map_err(|e| format!("cannot write its input: {e}"))?;
    let stderr = private_file()?;
    let mut command = format!("exec {}", quote(&hook.command.to_string_lossy()));
    for arg in &hook.args {
        command.push(' ');
        command.push_str(&quote(arg));
    }
    // stderr goes to the file gjc opened: a hook in a read-only sandbox could not open it.
    command.push_str(&format!(" <{}", quote(&input.path().to_string_lossy())));
    let confine = match hooks.launch() {
        crate::sandbox::Launch::Unconfined => None,
        crate::sandbox::Launch::Confined(c) => Some(c),
        crate::sandbox::Launch::Refused(e) => return Err(format!("cannot start: {e}")),
    };
    let (tx, rx) = unbounded();
    hooks.bash.run(BashJob {
        owner: owner.clone(),
        command,
        cwd: hooks.cwd.clone(),
        timeout: Some(hook.timeout),
        stream: false,
        confine,
        stderr: Some(
            stderr
                .as_file()
                .try_clone()
                .map_err(|e| format!("cannot open its stderr file: {e}"))?,
        ),
        // Past the cap the hook has failed already: stop it now, not at its timeout.
        output_limit: Some(crate::exec::output::TAIL_BYTES as u64),
        reply: tx.into(),
    });
    if cancel.load(Ordering::SeqCst) {
        hooks.bash.abort(owner);
    }
    let result = loop {
        match rx.recv_timeout(hook.timeout + GRACE) {
            Ok(BashEvent::Exit { result, .. }) => break result,
            Ok(BashEvent::Output { .. }) => {}
            Err(_) => return Err("gjc could not learn how the hook ended".into()),
        }
    };
    let err_text = std::fs::read_to_string(stderr.path()).unwrap_or_default();
    verdict(&result, hook, &err_text)
}

/// What a finished hook command means.
fn verdict(r: &BashResult, hook: &Hook, stderr: &str) -> Result<Option<Value>, String> {
    let tail = tail(stderr.trim(), STDERR_TAIL);
    let said = if tail.is_empty() {
        String::new()
    } else {
        format!(": {tail}")
    };
    if let Some(e) = &r.spawn_error {
        return Err(e.clone());
    }
    if r.cancelled {
        return Err("aborted".into());
    }
    if r.timed_out {
        return Err(format!(
            "timed out after {} ms and was killed",
            hook.timeout.as_millis()
        ));
    }
    // Before the exit status: a hook stopped at the cap was killed, and that is why.
    if r.truncated {
        return Err(format!(
            "printed more than gjc reads ({} bytes)",
            r.total_bytes
        ));
    }
    match r.exit_code {
        Some(0) => {}
        Some(code) => return Err(format!("exited with status {code}{said}")),
        None => return Err(format!("was killed by a signal{said}")),
    }
    let out = r.output.trim();
    if out.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(out) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        Ok(_) => Err("printed JSON that is not an object".into()),
        Err(e) => Err(format!(
            "printed invalid JSON ({e}): {}",
            tail_chars(out, 200)
        )),
    }
}

fn private_file() -> Result<tempfile::NamedTempFile, String> {
    // NamedTempFile is created 0600.
    tempfile::Builder::new()
        .prefix("gjc-hook-")
        .tempfile()
        .map_err(|e| format!("cannot make a private temporary file: {e}"))
}

/// Quotes a word for the shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

fn tail_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn hook() -> Hook {
        Hook {
            event: "session_start".into(),
            command: PathBuf::from("/h"),
            args: Vec::new(),
            timeout: Duration::from_millis(50),
            tools: None,
        }
    }

    fn result(output: &str, exit: Option<i32>) -> BashResult {
        BashResult {
            output: output.into(),
            exit_code: exit,
            cancelled: false,
            timed_out: false,
            truncated: false,
            total_bytes: output.len() as u64,
            total_lines: 1,
            full_output_path: None,
            spawn_error: None,
        }
    }

    #[test]
    fn verdicts() {
        let h = hook();
        assert_eq!(verdict(&result("", Some(0)), &h, ""), Ok(None));
        assert_eq!(
            verdict(&result(r#" {"a":1} "#, Some(0)), &h, ""),
            Ok(Some(serde_json::json!({"a":1})))
        );
        assert_eq!(
            verdict(&result("", Some(3)), &h, "boom\n"),
            Err("exited with status 3: boom".into())
        );
        assert!(verdict(&result("nope", Some(0)), &h, "")
            .unwrap_err()
            .starts_with("printed invalid JSON"));
        assert!(verdict(&result("[1]", Some(0)), &h, "").is_err());
        let mut t = result("", None);
        t.timed_out = true;
        assert_eq!(
            verdict(&t, &h, ""),
            Err("timed out after 50 ms and was killed".into())
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
