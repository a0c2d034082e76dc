//! The bash tool in the host's terminal: when the front end offers one (an editor over ACP),
//! the command runs there, where the user watches it live, instead of in gjc's process groups.
//! The guard has already passed the call (`guard::refusal` runs before any tool), and the model
//! is told the result under the same rules as a local run: the output's tail (the terminal keeps
//! `TAIL_BYTES`, then the same line rules apply), the exit code, a timeout or an abort.

use std::time::Duration;

use serde_json::json;

use super::bash::Ended;
use super::ToolContext;
use crate::exec::output::{tail_text, TAIL_BYTES};
use crate::host::terminal::{self, Command, Failed};
use crate::host::HostHandle;
use crate::protocol::message::ToolOutput;
use crate::sandbox::Launch;

/// Runs `command` in the host's terminal, in `launch`'s sandbox (gjc's launcher runs first and
/// confines itself); the output, and whether the sandbox likely denied it.
pub fn run(
    host: &HostHandle,
    command: &str,
    timeout: Option<Duration>,
    ctx: &ToolContext,
    launch: &Launch,
) -> (ToolOutput, bool) {
    let confined = match super::bash::confinement(launch) {
        Ok(confined) => confined,
        Err(refused) => return (refused, false),
    };
    let launcher = match confined.as_deref().map(|c| c.launcher()).transpose() {
        Ok(words) => words.unwrap_or_default(),
        Err(e) => return (ToolOutput::error(format!("{}: {e}", e.code())), false),
    };
    let output = run_there(host, command, timeout, ctx, launcher);
    let denied = confined.is_some() && output.is_error && {
        let code = output.details.as_ref().and_then(|d| d["exitCode"].as_i64());
        let code = code.and_then(|c| i32::try_from(c).ok());
        super::escalate::likely_denied(code, &super::escalate::text_of(&output))
    };
    (output, denied)
}

fn run_there(
    host: &HostHandle,
    command: &str,
    timeout: Option<Duration>,
    ctx: &ToolContext,
    launcher: Vec<String>,
) -> ToolOutput {
    let c = Command {
        tool_call_id: ctx.call_id.clone(),
        command: command.to_string(),
        launcher,
        cwd: ctx.cwd.clone(),
        timeout,
        output_limit: TAIL_BYTES as u64,
    };
    let exit = match terminal::run(host, c, &|| ctx.is_cancelled()) {
        Ok(exit) => exit,
        Err(Failed::Cancelled) => {
            let ended = Ended {
                output: "",
                notice: None,
                exit_code: None,
                timed_out: false,
                cancelled: true,
            };
            return ended.into_output(details(None, None, false), timeout);
        }
        Err(Failed::Refused(reason)) => {
            return ToolOutput::error(format!("The editor's terminal failed: {reason}"))
        }
    };
    let (output, truncated) = tail_text(exit.output.as_bytes(), exit.truncated);
    let exit_code = exit.exit_code.map(|c| i32::try_from(c).unwrap_or(i32::MAX));
    let ended = Ended {
        output: &output,
        notice: truncated.then(|| {
            "[Output truncated: showing the last part; the editor's terminal shows the rest it kept]"
                .to_string()
        }),
        exit_code,
        timed_out: exit.timed_out,
        cancelled: false,
    };
    ended.into_output(details(exit_code, exit.signal, truncated), timeout)
}

/// The same details as a local run, with the signal the terminal reported; the full output is
/// the editor's, so there is no file.
fn details(exit_code: Option<i32>, signal: Option<String>, truncated: bool) -> serde_json::Value {
    json!({
        "exitCode": exit_code,
        "signal": signal,
        "truncated": truncated,
        "fullOutputPath": null,
        "terminal": true,
    })
}
