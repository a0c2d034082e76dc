//! `bash`: runs a command through the `gjc-bash` thread, streams its output as partial results
//! (at most every 50 ms), and returns the tail with the exit code; the full output of a long run
//! is in the spill file named in the result. When the host offers its own terminal (an editor
//! over ACP), the command runs there instead (`terminal.rs`), after the same guard.

use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use serde_json::{json, Value};

use super::{escalate, str_arg, Outcome, Tool, ToolContext, ToolEvent};
use crate::exec::{BashEvent, BashHandle, BashJob, BashResult, JobOwner, Reply};
use crate::protocol::message::ToolOutput;
use crate::sandbox::Launch;

const UPDATE_EVERY: Duration = Duration::from_millis(50);
/// The streamed preview keeps this much of the latest output.
const PREVIEW_BYTES: usize = 16 * 1024;

pub struct Bash;

impl Tool for Bash {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn description(&self) -> String {
        "Run a bash command in the working directory. stdout and stderr are merged; output is truncated to the last 2000 lines or 50KB, with the full output saved to a file. Optional timeout in seconds.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run"},
                "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Timeout in seconds (no timeout by default)"}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        self.run(args, ctx).output
    }

    /// The command's output; an escalation the host was asked for is also the outcome's effect.
    fn run(&self, args: &Value, ctx: &ToolContext) -> Outcome {
        let (command, timeout) = command_of(args);
        let plan = escalate::plan(args, ctx.policy, &ctx.sandbox);
        let run = |launch: &Launch| match (&ctx.host, ctx.policy.host_terminal) {
            (Some(host), true) => super::terminal::run(host, &command, timeout, ctx, launch),
            _ => run_waiting(&command, timeout, ctx, launch),
        };
        let (output, denied) = run(&plan.first);
        match plan.then {
            Some(to) if denied => escalate_after(ctx, &command, &to, output, run),
            _ => output.into(),
        }
    }

    fn as_bash(&self) -> Option<&Bash> {
        Some(self)
    }
}

impl Bash {
    /// Starts the call on `gjc-bash` with no thread waiting for it: `deliver` gets the call's
    /// updates and its end, on that thread, with whether the sandbox likely denied it. The call
    /// runs in `cwd`, in `launch`'s sandbox, under the owner `owner`, which stops it.
    pub fn start(
        &self,
        args: &Value,
        runner: &BashHandle,
        (cwd, launch): (std::path::PathBuf, &Launch),
        owner: JobOwner,
        mut deliver: impl FnMut(ToolEvent, bool) + Send + 'static,
    ) {
        let (command, timeout) = command_of(args);
        let confine = match confinement(launch) {
            Ok(confine) => confine,
            Err(refused) => return deliver(ToolEvent::Done(refused.into()), false),
        };
        let mut watch = Watch::new(timeout, confine.is_some());
        runner.run(BashJob {
            owner,
            command,
            cwd,
            timeout,
            stream: true,
            confine,
            stderr: None,
            output_limit: None,
            reply: Reply::Deliver(Box::new(move |event| {
                if let Some(step) = watch.on(event) {
                    deliver(step, watch.denied);
                }
            })),
        });
    }
}

/// Asks the host whether a command the sandbox denied may run again at `to`, and runs it there
/// if so; the output says what was decided (`escalate::record`).
pub fn escalate_after(
    ctx: &ToolContext,
    command: &str,
    to: &escalate::Escalation,
    denied: ToolOutput,
    run: impl Fn(&Launch) -> (ToolOutput, bool),
) -> Outcome {
    if ctx.is_cancelled() {
        return denied.into();
    }
    if !escalate::ask(ctx, command, to, &denied) {
        return escalate::record(escalate::refused(denied, to), to, false);
    }
    let (output, _) = run(&to.launch);
    escalate::record(output, to, true)
}

/// Runs `command` in `launch`'s sandbox on `gjc-bash` and waits for it on this thread, passing
/// its output on as it comes; the output, and whether the sandbox likely denied it.
pub(super) fn run_waiting(
    command: &str,
    timeout: Option<Duration>,
    ctx: &ToolContext,
    launch: &Launch,
) -> (ToolOutput, bool) {
    let confine = match confinement(launch) {
        Ok(confine) => confine,
        Err(refused) => return (refused, false),
    };
    let (tx, rx) = unbounded();
    let owner = JobOwner::Tool(ctx.call_id.clone());
    let mut watch = Watch::new(timeout, confine.is_some());
    ctx.bash.run(BashJob {
        owner: owner.clone(),
        command: command.to_string(),
        cwd: ctx.cwd.clone(),
        timeout,
        stream: true,
        confine,
        stderr: None,
        output_limit: None,
        reply: tx.into(),
    });
    let mut abort_sent = false;
    loop {
        if ctx.is_cancelled() && !abort_sent {
            ctx.bash.abort(owner.clone());
            abort_sent = true;
        }
        match crate::park::recv_timeout(&rx, Duration::from_millis(20)) {
            Ok(event) => match watch.on(event) {
                Some(ToolEvent::Done(done)) => return (done.output, watch.denied),
                Some(ToolEvent::Update(partial)) => ctx.update(partial),
                _ => {}
            },
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                let stopped = "the shell runner stopped before the command finished";
                return (ToolOutput::error(stopped), false);
            }
        }
    }
}

