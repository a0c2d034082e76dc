//! The kernel sandbox: which policy a session's commands run under, and the confinement that
//! enforces it (docs/sandbox.md).
//!
//! The host chooses a policy (`--sandbox`, `set_sandbox`); what the user chose elsewhere can only
//! narrow it: a read-only workflow stage and ACP's plan mode make it `read-only`, an unattended
//! declaration without a write scope too, and one without a network scope turns network off.
//! The session owns one `Sandbox` and consults it when the policy or the cwd changes; tools get
//! the result as a `Commands` value and never reach back.
//!
//! Nothing here classifies commands. The kernel is the barrier: a policy the kernel cannot
//! enforce is an error for every command that would run under it (fail closed), never a command
//! run without it.

pub mod audit;
mod kernel;
pub mod launcher;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use kernel::{enter, landlock_abi, Confinement, RawConfinement, MIN_FS_ABI};

use crate::protocol::sandbox::{SandboxEnforcement, SandboxMode, SandboxState};

/// Why a command cannot run under the policy it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxError {
    /// The kernel cannot enforce the policy (no or too old Landlock, no seccomp).
    Unavailable(String),
    /// A writable root cannot be opened.
    Root(String),
}

impl SandboxError {
    /// The typed error's code on the wire.
    pub fn code(&self) -> &'static str {
        match self {
            SandboxError::Unavailable(_) => "sandbox_unavailable",
            SandboxError::Root(_) => "sandbox_root",
        }
    }
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Unavailable(why) | SandboxError::Root(why) => f.write_str(why),
        }
    }
}

/// What the host chose.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    pub mode: SandboxMode,
    pub network: bool,
    /// Writable folders the host added besides the cwd and the temp dir.
    pub roots: Vec<PathBuf>,
}

/// What the user chose elsewhere, which narrows the host's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// A workflow stage waits for its gate: nothing may change yet.
    pub stage: bool,
    /// ACP's plan mode.
    pub plan: bool,
    /// An unattended declaration: `(may write, may use the network)` from its scopes.
    pub unattended: Option<(bool, bool)>,
}

/// The policy in force, after the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub mode: SandboxMode,
    pub network: bool,
    pub limited_by: Option<&'static str>,
}

/// How a command is started.
#[derive(Debug, Clone)]
pub enum Launch {
    /// With no sandbox (`danger-full-access`).
    Unconfined,
    Confined(Arc<Confinement>),
    /// Not at all: the kernel cannot enforce what the command needs.
    Refused(SandboxError),
}

/// What a tool call may start commands with; cloned per call from the session.
#[derive(Debug, Clone)]
pub struct Commands {
    /// At the policy in force.
    pub launch: Launch,
    /// Read-only in the kernel, for a command run without asking in a mode that asks before
    /// anything may change.
    pub read_only: Launch,
    /// A denied command may be offered to the host to run again without the sandbox: only when
    /// the host's own policy confines it, not a stage, plan mode or a declaration.
    pub may_escalate: bool,
    /// Where the file tools may write (`None`: anywhere).
    pub write_roots: Option<Arc<[PathBuf]>>,
}

impl Default for Commands {
    /// No sandbox: what a context outside a session gets.
    fn default() -> Commands {
        Commands {
            launch: Launch::Unconfined,
            read_only: Launch::Unconfined,
            may_escalate: false,
            write_roots: None,
        }
    }
}

/// One session's sandbox: the host's policy, the limits, and the confinements made for them.
#[derive(Debug)]
pub struct Sandbox {
    policy: Policy,
    /// The Landlock ABI confinements use (`landlock_abi`, capped by the settings).
    abi: u32,
    limits: Limits,
    cwd: PathBuf,
    /// The private temp dir (0700), made when a confinement first needs it.
    temp: Option<tempfile::TempDir>,
    commands: Option<Commands>,
    /// The escalations' audit trail, opened at the first one.
    trail: Option<audit::Trail>,
}

