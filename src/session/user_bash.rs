//! The host's own shell commands (`bash`): one at a time, run by `gjc-bash`, answered when they
//! exit, and kept for the model as a `bashExecution` message (after the run, when one streams, so
//! they never split a tool call from its result).

use serde_json::Value;

use super::reply::Reply;
use super::SessionLoop;
use crate::exec::{BashEvent, BashJob, JobOwner};
use crate::protocol::command::BashParams;
use crate::protocol::message::{AgentMessage, BashExecutionMessage};
use crate::protocol::outbound::TypedError;
use crate::protocol::reply::BashResult;
use crate::protocol::Response;
use crate::sandbox::Launch;

impl SessionLoop {
    /// Answered when the command exits (`on_bash`), or at once when it cannot start.
    pub(super) fn user_bash(&mut self, id: Option<Value>, b: BashParams) -> Reply {
        if self.user_bash.is_some() {
            let e = TypedError {
                code: "busy",
                message:
                    "A bash command is already running; wait for its response or send abort_bash"
                        .into(),
            };
            return Reply::now(Response::err(id, "bash", e));
        }
        // The host's own commands run in the session's sandbox like the model's.
        let confine = match self.sandbox_launch() {
            Launch::Unconfined => None,
            Launch::Confined(c) => Some(c),
            Launch::Refused(e) => {
                let e = TypedError {
                    code: e.code(),
                    message: e.to_string(),
                };
                return Reply::now(Response::err(id, "bash", e));
            }
        };
        self.user_bash = Some((id, b.command.clone()));
        self.bash.run(BashJob {
            owner: JobOwner::User,
            command: b.command,
            cwd: self.state.cwd.clone(),
            timeout: None,
            stream: false,
            confine,
            stderr: None,
            output_limit: None,
            reply: self.bash_tx().into(),
        });
        Reply::later()
    }

    /// A user `bash` command finished: answer it and record it for the model.
    pub fn on_bash(&mut self, event: BashEvent) {
        let BashEvent::Exit {
            owner: JobOwner::User,
            result,
        } = event
        else {
            return;
        };
        let Some((id, command)) = self.user_bash.take() else {
            return;
        };
        if let Some(e) = result.spawn_error {
            return self.respond(Response::err(id, "bash", e));
        }
        let path = result
            .full_output_path
            .as_ref()
            .map(|p| p.display().to_string());
        let reply = BashResult {
            output: result.output,
            exit_code: result.exit_code,
            cancelled: result.cancelled,
            truncated: result.truncated,
            total_lines: result.total_lines,
            total_bytes: result.total_bytes,
            full_output_path: path,
            timed_out: result.timed_out,
        };
        self.respond(Response::ok(id, "bash", Some(&reply)));
        let record = BashExecutionMessage {
            command,
            output: reply.output,
            exit_code: reply.exit_code,
            cancelled: reply.cancelled,
            truncated: reply.truncated,
            full_output_path: reply.full_output_path,
            timestamp: crate::ids::now_ms(),
        };
        match &mut self.run {
            Some(run) => run.deferred_bash.push(record),
            None => self.record(AgentMessage::BashExecution(record)),
        }
    }
}
