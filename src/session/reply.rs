//! What a command produces, as a value: its response (or none yet, when a worker answers it
//! later), and what must follow that response. `handle_command` sends it and runs the
//! post-command steps once, so no command can skip them. Also the commands' error type.

use std::fmt;

use serde_json::Value;

use super::SessionLoop;
use crate::control::Refusal;
use crate::protocol::message::UserMessage;
use crate::protocol::outbound::{ErrorValue, TypedError};
use crate::protocol::{Command, Data, Response};

/// A command's answer.
pub(super) struct Reply {
    response: Option<Response>,
    /// Answered ahead of the queued output (`get_state`, see `respond_first`).
    first: bool,
    then: Option<Then>,
}

/// What follows a command's response: events it must precede.
pub(super) enum Then {
    /// A queued message continues an idle session (`steer` / `follow_up`).
    Continue(Vec<UserMessage>),
    /// The run of an accepted `prompt` or `abort_and_prompt` (named for its hooks).
    Prompt(Vec<UserMessage>, &'static str),
    /// The command was the first to breach the unattended budget: what runs stops.
    BudgetStop(Refusal),
}

impl Reply {
    pub(super) fn now(response: Response) -> Reply {
        Reply {
            response: Some(response),
            first: false,
            then: None,
        }
    }

    /// Ahead of the frames already queued for the host.
    pub(super) fn first(response: Response) -> Reply {
        Reply {
            first: true,
            ..Reply::now(response)
        }
    }

    /// The command's work answers it when it reports (a listing, a discovery, a summary).
    pub(super) fn later() -> Reply {
        Reply {
            response: None,
            first: false,
            then: None,
        }
    }

    /// A command's payload or error, in a response to `id`.
    pub(super) fn answer(id: Option<Value>, command: &str, answer: Answer) -> Reply {
        Reply::now(response(id, command, answer))
    }

    pub(super) fn then(self, then: Then) -> Reply {
        Reply {
            then: Some(then),
            ..self
        }
    }
}

/// The response frame of a command's payload or error.
pub(super) fn response(id: Option<Value>, command: &str, answer: Answer) -> Response {
    match answer {
        Ok(data) => Response::ok_raw(id, command, data),
        Err(e) => Response::err(id, command, e),
    }
}

/// A command's payload, or why it failed.
pub(super) type Answer = Result<Option<Data>, CommandError>;

/// Why a command failed. The wire carries its text (`Display`), exactly as the protocol
/// documents it; the kind is for the session's own decisions and logs.
#[derive(Debug)]
pub enum CommandError {
    /// The parameters are wrong (an unknown mode, an invalid name, a missing entry).
    Invalid(String),
    /// The session's state refuses it now (busy, nothing to compact, no model available).
    Refused(String),
    /// No model or no key to run it with.
    Credentials(String),
    /// Reading or writing a file failed.
    Io(String),
    /// An error with a machine-readable code (`code: message`).
    Typed(TypedError),
    /// A payload that could not be encoded.
    Internal(String),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Invalid(m)
            | CommandError::Refused(m)
            | CommandError::Credentials(m)
            | CommandError::Io(m)
            | CommandError::Internal(m) => f.write_str(m),
            CommandError::Typed(e) => write!(f, "{}: {}", e.code, e.message),
        }
    }
}

impl std::error::Error for CommandError {}

impl From<TypedError> for CommandError {
    fn from(e: TypedError) -> CommandError {
        CommandError::Typed(e)
    }
}

/// A session file that cannot be read or written is an I/O failure, except a branch point that
/// names no user message, which is the caller's mistake.
impl From<super::store::StoreError> for CommandError {
    fn from(e: super::store::StoreError) -> CommandError {
        match e {
            super::store::StoreError::UnknownEntry(_) => CommandError::Invalid(e.to_string()),
            e => CommandError::Io(e.to_string()),
        }
    }
}

impl From<CommandError> for ErrorValue {
    fn from(e: CommandError) -> ErrorValue {
        ErrorValue(e.to_string())
    }
}

impl SessionLoop {
    /// Answers a command, then runs the post-command steps: the workflow's state is brought up
    /// to date, and what must follow the response (a run) starts.
    pub fn handle_command(&mut self, id: Option<Value>, command: Command) {
        let reply = self.command(id, command);
        match reply.response {
            Some(response) if reply.first => self.respond_first(response),
            Some(response) => self.respond(response),
            None => {}
        }
        self.sync_workflow();
        match reply.then {
            Some(Then::Continue(first)) => self.start_run(first),
            Some(Then::Prompt(prompt, command)) => self.start_prompt_run(prompt, command),
            Some(Then::BudgetStop(refusal)) => self.budget_stop(&refusal),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_text_of_each_error_is_its_message() {
        let typed = CommandError::Typed(TypedError {
            code: "not_supported",
            message: "login x: no".into(),
        });
        assert_eq!(ErrorValue::from(typed).0, "not_supported: login x: no");
        for e in [
            CommandError::Invalid("Invalid steering mode: x".into()),
            CommandError::Refused("Already compacted".into()),
            CommandError::Credentials("No API key".into()),
            CommandError::Io("cannot write f".into()),
            CommandError::Internal("internal error: e".into()),
        ] {
            let text = e.to_string();
            assert!(
                !text.contains("Invalid(") && !text.contains("Io("),
                "{text}"
            );
            assert_eq!(ErrorValue::from(e).0, text);
        }
    }

    #[test]
    fn a_store_error_is_io_unless_the_entry_is_unknown() {
        use crate::session::store::{Step, StoreError};
        let unknown = CommandError::from(StoreError::UnknownEntry("x".into()));
        assert!(
            matches!(&unknown, CommandError::Invalid(m) if m == "Invalid entry ID for branching")
        );
        let full = CommandError::from(StoreError::Io {
            step: Step::Write,
            path: None,
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        });
        assert!(
            matches!(&full, CommandError::Io(m) if m.starts_with("cannot write session file: "))
        );
    }

    #[test]
    fn a_later_reply_has_no_response_and_then_keeps_it() {
        let reply = Reply::later();
        assert!(reply.response.is_none() && reply.then.is_none());
        let reply = Reply::first(Response::done(None, "get_state")).then(Then::Continue(vec![]));
        assert!(reply.first && reply.response.is_some());
        assert!(matches!(reply.then, Some(Then::Continue(_))));
    }
}
