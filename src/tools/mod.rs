//! The tools: the `Tool` trait, the registry (arguments are validated against each tool's JSON
//! Schema before it runs) and one module per tool. `run.rs` runs a call: on a kept `gjc-tool`
//! thread, or for a host tool with nothing around it on no thread, reporting `ToolMsg`s to the
//! session tagged with the run generation; a call's end carries its effects on the session
//! (`effect.rs`), which the session applies. Cancellation is a flag the tool checks plus, for
//! shell commands, a group kill, and for a host tool a cancel to the host.

pub mod ask;
pub mod bash;
pub mod confine;
mod direct;
pub mod edit;
mod effect;
mod errors;
pub mod escalate;
pub mod files;
pub mod find;
pub mod grep;
pub mod guard;
pub mod host_tool;
pub mod ls;
pub mod paths;
pub mod read;
mod run;
pub mod terminal;
pub mod todo;
pub mod workflow_gate;
pub mod write;

pub use direct::{DirectCall, DirectStart, DirectStep, Report};
pub use effect::{Outcome, ToolEffect};
pub use errors::{RegistryError, ValidationError};
pub use run::{host_answer, spawn, start_direct, Started, ToolEvent, ToolHandle, ToolMsg};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::exec::BashHandle;
use crate::host::uri::UriScheme;
use crate::host::HostHandle;
use crate::protocol::message::ToolOutput;
use crate::provider::ToolSpec;

/// What a tool may use while it runs.
pub struct ToolContext {
    pub cwd: PathBuf,
    /// `Settings::home`: what `~` in a path means.
    pub home: Option<PathBuf>,
    pub call_id: String,
    pub cancel: Arc<AtomicBool>,
    pub bash: BashHandle,
    /// The host broker and the host's URI schemes, when a host is attached (RPC mode).
    pub host: Option<HostHandle>,
    pub schemes: Arc<Vec<UriScheme>>,
    /// What the host allows and serves (`guard.rs`); the default changes nothing.
    pub policy: guard::ToolPolicy,
    /// How commands start: the kernel sandbox of the session (`crate::sandbox`).
    pub sandbox: crate::sandbox::Commands,
    updates: Box<dyn Fn(ToolOutput) + Send + Sync>,
    /// Reaches the gate broker (through the session); false when there is none.
    gates: Box<dyn Fn(crate::gates::GateRequest) -> bool + Send + Sync>,
}

/// What a tool call may use besides its arguments; cloned per call from the session.
#[derive(Clone)]
pub struct Services {
    pub cwd: PathBuf,
    pub bash: BashHandle,
    pub host: HostHandle,
    pub schemes: Arc<Vec<UriScheme>>,
    pub policy: guard::ToolPolicy,
    pub sandbox: crate::sandbox::Commands,
    /// The process's settings (`~` in paths, the test panic point of the tool thread).
    pub settings: Arc<crate::settings::Settings>,
}

impl ToolContext {
    /// A context with no update listener (for running a tool outside a session).
    pub fn new(cwd: PathBuf, call_id: String, bash: BashHandle) -> ToolContext {
        ToolContext {
            cwd,
            home: None,
            call_id,
            cancel: Arc::new(AtomicBool::new(false)),
            bash,
            host: None,
            schemes: Arc::default(),
            policy: guard::ToolPolicy::default(),
            sandbox: Default::default(),
            updates: Box::new(|_| {}),
            gates: Box::new(|_| false),
        }
    }

    /// Where a path the model gave lives: `Ok(Some)` for a scheme the host registered
    /// (`db://users/42`), `Ok(None)` for a local file, and an error for any other URL-shaped
    /// path, which must not become a local folder named `foo:`.
    pub fn host_scheme(&self, path: &str) -> Result<Option<&UriScheme>, String> {
        let Some(scheme) = paths::url_scheme(path) else {
            return Ok(None);
        };
        let scheme = scheme.to_ascii_lowercase();
        if let Some(found) = self.schemes.iter().find(|s| s.scheme == scheme) {
            return Ok(Some(found));
        }
        let registered = if self.schemes.is_empty() {
            "none are registered".to_string()
        } else {
            let names: Vec<&str> = self.schemes.iter().map(|s| s.scheme.as_str()).collect();
            format!("registered schemes: {}", names.join(", "))
        };
        Err(format!(
            "Cannot use {path}: no host serves the \"{scheme}\" scheme; {registered}. A local file is named by a plain path, without \"scheme://\"."
        ))
    }

    /// A local path for the tools that only work on local files (`ls`, `find`, `grep`).
    pub fn local_only(&self, tool: &str, path: &str) -> Result<PathBuf, String> {
        if let Some(scheme) = self.host_scheme(path)? {
            return Err(format!(
                "{tool} works on local files; {}:// paths belong to the host. Use read to see {path}.",
                scheme.scheme
            ));
        }
        Ok(self.resolve(path))
    }