/// The confinement of a launch, or the refusal the model sees when the kernel cannot give it.
pub(super) fn confinement(launch: &Launch) -> Result<crate::exec::process::Confine, ToolOutput> {
    match launch {
        Launch::Unconfined => Ok(None),
        Launch::Confined(c) => Ok(Some(c.clone())),
        Launch::Refused(e) => Err(ToolOutput::error(format!(
            "{}: {e}. The command was not run: the session's sandbox policy cannot be enforced on this system, and gjc never runs it unconfined instead.",
            e.code()
        ))),
    }
}

/// The command and its timeout.
pub(super) fn command_of(args: &Value) -> (String, Option<Duration>) {
    let command = str_arg(args, "command").unwrap_or("").to_string();
    let timeout = args
        .get("timeout")
        .and_then(Value::as_f64)
        .map(|s| Duration::from_secs_f64(s.min(86_400.0)));
    (command, timeout)
}

/// A running command's events, as the call's messages: the latest output at most every 50 ms,
/// then the outcome.
struct Watch {
    preview: String,
    last_update: Instant,
    timeout: Option<Duration>,
    /// The command runs in a sandbox, whose denials are worth telling apart.
    confined: bool,
    /// It ended, and its output reads like the sandbox's refusal.
    denied: bool,
}

impl Watch {
    fn new(timeout: Option<Duration>, confined: bool) -> Watch {
        Watch {
            preview: String::new(),
            last_update: Instant::now(),
            timeout,
            confined,
            denied: false,
        }
    }

    fn on(&mut self, event: BashEvent) -> Option<ToolEvent> {
        match event {
            BashEvent::Output { text, .. } => {
                self.preview.push_str(&text);
                trim_front(&mut self.preview, PREVIEW_BYTES);
                if self.last_update.elapsed() < UPDATE_EVERY {
                    return None;
                }
                self.last_update = Instant::now();
                Some(ToolEvent::Update(ToolOutput::text(self.preview.clone())))
            }
            BashEvent::Exit { result, .. } => {
                self.denied = self.confined
                    && !result.cancelled
                    && escalate::likely_denied(result.exit_code, &result.output);
                Some(ToolEvent::Done(outcome(result, self.timeout).into()))
            }
        }
    }
}

fn trim_front(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = s.len() - max;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s.drain(..cut);
    }
}

fn outcome(r: BashResult, timeout: Option<Duration>) -> ToolOutput {
    if let Some(e) = r.spawn_error {
        return ToolOutput::error(e);
    }
    let notice = r.truncated.then(|| {
        let path = r
            .full_output_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "unavailable".into());
        format!(
            "[Output truncated: showing the last part of {} lines ({} bytes). Full output: {path}]",
            r.total_lines, r.total_bytes
        )
    });
    let details = json!({
        "exitCode": r.exit_code,
        "truncated": r.truncated,
        "fullOutputPath": r.full_output_path.as_ref().map(|p| p.display().to_string()),
    });
    let ended = Ended {
        output: &r.output,
        notice,
        exit_code: r.exit_code,
        timed_out: r.timed_out,
        cancelled: r.cancelled,
    };
    ended.into_output(details, timeout)
}

/// How a command ended, wherever it ran: what the model is told.
pub(super) struct Ended<'a> {
    /// The output's kept tail.
    pub output: &'a str,
    /// Said after the output when its start was dropped.
    pub notice: Option<String>,
    /// `None` when a signal ended it.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
}

impl Ended<'_> {
    pub(super) fn into_output(self, details: Value, timeout: Option<Duration>) -> ToolOutput {
        let mut text = if self.output.is_empty() {
            "(no output)".to_string()
        } else {
            self.output.trim_end_matches('\n').to_string()
        };
        if let Some(notice) = self.notice {
            text.push_str(&format!("\n\n{notice}"));
        }
        if self.timed_out {
            let secs = timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0);
            text.push_str(&format!("\n\nCommand timed out after {secs} seconds"));
            return ToolOutput::error(text).with_details(details);
        }
        if self.cancelled {
            text.push_str("\n\nCommand aborted");
            return ToolOutput::error(text).with_details(details);
        }
        match self.exit_code {
            Some(0) => ToolOutput::text(text).with_details(details),
            Some(code) => {
                text.push_str(&format!("\n\nCommand exited with code {code}"));
                ToolOutput::error(text).with_details(details)
            }
            None => {
                text.push_str("\n\nCommand was killed by a signal");
                ToolOutput::error(text).with_details(details)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tests::{ctx, text};

    #[test]
    fn exit_codes_and_timeouts() {
        let (_d, c) = ctx();
        let out = Bash.execute(&json!({"command": "echo hi"}), &c);
        assert_eq!(text(&out), "hi");
        let out = Bash.execute(&json!({"command": "echo no; exit 4"}), &c);
        assert!(out.is_error && text(&out).ends_with("Command exited with code 4"));
        let out = Bash.execute(&json!({"command": "sleep 20", "timeout": 0.2}), &c);
        assert!(
            out.is_error && text(&out).contains("timed out"),
            "{}",
            text(&out)
        );
    }
}
