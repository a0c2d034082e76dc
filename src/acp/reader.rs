//! The `gjc-acp-in` thread: reads stdin line by line (the same size cap as RPC mode), sorts each
//! line into a JSON-RPC request, notification or response, and hands it to the front end. It
//! never writes: a line that is not JSON-RPC becomes an `Incoming::Invalid` that the front end
//! answers in its place in the order.
//!
//! One message it also acts on: a `session/cancel` for the prompt that is running aborts the run
//! on the control lane at once, as RPC mode's `abort` does. The front end, which also takes the
//! notification in its turn, may be blocked writing to a client that stopped reading stdout; the
//! cancel must not wait for that client to read again.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol_schema::v1::{Error, RequestId};
use crossbeam_channel::Sender;
use serde_json::{json, Value};

use crate::lanes::ControlFrame;
use crate::lines::{read_line, LineRead};
use crate::protocol::Command;

/// The sessions whose prompt is running, as the front end last said, each with its control
/// lane and whether the reader has seen a `session/cancel` for it.
#[derive(Clone, Default)]
pub struct Running(Arc<Mutex<HashMap<String, Turn>>>);

struct Turn {
    control: Sender<ControlFrame>,
    cancelled: bool,
}

impl Running {
    /// Called by the front end after each message it handles, for the session it handled:
    /// `control` while its prompt runs. Writes only on a change (a new turn starts uncancelled).
    pub fn sync(&self, session: &str, control: Option<Sender<ControlFrame>>) {
        let mut turns = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match control {
            None => {
                turns.remove(session);
            }
            Some(control) => {
                if !turns.contains_key(session) {
                    let turn = Turn {
                        control,
                        cancelled: false,
                    };
                    turns.insert(session.to_string(), turn);
                }
            }
        }
    }

    /// The client sent `session/cancel` for the running turn of `session`, even if the front
    /// end has not reached that message yet: its answer must be `cancelled`.
    pub fn cancelled(&self, session: &str) -> bool {
        let turns = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        turns.get(session).is_some_and(|t| t.cancelled)
    }

    /// Marks the turn of `session` cancelled; its control lane when it is running.
    fn cancel(&self, session: &str) -> Option<Sender<ControlFrame>> {
        let mut turns = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let turn = turns.get_mut(session)?;
        turn.cancelled = true;
        Some(turn.control.clone())
    }
}

/// What the reader needs to stop a run itself.
pub struct Cancel {
    pub running: Running,
}

impl Cancel {
    /// Aborts the running prompt when `incoming` cancels it. The abort carries no id: its
    /// response is nobody's. The front end still answers the prompt `cancelled`.
    fn act(&self, incoming: &Incoming) {
        let Incoming::Notification { method, params } = incoming else {
            return;
        };
        if method != "session/cancel" {
            return;
        }
        let Some(control) = params["sessionId"]
            .as_str()
            .and_then(|s| self.running.cancel(s))
        else {
            return;
        };
        if let Some(Ok(command)) = Command::decode("abort", json!({})) {
            let _ = control.send(ControlFrame::Command { id: None, command });
        }
    }
}

/// One line from the client, sorted.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The client's answer to a request gjc sent (permission, file system).
    Response {
        id: RequestId,
        result: Result<Value, Error>,
    },
    /// A line answered with an error (`id` null when none could be read).
    Invalid {
        id: RequestId,
        error: Error,
    },
    /// Stdin reached EOF (or failed).
    Closed,
}