    /// Where `path` (as the model gave it) is on disk.
    pub fn resolve(&self, path: &str) -> PathBuf {
        paths::resolve(&self.cwd, self.home.as_deref(), path)
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    /// Replaces the host's display of the partial result (`tool_execution_update`).
    pub fn update(&self, partial: ToolOutput) {
        (self.updates)(partial);
    }

    /// Gives the context a way to the gate broker (tests and embedders without a session).
    pub fn with_gates(
        mut self,
        gates: impl Fn(crate::gates::GateRequest) -> bool + Send + Sync + 'static,
    ) -> ToolContext {
        self.gates = Box::new(gates);
        self
    }

    /// Sends a request to the gate broker; false when no broker is reachable.
    pub fn gate(&self, request: crate::gates::GateRequest) -> bool {
        (self.gates)(request)
    }
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> String;
    fn parameters(&self) -> Value;
    /// Runs the call. A failure is an `is_error` output, which the model sees.
    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput;
    /// Runs the call for a session: its output and what the session is to change because of it
    /// (`ToolEffect`). Most tools change nothing but through their output.
    fn run(&self, args: &Value, ctx: &ToolContext) -> Outcome {
        self.execute(args, ctx).into()
    }
    /// A host tool, which `spawn` may start without a thread of its own.
    fn as_host(&self) -> Option<&host_tool::HostTool> {
        None
    }
    /// The shell tool, which `spawn` may start without a thread of its own.
    fn as_bash(&self) -> Option<&bash::Bash> {
        None
    }
    /// A tool whose calls start on no thread and are reported by another thread (an MCP
    /// server's), which `spawn` may start that way.
    fn as_direct(&self) -> Option<&dyn DirectStart> {
        None
    }
}

/// The default active set (the seed's tool names).
pub const DEFAULT_TOOLS: &[&str] = &[
    "read",
    "bash",
    "edit",
    "write",
    "grep",
    "find",
    "ls",
    "todo_write",
];

pub fn all_builtin() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(read::Read),
        Arc::new(bash::Bash),
        Arc::new(edit::Edit),
        Arc::new(write::Write),
        Arc::new(grep::Grep),
        Arc::new(find::Find),
        Arc::new(ls::Ls),
        Arc::new(todo::TodoWrite),
        Arc::new(ask::Ask),
        Arc::new(workflow_gate::WorkflowGateTool),
    ]
}

/// Every built-in tool name (host tools may not take one).
pub fn builtin_names() -> Vec<String> {
    all_builtin().iter().map(|t| t.name().to_string()).collect()
}

struct Entry {
    tool: Arc<dyn Tool>,
    /// Compiled on first use: a compiled schema costs memory, and most sessions call few tools.
    validator: std::sync::OnceLock<Option<jsonschema::Validator>>,
}

/// The host's tools (`set_host_tools`) as one registry hands them to another, schemas compiled.
pub struct HostTools(Vec<Entry>);

/// The active tools, by name, with their compiled schemas: the built-in set chosen at startup,
/// then the host's tools (`set_host_tools` replaces those).
pub struct ToolRegistry {
    entries: Vec<Entry>,
    host: Vec<Entry>,
    /// The tools of the session's MCP servers (`set_mcp_tools` replaces them).
    mcp: Vec<Entry>,
    /// What the model is told of the tools, built once per change of the set: every request
    /// sends it, and building the schemas per turn cost more than the turn's new messages.
    specs: std::sync::OnceLock<Arc<[ToolSpec]>>,
}

impl ToolRegistry {
    /// The built-in tools named in `names` (unknown names are an error for `--tools`).
    pub fn builtin(names: &[String]) -> Result<ToolRegistry, RegistryError> {
        let all = all_builtin();
        let mut entries = Vec::new();
        for name in names {
            let tool = all
                .iter()
                .find(|t| t.name() == name)
                .ok_or_else(|| RegistryError {
                    name: name.clone(),
                    known: all.iter().map(|t| t.name().to_string()).collect(),
                })?;
            entries.push(Entry {
                validator: std::sync::OnceLock::new(),
                tool: tool.clone(),
            });
        }
        Ok(ToolRegistry {
            entries,
            host: Vec::new(),
            mcp: Vec::new(),
            specs: std::sync::OnceLock::new(),
        })
    }

    /// Activates a built-in tool that was not chosen at start-up (a workflow stage needs it).
    pub fn ensure_builtin(&mut self, name: &str) {
        if self.entries.iter().any(|e| e.tool.name() == name) {
            return;
        }
        if let Some(tool) = all_builtin().into_iter().find(|t| t.name() == name) {
            self.specs = std::sync::OnceLock::new();
            self.entries.push(Entry {
                validator: std::sync::OnceLock::new(),
                tool,
            });
        }
    }