impl Sandbox {
    /// The sandbox of a session working in `cwd`; `abi_cap` is `Settings::landlock_abi_cap`.
    pub fn new(policy: Policy, cwd: PathBuf, abi_cap: Option<u32>) -> Sandbox {
        Sandbox {
            policy,
            abi: landlock_abi(abi_cap),
            limits: Limits::default(),
            cwd,
            temp: None,
            commands: None,
            trail: None,
        }
    }

    /// Records an escalation the host was asked for in the session's audit trail.
    pub fn record_escalation(
        &mut self,
        session_dir: &Path,
        escalated: &audit::Escalated<'_>,
    ) -> Result<(), audit::TrailError> {
        let trail = match &mut self.trail {
            Some(trail) => trail,
            None => self
                .trail
                .insert(audit::Trail::open(session_dir, escalated.session_id)?),
        };
        trail.record(escalated)
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn set_policy(&mut self, policy: Policy) {
        if policy != self.policy {
            self.policy = policy;
            self.commands = None;
        }
    }

    pub fn set_limits(&mut self, limits: Limits) {
        if limits != self.limits {
            self.limits = limits;
            self.commands = None;
        }
    }

    pub fn set_cwd(&mut self, cwd: &Path) {
        if cwd != self.cwd {
            self.cwd = cwd.to_path_buf();
            self.commands = None;
        }
    }

    /// The host's policy narrowed by the limits.
    pub fn effective(&self) -> Effective {
        let mut mode = self.policy.mode;
        let mut network = self.policy.network || mode == SandboxMode::DangerFullAccess;
        let mut limited_by = None;
        let mut narrow = |to: SandboxMode, why: &'static str| {
            if to < mode {
                mode = to;
                limited_by.get_or_insert(why);
            }
        };
        if self.limits.stage {
            narrow(SandboxMode::ReadOnly, "workflow-stage");
        }
        if self.limits.plan {
            narrow(SandboxMode::ReadOnly, "plan-mode");
        }
        if let Some((write, net)) = self.limits.unattended {
            if !write {
                narrow(SandboxMode::ReadOnly, "unattended");
            } else {
                narrow(SandboxMode::WorkspaceWrite, "unattended");
            }
            if !net && network {
                network = false;
                limited_by.get_or_insert("unattended");
            }
        }
        Effective {
            mode,
            network,
            limited_by,
        }
    }

    /// How the host's `bash` and hooks start commands now. Without a sandbox nothing is prepared
    /// (a session that starts in `danger-full-access` builds no ruleset until a tool call needs
    /// the read-only one).
    pub fn launch(&mut self) -> Launch {
        match (&self.commands, self.effective().mode) {
            (Some(commands), _) => commands.launch.clone(),
            (None, SandboxMode::DangerFullAccess) => Launch::Unconfined,
            (None, _) => self.commands().launch,
        }
    }

    /// How tool calls start commands now (prepared once per policy, cwd and limits).
    pub fn commands(&mut self) -> Commands {
        if let Some(commands) = &self.commands {
            return commands.clone();
        }
        let effective = self.effective();
        let roots = match effective.mode {
            SandboxMode::WorkspaceWrite => Some(self.roots()),
            SandboxMode::ReadOnly => Some(Vec::new()),
            SandboxMode::DangerFullAccess => None,
        };
        let launch = match &roots {
            None => Launch::Unconfined,
            Some(roots) => self.confine(roots, effective.network),
        };
        let read_only = match effective.mode {
            SandboxMode::ReadOnly => launch.clone(),
            _ => self.confine(&[], effective.network),
        };
        let commands = Commands {
            launch,
            read_only,
            may_escalate: effective.mode != SandboxMode::DangerFullAccess
                && self.limits == Limits::default(),
            write_roots: roots.map(Arc::from),
        };
        self.commands = Some(commands.clone());
        commands
    }