/// Reads until EOF, then reports `Closed`. A failed send means the front end has gone.
pub fn run(input: impl Read, to_front: Sender<Incoming>, max_line: usize, cancel: Cancel) {
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::with_capacity(64 * 1024);
    loop {
        let incoming = match read_line(&mut reader, &mut line, max_line) {
            Ok(LineRead::Eof) => break,
            Ok(LineRead::Line) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(LineRead::Line) => parse(&line),
            Ok(LineRead::TooLong(len)) => Incoming::Invalid {
                id: RequestId::Null,
                error: Error::invalid_request().data(format!(
                    "line of {len} bytes exceeds the {max_line}-byte limit"
                )),
            },
            Err(e) => {
                log::warn!("stdin read failed: {e}");
                break;
            }
        };
        if line.capacity() > 1024 * 1024 {
            line = Vec::with_capacity(64 * 1024);
            crate::memory::release_free_pages();
        }
        cancel.act(&incoming);
        if to_front.send(incoming).is_err() {
            return;
        }
    }
    log::debug!("stdin closed");
    let _ = to_front.send(Incoming::Closed);
}

/// Sorts one line. JSON-RPC's rules: not JSON is a parse error, a batch or an object that is
/// neither a request, a notification nor a response is an invalid request, both with `id` null
/// unless an id could be read.
pub fn parse(line: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: RequestId::Null,
                error: Error::parse_error().data(e.to_string()),
            }
        }
    };
    let Value::Object(mut fields) = value else {
        return invalid(
            RequestId::Null,
            "a message is one JSON object (batches are not served)",
        );
    };
    let id = match fields.remove("id").map(serde_json::from_value::<RequestId>) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => return invalid(RequestId::Null, "id must be a string, a number or null"),
    };
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id.unwrap_or(RequestId::Null), "jsonrpc must be \"2.0\"");
    }
    let params = fields.remove("params").unwrap_or(Value::Null);
    match (fields.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Incoming::Request { id, method, params },
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (Some(_), id) => invalid(id.unwrap_or(RequestId::Null), "method must be a string"),
        (None, Some(id)) => response(id, fields),
        (None, None) => invalid(RequestId::Null, "neither a request nor a response"),
    }
}

fn response(id: RequestId, mut fields: serde_json::Map<String, Value>) -> Incoming {
    if let Some(error) = fields.remove("error") {
        return match serde_json::from_value::<Error>(error) {
            Ok(error) => Incoming::Response {
                id,
                result: Err(error),
            },
            Err(e) => invalid(id, &format!("error: {e}")),
        };
    }
    match fields.remove("result") {
        Some(result) => Incoming::Response {
            id,
            result: Ok(result),
        },
        None => invalid(id, "a response needs result or error"),
    }
}

fn invalid(id: RequestId, why: &str) -> Incoming {
    Incoming::Invalid {
        id,
        error: Error::invalid_request().data(why.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(incoming: Incoming) -> (RequestId, i32) {
        match incoming {
            Incoming::Invalid { id, error } => (id, error.code.into()),
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn lines_are_sorted_by_their_shape() {
        let req = parse(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#);
        assert!(matches!(
            req,
            Incoming::Request {
                id: RequestId::Number(0),
                ..
            }
        ));
        let note = parse(br#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#);
        assert!(matches!(note, Incoming::Notification { .. }));
        let resp = parse(br#"{"jsonrpc":"2.0","id":"x","result":{"content":"a"}}"#);
        assert!(matches!(resp, Incoming::Response { result: Ok(_), .. }));
        let err = parse(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"no"}}"#);
        assert!(matches!(err, Incoming::Response { result: Err(_), .. }));
    }

    #[test]
    fn bad_lines_get_the_json_rpc_codes() {
        assert_eq!(code(parse(b"{not json")), (RequestId::Null, -32700));
        assert_eq!(code(parse(b"[1,2]")), (RequestId::Null, -32600));
        assert_eq!(
            code(parse(br#"{"id":4,"method":"x"}"#)),
            (RequestId::Number(4), -32600)
        );
        assert_eq!(
            code(parse(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#)),
            (RequestId::Null, -32600)
        );
        assert_eq!(
            code(parse(br#"{"jsonrpc":"2.0","id":5}"#)),
            (RequestId::Number(5), -32600)
        );
    }
}
