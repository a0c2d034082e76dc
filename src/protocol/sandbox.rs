//! The kernel sandbox on the wire: the policy a host chooses (`--sandbox`, `set_sandbox`) and
//! what `get_state` reports of it (docs/sandbox.md).

use serde::{Deserialize, Serialize};

/// How much a command may touch, from least to most.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Reads anywhere, writes nowhere.
    ReadOnly,
    /// Writes only under the writable roots (the session's cwd, its private temp dir, the
    /// host's roots).
    WorkspaceWrite,
    /// No sandbox at all: only ever the host's explicit choice.
    #[default]
    DangerFullAccess,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }
}

/// `set_sandbox`: each field given replaces the host's current choice; absent fields keep it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetSandboxParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SandboxMode>,
    /// Whether commands may open network sockets (TCP, UDP, ...) under a sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Writable folders besides the session's cwd and temp dir (absolute, existing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writable_roots: Option<Vec<String>>,
}

/// `get_state.sandbox`, and the answer to `set_sandbox`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxState {
    /// What the host chose.
    pub policy: SandboxMode,
    /// What commands run under now: the host's choice, narrowed by a read-only workflow stage,
    /// plan mode or the unattended declaration's scopes.
    pub effective: SandboxMode,
    /// Whether commands may use the network now.
    pub network: bool,
    /// Where commands and file tools may write now (empty unless `workspace-write`).
    pub writable_roots: Vec<String>,
    /// What narrowed the host's choice: `workflow-stage`, `plan-mode` or `unattended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    pub enforcement: SandboxEnforcement,
}

/// What this kernel enforces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxEnforcement {
    /// The Landlock ABI in use (0: the kernel has none).
    pub landlock_abi: u32,
    /// How network is refused when it is off: `landlock+seccomp`, `seccomp` or `none`.
    pub network: String,
    /// Why commands are refused under the effective policy (the kernel cannot enforce it); absent
    /// when they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
