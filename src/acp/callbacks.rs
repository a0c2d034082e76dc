//! The host broker's callbacks, served by the editor. In `--mode acp` the session's tools ask
//! the host before an edit or command (a `confirm` dialog naming the tool call) and read and
//! write local files through it (`file://` host URIs) when the editor offers `fs/*`; here those
//! become `session/request_permission`, `fs/read_text_file` and `fs/write_text_file` requests,
//! and the client's answers go back to the broker as the replies it waits for. The broker keeps
//! its own bookkeeping (cancellation, shutdown), so a call the session gives up on is answered
//! there and a late answer from the client is dropped.

use std::io::Write;

use agent_client_protocol_schema::v1::{
    Error, PermissionOption, PermissionOptionKind, ReadTextFileRequest, ReadTextFileResponse,
    RequestId, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    ToolCallStatus, ToolCallUpdate, WriteTextFileRequest,
};
use serde_json::{json, Value};

use super::front::Front;
use super::updates::{self, SessionUpdate};
use crate::host::HostRequest;
use crate::protocol::host_reply::{HostReply, HostUriResult, UiResponse};
use crate::protocol::outbound::UiRequest;
use crate::protocol::FlatFrame;

/// A request gjc sent the client, by its JSON-RPC id.
pub(super) enum Outgoing {
    Permission {
        host_id: String,
        tool_call_id: String,
        tool_name: String,
    },
    Read {
        host_id: String,
    },
    Write {
        host_id: String,
    },
    /// A step of a terminal run (`terminal.rs`).
    Terminal {
        host_id: String,
    },
    /// Whether to trust the project in this folder (`trust.rs`); no host call waits on it.
    Trust {
        cwd: std::path::PathBuf,
    },
}

impl Outgoing {
    fn host_id(&self) -> Option<&str> {
        match self {
            Outgoing::Permission { host_id, .. }
            | Outgoing::Read { host_id }
            | Outgoing::Write { host_id }
            | Outgoing::Terminal { host_id } => Some(host_id),
            Outgoing::Trust { .. } => None,
        }
    }
}

/// A request gjc sent the client, and the session it asked for: its answer is handled there,
/// whichever session the front end worked on since.
pub(super) struct Asked {
    pub(super) session: String,
    pub(super) what: Outgoing,
}

impl<W: Write> Front<W> {
    /// Remembers request `id`, sent to the client for the focused session.
    pub(super) fn ask(&mut self, id: RequestId, what: Outgoing) {
        let session = self.c.session.clone();
        self.outgoing.insert(id, Asked { session, what });
    }

    pub(super) fn on_callback(&mut self, frame: FlatFrame) -> std::io::Result<()> {
        match frame {
            FlatFrame::ExtensionUiRequest(request) => self.on_ui(request),
            FlatFrame::HostUriRequest {
                id,
                operation,
                url,
                content,
            } => self.on_file(id, operation, &url, content),
            FlatFrame::HostUriCancel { target_id, .. } => self.cancel_outgoing(&target_id),
            // Status lines, widgets and the rest of RPC's presentation have no ACP request.
            _ => Ok(()),
        }
    }

