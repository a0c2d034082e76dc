//! Asking the editor whether a project may run programs. A session opened (new, load, resume)
//! in a folder with its own `.gjc/hooks.json` that nobody decided about asks once with
//! `session/request_permission`; until the answer, the session has skipped those hooks (it
//! loads a project's hooks only when it is trusted, `crate::trust`). "Trust" and "never" are
//! sent to the session as `trust_project`, which remembers them in the agent dir and, for
//! "trust", loads the hooks at once. A project that stays untrusted is named in a notice.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionRequest,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind,
};
use serde_json::json;

use super::callbacks::Outgoing;
use super::front::{Front, Waiting};
use crate::trust::{Decision, TrustStore};

/// The options of the question, by id.
const TRUST: &str = "allow_always";
const NOT_NOW: &str = "reject_once";
const NEVER: &str = "reject_always";

impl<W: Write> Front<W> {
    /// After a session opened in `self.c.cwd`: asks about its project if it has hooks and nobody
    /// decided yet (and no question about it is open), or says that a refused one's hooks are
    /// skipped.
    pub(super) fn check_trust(&mut self) -> std::io::Result<()> {
        let cwd = self.c.cwd.clone();
        if !crate::hooks::has_project_file(&cwd) || self.asking_trust(&cwd) {
            return Ok(());
        }
        match TrustStore::new(&self.projects.agent_dir).decision(&cwd) {
            Decision::Trusted => Ok(()),
            Decision::Refused => self.notice(&skipped(&cwd)),
            Decision::Unknown => self.ask_trust(cwd),
        }
    }

    fn asking_trust(&self, cwd: &Path) -> bool {
        self.outgoing
            .values()
            .any(|o| matches!(&o.what, Outgoing::Trust { cwd: asked } if asked == cwd))
    }

    fn ask_trust(&mut self, cwd: PathBuf) -> std::io::Result<()> {
        let file = crate::hooks::project_file(&cwd);
        let explained = format!(
            "{} lists programs gjc would run on session and tool events. Trust this project \
             only if you know what they do; the answer is remembered.",
            file.display()
        );
        let fields = ToolCallUpdateFields::new()
            .kind(ToolKind::Execute)
            .title(format!("Run the hooks of {}?", cwd.display()))
            .status(ToolCallStatus::Pending)
            .locations(vec![ToolCallLocation::new(file)])
            .content(vec![ToolCallContent::from(ContentBlock::from(explained))]);
        let options = vec![
            PermissionOption::new(
                TRUST,
                "Trust this project",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(NOT_NOW, "Not now", PermissionOptionKind::RejectOnce),
            PermissionOption::new(
                NEVER,
                "Never for this project",
                PermissionOptionKind::RejectAlways,
            ),
        ];
        let id = self.next_request_id();
        let call = ToolCallUpdate::new(format!("gjc-trust-{id}"), fields);
        let params = RequestPermissionRequest::new(self.session_id(), call, options);
        self.ask(id.clone(), Outgoing::Trust { cwd });
        self.wire.request(id, "session/request_permission", params)
    }

    /// The editor's answer (`None`: cancelled, an error, or not an answer). "Trust" and "never"
    /// are remembered; every answer but "trust" leaves the hooks skipped, which a notice says.
    pub(super) fn on_trust_answer(
        &mut self,
        cwd: PathBuf,
        chosen: Option<&str>,
    ) -> std::io::Result<()> {
        let trusted = match chosen {
            Some(TRUST) => true,
            Some(NEVER) => false,
            _ => return self.notice(&skipped(&cwd)),
        };
        let fields = json!({"cwd": cwd.to_string_lossy(), "trusted": trusted});
        self.command("trust_project", fields, Waiting::Trust(cwd.clone()));
        if trusted {
            Ok(())
        } else {
            self.notice(&skipped(&cwd))
        }
    }
}

/// The notice for a project whose hooks are not loaded.
pub(super) fn skipped(cwd: &Path) -> String {
    format!(
        "The hooks of {} (.gjc/hooks.json) are not loaded: the project is not trusted",
        cwd.display()
    )
}
