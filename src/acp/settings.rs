//! The session's settings as ACP shows them: the modes (`session/set_mode`) and the config
//! options (`session/set_config_option`: the model and the permission setting), and the tool
//! policy they add up to, which the session applies to every tool call.

use std::io::Write;

use agent_client_protocol_schema::v1::{
    Error, RequestId, SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
    SessionMode, SessionModeState, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse,
};
use serde_json::json;

use super::front::{Front, Waiting};
use super::updates::SessionUpdate;
use crate::lanes::CommandFrame;
use crate::protocol::sandbox::SandboxMode;
use crate::tools::guard::{Approval, ToolPolicy};

/// The modes a session offers (`session/set_mode`).
const MODES: &[(&str, &str, &str)] = &[
    (
        "default",
        "Default",
        "Reads, edits and runs commands; asks as the permission setting says",
    ),
    (
        "plan",
        "Plan",
        "Read-only: looks and plans; edits and commands that change things are refused",
    ),
    (
        FULL_ACCESS,
        "Full access",
        "Like Default, but commands run without the sandbox: they may write anywhere and use the network",
    ),
];

/// The mode whose commands run with no sandbox: only ever the user's explicit choice.
const FULL_ACCESS: &str = "full-access";

/// The permission setting (`session/set_config_option`, id `permissions`).
const PERMISSIONS: &[(&str, &str, &str)] = &[
    (
        "ask",
        "Ask",
        "Ask before each edit and each command that may change something",
    ),
    (
        "allow_edits",
        "Allow edits",
        "Edit files without asking; ask before commands",
    ),
    ("allow_all", "Allow all", "Never ask"),
];
impl<W: Write> Front<W> {
    pub(super) fn set_mode(
        &mut self,
        id: RequestId,
        p: SetSessionModeRequest,
    ) -> std::io::Result<()> {
        if let Some(e) = self.not_served(&p.session_id) {
            return self.wire.respond::<()>(id, Err(e));
        }
        let Some(&(mode, _, _)) = MODES.iter().find(|(m, _, _)| *m == &*p.mode_id.0) else {
            return self.wire.respond::<()>(
                id,
                Err(Error::invalid_params().data(format!("no mode {}", p.mode_id))),
            );
        };
        let sandbox_changes = (self.c.mode == FULL_ACCESS) != (mode == FULL_ACCESS);
        self.c.mode = mode;
        self.send_policy();
        if sandbox_changes {
            self.send_sandbox();
        }
        self.wire.respond(id, Ok(SetSessionModeResponse::new()))?;
        self.update(SessionUpdate::CurrentModeUpdate(
            agent_client_protocol_schema::v1::CurrentModeUpdate::new(mode),
        ))
    }

    pub(super) fn set_config_option(
        &mut self,
        id: RequestId,
        p: SetSessionConfigOptionRequest,
    ) -> std::io::Result<()> {
        if let Some(e) = self.not_served(&p.session_id) {
            return self.wire.respond::<()>(id, Err(e));
        }
        let value = match &p.value {
            agent_client_protocol_schema::v1::SessionConfigOptionValue::ValueId { value } => {
                value.0.to_string()
            }
            _ => String::new(),
        };
        let found = PERMISSIONS.iter().find(|(v, _, _)| *v == value);
        match (&*p.config_id.0, found) {
            ("permissions", Some(&(v, _, _))) => {
                self.c.permissions = v;
                self.send_policy();
                let options = self.config_options();
                self.wire
                    .respond(id, Ok(SetSessionConfigOptionResponse::new(options)))
            }
            ("model", _) if self.models.iter().any(|(m, _)| *m == value) => {
                if let Some((provider, model_id)) = value.split_once('/') {
                    let fields = json!({"provider": provider, "modelId": model_id});
                    let then = Waiting::SetModel(id, value.clone());
                    self.command("set_model", fields, then);
                }
                Ok(())
            }
            _ => self.wire.respond::<()>(
                id,
                Err(Error::invalid_params()
                    .data(format!("no option {} with value {value:?}", p.config_id))),
            ),
        }
    }

    pub(super) fn modes(&self) -> SessionModeState {
        let modes = MODES
            .iter()
            .map(|(id, name, description)| {
                SessionMode::new(*id, *name).description(description.to_string())
            })
            .collect();
        SessionModeState::new(self.c.mode, modes)
    }

    pub(super) fn config_options(&self) -> Vec<SessionConfigOption> {
        let values: Vec<SessionConfigSelectOption> = PERMISSIONS
            .iter()
            .map(|(id, name, description)| {
                SessionConfigSelectOption::new(*id, *name).description(description.to_string())
            })
            .collect();
        let permissions =
            SessionConfigOption::select("permissions", "Permissions", self.c.permissions, values)
                .category(SessionConfigOptionCategory::Other("_permissions".into()))
                .description("When gjc asks before it edits or runs a command".to_string());
        let Some(current) = &self.c.model else {
            return vec![permissions];
        };
        let mut models: Vec<SessionConfigSelectOption> = self
            .models
            .iter()
            .map(|(id, name)| SessionConfigSelectOption::new(id.clone(), name.clone()))
            .collect();
        if !self.models.iter().any(|(id, _)| id == current) {
            models.insert(
                0,
                SessionConfigSelectOption::new(current.clone(), current.clone()),
            );
        }
        let model = SessionConfigOption::select("model", "Model", current.clone(), models)
            .category(SessionConfigOptionCategory::Model);
        vec![model, permissions]
    }

    /// Tells the session which sandbox commands run in: none in the full-access mode, else the
    /// one gjc started with.
    fn send_sandbox(&mut self) {
        let policy = match self.c.mode {
            FULL_ACCESS => SandboxMode::DangerFullAccess,
            _ => self.sandbox,
        };
        self.command("set_sandbox", json!({"policy": policy}), Waiting::Nobody);
    }

    /// Tells the session which calls need approval, which are refused, and whether the editor
    /// serves file reads and writes.
    pub(super) fn send_policy(&mut self) {
        let approval = match self.c.permissions {
            "allow_all" => Approval::Never,
            "allow_edits" => Approval::Commands,
            _ => Approval::EditsAndCommands,
        };
        let policy = ToolPolicy {
            approval,
            read_only: self.c.mode == "plan",
            host_reads: self.client.fs.read_text_file,
            host_writes: self.client.fs.write_text_file,
            host_terminal: self.client.terminal,
        };
        let Some(live) = &self.c.live else { return };
        if !live.command(CommandFrame::Policy(policy)) {
            log::warn!("the tool policy was not applied: the command lane is full or closed");
        }
    }
}