    /// What `get_state` reports.
    pub fn state(&mut self) -> SandboxState {
        let effective = self.effective();
        // Without a sandbox there is nothing to prepare (the first `get_state` stays as cheap
        // as before); with one, what commands get is what is reported.
        let (error, roots) = match effective.mode {
            SandboxMode::DangerFullAccess => (None, None),
            _ => {
                let commands = self.commands();
                let error = match &commands.launch {
                    Launch::Refused(e) => Some(e.to_string()),
                    _ => None,
                };
                (error, commands.write_roots)
            }
        };
        SandboxState {
            policy: self.policy.mode,
            effective: effective.mode,
            network: effective.network,
            writable_roots: roots
                .iter()
                .flat_map(|roots| roots.iter())
                .map(|r| r.display().to_string())
                .collect(),
            limited_by: effective.limited_by.map(str::to_string),
            enforcement: SandboxEnforcement {
                landlock_abi: self.abi,
                network: kernel::network_enforcement(self.abi).to_string(),
                error,
            },
        }
    }

    /// The writable roots of `workspace-write`: the cwd, the temp dir, the host's.
    fn roots(&mut self) -> Vec<PathBuf> {
        let mut roots = vec![self.cwd.clone()];
        roots.extend(self.temp_dir());
        roots.extend(self.policy.roots.iter().cloned());
        roots
    }

    fn temp_dir(&mut self) -> Option<PathBuf> {
        if self.temp.is_none() {
            match tempfile::Builder::new().prefix("gjc-sandbox-").tempdir() {
                Ok(dir) => self.temp = Some(dir),
                Err(e) => log::warn!("the sandbox's private temp dir could not be made: {e}"),
            }
        }
        self.temp.as_ref().map(|t| t.path().to_path_buf())
    }

    fn confine(&mut self, roots: &[PathBuf], network: bool) -> Launch {
        let tmpdir = if roots.is_empty() {
            None
        } else {
            self.temp_dir()
        };
        match Confinement::prepare(roots, network, tmpdir, self.abi) {
            Ok(c) => Launch::Confined(Arc::new(c)),
            Err(e) => Launch::Refused(e),
        }
    }
}

impl Policy {
    /// The policy of the command line: `--sandbox` (or the mode's default: `workspace-write` for
    /// an editor over ACP, `danger-full-access` for RPC hosts, which expect it),
    /// `--sandbox-network`, `--writable-root`.
    pub fn from_args(
        sandbox: Option<&str>,
        acp: bool,
        network: bool,
        roots: &[PathBuf],
    ) -> Result<Policy, PolicyError> {
        let mode = match sandbox {
            Some("read-only") => SandboxMode::ReadOnly,
            Some("workspace-write") => SandboxMode::WorkspaceWrite,
            Some("danger-full-access") => SandboxMode::DangerFullAccess,
            Some(other) => return Err(PolicyError::UnknownMode(other.to_string())),
            None if acp => SandboxMode::WorkspaceWrite,
            None => SandboxMode::DangerFullAccess,
        };
        let roots: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        Ok(Policy {
            mode,
            network,
            roots: parse_roots(&roots)?,
        })
    }
}

/// Why a sandbox policy given by the host or the command line was refused.
#[derive(Debug)]
pub enum PolicyError {
    /// A `--sandbox` that is none of the three policies.
    UnknownMode(String),
    /// A writable root that is not an absolute path.
    RelativeRoot(String),
    /// A writable root that exists but is no folder.
    RootNotFolder(String),
    /// A writable root that cannot be looked at (missing, no permission).
    Root {
        root: String,
        source: std::io::Error,
    },
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::UnknownMode(m) => write!(f, "unknown sandbox policy {m:?}"),
            PolicyError::RelativeRoot(r) => {
                write!(f, "writable root {r:?} is not an absolute path")
            }
            PolicyError::RootNotFolder(r) => write!(f, "writable root {r:?} is not a folder"),
            PolicyError::Root { root, source } => write!(f, "writable root {root:?}: {source}"),
        }
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PolicyError::Root { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Checks the host's writable roots: absolute paths of existing folders.
pub fn parse_roots(roots: &[String]) -> Result<Vec<PathBuf>, PolicyError> {
    roots
        .iter()
        .map(|r| {
            let path = PathBuf::from(r);
            if !path.is_absolute() {
                return Err(PolicyError::RelativeRoot(r.clone()));
            }
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => Ok(path),
                Ok(_) => Err(PolicyError::RootNotFolder(r.clone())),
                Err(source) => Err(PolicyError::Root {
                    root: r.clone(),
                    source,
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
