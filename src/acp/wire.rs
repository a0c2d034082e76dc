//! JSON-RPC 2.0 framing on stdout for `--mode acp`: one message per line, the envelope from the
//! protocol crate (`JsonRpcMessage` adds `"jsonrpc": "2.0"`). Only the front end thread owns it.
#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    Error, JsonRpcMessage, Notification, Request, RequestId, Response,
};
use serde::Serialize;

pub struct Wire<W: Write> {
    out: std::io::BufWriter<W>,
    buf: Vec<u8>,
    /// Requests the client cancelled (`$/cancel_request`) and that were answered -32800: their
    /// own answer, when the work behind them ends, is not sent. Each entry goes with that answer.
    cancelled: HashSet<RequestId>,
}

impl<W: Write> Wire<W> {
    pub fn new(out: W) -> Wire<W> {
        Wire {
            out: std::io::BufWriter::with_capacity(64 * 1024, out),
            buf: Vec::with_capacity(4096),
            cancelled: HashSet::new(),
        }
    }

    /// Answers `id` with -32800 now; the answer its work would give later is dropped.
    pub fn cancel(&mut self, id: RequestId) -> std::io::Result<()> {
        let error = Error::request_cancelled();
        self.line(&JsonRpcMessage::wrap(Response::<()>::new(
            id.clone(),
            Err(error),
        )))?;
        self.cancelled.insert(id);
        Ok(())
    }

    /// `id` was answered by `cancel`.
    pub fn is_cancelled(&self, id: &RequestId) -> bool {
        self.cancelled.contains(id)
    }

    pub fn respond<T: Serialize>(
        &mut self,
        id: RequestId,
        result: Result<T, Error>,
    ) -> std::io::Result<()> {
        if self.cancelled.remove(&id) {
            return Ok(());
        }
        self.line(&JsonRpcMessage::wrap(Response::new(id, result)))
    }

    pub fn notify<T: Serialize>(&mut self, method: &str, params: T) -> std::io::Result<()> {
        self.line(&JsonRpcMessage::wrap(Notification {
            method: Arc::from(method),
            params: Some(params),
        }))
    }

    pub fn request<T: Serialize>(
        &mut self,
        id: RequestId,
        method: &str,
        params: T,
    ) -> std::io::Result<()> {
        self.line(&JsonRpcMessage::wrap(Request {
            id,
            method: Arc::from(method),
            params: Some(params),
        }))
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// Serializes into a reused buffer first, so a value that fails to serialize never leaves
    /// half a line on stdout.
    fn line(&mut self, message: &impl Serialize) -> std::io::Result<()> {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, message)?;
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)?;
        if self.buf.capacity() > 1024 * 1024 {
            self.buf = Vec::with_capacity(4096);
        }
        Ok(())
    }
}

#[cfg(test)]
impl Wire<Vec<u8>> {
    /// Everything written so far (tests of the front end).
    pub fn sent(&mut self) -> String {
        self.out.flush().unwrap();
        String::from_utf8(self.out.get_ref().clone()).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_single_lines_with_the_envelope() {
        let mut wire = Wire::new(Vec::new());
        wire.respond(RequestId::Number(0), Ok(serde_json::json!({})))
            .unwrap();
        wire.respond::<()>(RequestId::Null, Err(Error::parse_error()))
            .unwrap();
        wire.notify("session/update", serde_json::json!({"a": "b\nc"}))
            .unwrap();
        wire.flush().unwrap();
        let text = String::from_utf8(wire.out.get_ref().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], r#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        assert!(lines[1].starts_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700"#));
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn a_cancelled_request_is_answered_once() {
        let mut wire = Wire::new(Vec::new());
        wire.cancel(RequestId::Number(4)).unwrap();
        assert!(wire.is_cancelled(&RequestId::Number(4)));
        wire.respond(RequestId::Number(4), Ok(serde_json::json!({})))
            .unwrap();
        assert!(!wire.is_cancelled(&RequestId::Number(4)));
        wire.respond(RequestId::Number(5), Ok(serde_json::json!({})))
            .unwrap();
        wire.flush().unwrap();
        let text = String::from_utf8(wire.out.get_ref().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains(r#""id":4,"error":{"code":-32800"#),
            "{text}"
        );
        assert!(lines[1].contains(r#""id":5,"result""#), "{text}");
    }
}
