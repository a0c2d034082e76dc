//! Extension UI requests: dialogs that wait for an `extension_ui_response` (`select`, `confirm`,
//! `input`, `editor`), fire-and-forget ones (`notify`, `setStatus`, `setWidget`, `setTitle`,
//! `set_editor_text`), which tools (`ask`, the approval guard) call through the broker.
//!
//! A dialog that times out, is aborted, or loses its host resolves to its default: no answer for
//! `select`, `input` and `editor`, `false` for `confirm`.

use std::time::Duration;

use crossbeam_channel::unbounded;
use serde_json::{json, Map, Value};

use super::{CallKind, HostEvent, HostHandle};
use crate::protocol::outbound::UiRequest;
use crate::protocol::{FlatFrame, Outbound};

/// How a dialog ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Value(Value),
    Confirmed(bool),
    Cancelled {
        timed_out: bool,
    },
    /// Answered through the question's workflow gate with a request for clarification.
    Clarify(String),
}

/// A dialog shown and not yet answered.
pub struct Shown {
    pub id: String,
    rx: crossbeam_channel::Receiver<HostEvent>,
}

/// Shows a dialog without waiting; `None` when the host thread did not take it.
pub fn show(
    host: &HostHandle,
    method: &'static str,
    fields: Map<String, Value>,
    timeout: Option<Duration>,
) -> Option<Shown> {
    let (reply, rx) = unbounded();
    let mut fields = fields;
    if let Some(t) = timeout {
        fields.insert("timeout".into(), json!(t.as_millis() as u64));
    }
    let id = host.call(CallKind::Ui, timeout, reply, |id| {
        Outbound::Frame(FlatFrame::ExtensionUiRequest(UiRequest {
            id,
            method,
            fields,
        }))
    })?;
    Some(Shown { id, rx })
}

impl Shown {
    /// The answer if it came within `wait`; `None` while the dialog is still open.
    pub fn poll(&self, wait: Duration) -> Option<Answer> {
        match crate::park::recv_timeout(&self.rx, wait) {
            Ok(HostEvent::Ui(r)) if r.cancelled => Some(Answer::Cancelled {
                timed_out: r.timed_out,
            }),
            Ok(HostEvent::Ui(r)) => Some(match (r.confirmed, r.value) {
                (Some(c), _) => Answer::Confirmed(c),
                (None, Some(v)) => Answer::Value(v),
                (None, None) => Answer::Cancelled { timed_out: false },
            }),
            Ok(HostEvent::Rejected { timed_out, .. }) => Some(Answer::Cancelled { timed_out }),
            Ok(_) | Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                Some(Answer::Cancelled { timed_out: false })
            }
        }
    }
}

/// Shows a dialog and waits for the answer (or the default), checking `cancelled` as it waits.
pub fn dialog(
    host: &HostHandle,
    method: &'static str,
    fields: Map<String, Value>,
    timeout: Option<Duration>,
    cancelled: &dyn Fn() -> bool,
) -> Answer {
    let Some(shown) = show(host, method, fields, timeout) else {
        return Answer::Cancelled { timed_out: false };
    };
    loop {
        if cancelled() {
            host.cancel(shown.id);
            return Answer::Cancelled { timed_out: false };
        }
        if let Some(answer) = shown.poll(Duration::from_millis(10)) {
            return answer;
        }
    }
}

/// A request that expects no answer (`notify`, `setStatus`, ...).
pub fn notice(method: &'static str, fields: Value) -> FlatFrame {
    let fields = fields.as_object().cloned().unwrap_or_default();
    FlatFrame::ExtensionUiRequest(UiRequest {
        id: crate::ids::uuid_v4(),
        method,
        fields,
    })
}