    fn all(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .chain(self.host.iter())
            .chain(self.mcp.iter())
    }

    /// Replaces the MCP servers' tools; their schemas compile on first use, like built-ins'.
    pub fn set_mcp_tools(&mut self, tools: Vec<Arc<dyn Tool>>) {
        self.specs = std::sync::OnceLock::new();
        self.mcp = tools
            .into_iter()
            .map(|tool| Entry {
                tool,
                validator: std::sync::OnceLock::new(),
            })
            .collect();
    }

    pub fn names(&self) -> Vec<&str> {
        self.all().map(|e| e.tool.name()).collect()
    }

    /// Replaces the host tools; each comes with its schema already compiled (it was validated).
    pub fn set_host_tools(&mut self, tools: Vec<(Arc<dyn Tool>, jsonschema::Validator)>) {
        self.specs = std::sync::OnceLock::new();
        self.host = tools
            .into_iter()
            .map(|(tool, validator)| Entry {
                tool,
                validator: std::sync::OnceLock::from(Some(validator)),
            })
            .collect();
    }

    /// Takes the host tools out (a session's successor keeps what the host set).
    pub fn take_host_tools(&mut self) -> HostTools {
        self.specs = std::sync::OnceLock::new();
        HostTools(std::mem::take(&mut self.host))
    }

    /// Puts host tools taken from another registry in place of this one's.
    pub fn keep_host_tools(&mut self, tools: HostTools) {
        self.specs = std::sync::OnceLock::new();
        self.host = tools.0;
    }

    /// The active tools as the model is told of them; shared, not rebuilt, until the set changes.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs
            .get_or_init(|| {
                self.all()
                    .map(|e| ToolSpec {
                        name: e.tool.name().into(),
                        description: e.tool.description(),
                        parameters: e.tool.parameters(),
                    })
                    .collect()
            })
            .clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.all()
            .find(|e| e.tool.name() == name)
            .map(|e| e.tool.clone())
    }

    /// Checks arguments against the tool's schema; the message lists every violation.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), ValidationError> {
        let Some(entry) = self.all().find(|e| e.tool.name() == name) else {
            return Err(ValidationError::UnknownTool(name.to_string()));
        };
        let compiled = entry
            .validator
            .get_or_init(|| jsonschema::validator_for(&entry.tool.parameters()).ok());
        let Some(validator) = compiled else {
            return Ok(());
        };
        let violations: Vec<String> = validator
            .iter_errors(args)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(ValidationError::Invalid {
                tool: name.to_string(),
                violations,
            })
        }
    }
}

/// Reads an optional string argument.
pub fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Reads an optional non-negative integer argument (integral floats accepted).
pub fn uint_arg(args: &Value, key: &str) -> Option<u64> {
    let v = args.get(key)?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::message::Content;
    use std::sync::OnceLock;

    pub fn bash() -> BashHandle {
        static BASH: OnceLock<BashHandle> = OnceLock::new();
        BASH.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("gjc-unit-{}", std::process::id()));
            let (handle, _thread) = crate::exec::spawn(dir, false, None).expect("bash thread");
            handle
        })
        .clone()
    }

    pub fn ctx() -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext {
            cwd: dir.path().to_path_buf(),
            home: None,
            call_id: crate::ids::short_id(),
            cancel: Arc::new(AtomicBool::new(false)),
            bash: bash(),
            host: None,
            schemes: Arc::default(),
            policy: guard::ToolPolicy::default(),
            sandbox: Default::default(),
            updates: Box::new(|_| {}),
            gates: Box::new(|_| false),
        };
        (dir, ctx)
    }

    pub fn text(out: &ToolOutput) -> String {
        out.content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn schema_validation_reports_fields() {
        let reg = ToolRegistry::builtin(&["read".to_string()]).unwrap();
        assert!(reg
            .validate("read", &serde_json::json!({"path": "a"}))
            .is_ok());
        let err = reg
            .validate("read", &serde_json::json!({"path": 3}))
            .unwrap_err();
        assert!(err.to_string().contains("/path"), "{err}");
        assert!(
            matches!(&err, ValidationError::Invalid { tool, violations } if tool == "read" && violations.len() == 1),
            "{err:?}"
        );
        let missing = reg.validate("nope", &serde_json::json!({})).unwrap_err();
        assert_eq!(missing, ValidationError::UnknownTool("nope".into()));
        assert_eq!(missing.to_string(), "Tool nope not found");
        let unknown = ToolRegistry::builtin(&["read".into(), "zzz".into()])
            .err()
            .unwrap();
        assert_eq!(unknown.name, "zzz");
        assert!(unknown.known.iter().any(|k| k == "bash"), "{unknown}");
        assert!(unknown
            .to_string()
            .starts_with("unknown tool \"zzz\"; built-in tools: "));
    }
}