    fn on_ui(&mut self, request: UiRequest) -> std::io::Result<()> {
        match request.method {
            "confirm" => self.ask_permission(request),
            "cancel" => match request.fields.get("targetId").and_then(Value::as_str) {
                Some(target) => self.cancel_outgoing(target),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn ask_permission(&mut self, request: UiRequest) -> std::io::Result<()> {
        let field = |k: &str| {
            request
                .fields
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let (Some(tool_call_id), Some(tool_name)) = (field("toolCallId"), field("toolName")) else {
            // A confirmation that is not about a tool call has no ACP form: it is declined.
            return self.reply_ui(&request.id, false);
        };
        // Leaving the sandbox is asked every time, with the reason: "always allow bash" is
        // about running commands, not about running them unconfined.
        let escalation = request.fields.contains_key("sandboxEscalation");
        if self.c.always.contains(&tool_name) && !escalation {
            self.reply_ui(&request.id, true)?;
            return self.running(&tool_call_id);
        }
        let args = self
            .c
            .shown
            .get(&tool_call_id)
            .map(|s| s.args.clone())
            .unwrap_or(Value::Null);
        let mut fields = updates::permission_fields(&tool_name, &args, self.place());
        let mut options = vec![PermissionOption::new(
            "allow_once",
            "Allow",
            PermissionOptionKind::AllowOnce,
        )];
        if escalation {
            fields = fields
                .title(field("title").unwrap_or_default())
                .content(vec![updates::text_content(
                    &field("message").unwrap_or_default(),
                )]);
        } else {
            options.push(PermissionOption::new(
                "allow_always",
                format!("Always allow {tool_name}"),
                PermissionOptionKind::AllowAlways,
            ));
        }
        options.push(PermissionOption::new(
            "reject_once",
            "Reject",
            PermissionOptionKind::RejectOnce,
        ));
        let params = RequestPermissionRequest::new(
            self.session_id(),
            ToolCallUpdate::new(tool_call_id.clone(), fields),
            options,
        );
        let id = self.next_request_id();
        self.ask(
            id.clone(),
            Outgoing::Permission {
                host_id: request.id,
                tool_call_id,
                tool_name,
            },
        );
        self.wire.request(id, "session/request_permission", params)
    }

    fn on_file(
        &mut self,
        host_id: String,
        operation: &str,
        url: &str,
        content: Option<String>,
    ) -> std::io::Result<()> {
        let Some(path) = url.strip_prefix("file://") else {
            return self.reply_uri(host_id, Err(format!("{url} is served by no one here")));
        };
        // The tools normalise a path and keep it to the session's roots before asking
        // (`tools/confine.rs`); anything else never reaches the editor as written.
        if !path.starts_with('/') || path.split('/').any(|part| part == "." || part == "..") {
            let refused = format!(
                "{path} is not an absolute, normalised path; it was not sent to the editor"
            );
            return self.reply_uri(host_id, Err(refused));
        }
        let id = self.next_request_id();
        match (operation, content) {
            ("write", Some(content)) => {
                let params = WriteTextFileRequest::new(self.session_id(), path, content);
                self.ask(id.clone(), Outgoing::Write { host_id });
                self.wire.request(id, "fs/write_text_file", params)
            }
            _ => {
                let params = ReadTextFileRequest::new(self.session_id(), path);
                self.ask(id.clone(), Outgoing::Read { host_id });
                self.wire.request(id, "fs/read_text_file", params)
            }
        }
    }

    /// The broker gave up on a call (abort, shutdown): the client is told with
    /// `$/cancel_request`, and its answer, if one still comes, is dropped.
    fn cancel_outgoing(&mut self, host_id: &str) -> std::io::Result<()> {
        let Some(id) = self
            .outgoing
            .iter()
            .find(|(_, o)| o.what.host_id() == Some(host_id))
            .map(|(id, _)| id.clone())
        else {
            return Ok(());
        };
        self.outgoing.remove(&id);
        self.wire
            .notify("$/cancel_request", json!({ "requestId": id }))
    }

    pub(super) fn on_client_response(
        &mut self,
        id: RequestId,
        result: Result<Value, Error>,
    ) -> std::io::Result<()> {
        let Some(asked) = self.outgoing.remove(&id) else {
            log::debug!("ignoring a response to {id}, which is not pending");
            return Ok(());
        };
        // A session that has ended had its calls rejected by the broker: nothing waits. A
        // terminal's steps are still followed to their end (its release).
        let live = self.focus(&asked.session);
        if !live && !matches!(asked.what, Outgoing::Terminal { .. }) {
            log::debug!(
                "ignoring a response to {id}: session {} has ended",
                asked.session
            );
            return Ok(());
        }
        match asked.what {
            Outgoing::Permission {
                host_id,
                tool_call_id,
                tool_name,
            } => {
                let chosen = chosen(result);
                let allowed = matches!(chosen.as_deref(), Some("allow_once" | "allow_always"));
                if chosen.as_deref() == Some("allow_always") {
                    self.c.always.insert(tool_name);
                }
                self.reply_ui(&host_id, allowed)?;
                if allowed {
                    self.running(&tool_call_id)?;
                }
                Ok(())
            }
            Outgoing::Read { host_id } => {
                let content = result.and_then(|v| {
                    serde_json::from_value::<ReadTextFileResponse>(v)
                        .map(|r| r.content)
                        .map_err(|e| Error::invalid_params().data(e.to_string()))
                });
                self.reply_uri(host_id, content.map(Some).map_err(describe))
            }
            Outgoing::Write { host_id } => {
                self.reply_uri(host_id, result.map(|_| None).map_err(describe))
            }
            Outgoing::Terminal { host_id } => self.on_terminal_response(&host_id, result),
            Outgoing::Trust { cwd } => self.on_trust_answer(cwd, chosen(result).as_deref()),
        }
    }

    /// Allowed: the call runs now.
    fn running(&mut self, tool_call_id: &str) -> std::io::Result<()> {
        self.update(SessionUpdate::ToolCallUpdate(updates::status(
            tool_call_id,
            ToolCallStatus::InProgress,
        )))
    }

    fn reply_ui(&mut self, host_id: &str, confirmed: bool) -> std::io::Result<()> {
        let reply = HostReply::UiResponse(UiResponse {
            id: host_id.to_string(),
            value: None,
            confirmed: Some(confirmed),
            cancelled: false,
            timed_out: false,
        });
        let _ = self.host.send(HostRequest::Reply(reply));
        Ok(())
    }

    fn reply_uri(
        &mut self,
        host_id: String,
        result: Result<Option<String>, String>,
    ) -> std::io::Result<()> {
        let (content, error) = match result {
            Ok(content) => (content, None),
            Err(e) => (None, Some(e)),
        };
        let reply = HostReply::UriResult(HostUriResult {
            id: host_id,
            is_error: error.is_some(),
            content,
            content_type: None,
            notes: Vec::new(),
            immutable: false,
            error,
        });
        let _ = self.host.send(HostRequest::Reply(reply));
        Ok(())
    }

    pub(super) fn next_request_id(&mut self) -> RequestId {
        self.next_client_id += 1;
        RequestId::Number(self.next_client_id)
    }
}

/// The option the user picked in answer to `session/request_permission`, if any.
fn chosen(result: Result<Value, Error>) -> Option<String> {
    let answer = result
        .ok()
        .and_then(|v| serde_json::from_value::<RequestPermissionResponse>(v).ok());
    match answer.map(|a| a.outcome) {
        Some(RequestPermissionOutcome::Selected(s)) => Some(s.option_id.0.to_string()),
        _ => None,
    }
}

/// The client's error as the tool shows it to the model.
pub(super) fn describe(error: Error) -> String {
    match error.data {
        Some(Value::String(detail)) => format!("the editor refused: {} ({detail})", error.message),
        Some(other) => format!("the editor refused: {} ({other})", error.message),
        None => format!("the editor refused: {}", error.message),
    }
}
