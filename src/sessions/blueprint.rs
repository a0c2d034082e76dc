//! What every new session is made from: the start-up choices (model, thinking level, tools,
//! how a project loads, where sessions are stored, the sandbox policy), resolved once at start.
//! A session made from it owns its copy (the model catalog is shared); nothing here changes
//! after start.

use std::path::PathBuf;
use std::sync::Arc;

use crate::provider::catalog::{Catalog, Model};
use crate::provider::scripted::Script;
use crate::session::project::{Loaded, ProjectOptions};
use crate::session::queue::Queues;
use crate::session::retry::RetryPolicy;
use crate::session::state::Session;
use crate::session::store::Store;
use crate::session::swap::{Opening, Stored};
use crate::settings::Settings;
use crate::tools::{RegistryError, ToolRegistry};

pub struct Blueprint {
    /// Shared with each session made from it, not copied.
    pub catalog: Arc<Catalog>,
    pub model: Option<Model>,
    pub thinking: &'static str,
    /// The tools each session gets (`--tools`, `--no-tools`).
    pub tool_names: Vec<String>,
    pub script: Option<Result<Arc<Script>, String>>,
    /// How a project loads, and the agent's folder.
    pub project: ProjectOptions,
    /// False with `--no-session`: sessions keep no file.
    pub persistent: bool,
    pub compact_updates: bool,
    /// The sandbox policy every session starts with.
    pub policy: crate::sandbox::Policy,
    /// The registry's name for the front end (`stdio`).
    pub transport: &'static str,
    /// The environment's settings, resolved at start; each session reads its fields from here.
    pub settings: Arc<Settings>,
}

impl Blueprint {
    /// The state of a new session with id `id` working in `cwd` (canonical, a directory).
    pub fn session(&self, id: String, cwd: PathBuf) -> Result<Session, RegistryError> {
        self.open(id, cwd, Opening::New { parent: None })
    }

    /// The state of session `id` working in `cwd`, its file as `opening` says.
    pub fn open(
        &self,
        id: String,
        cwd: PathBuf,
        opening: Opening,
    ) -> Result<Session, RegistryError> {
        let tools = ToolRegistry::builtin(&self.tool_names)?;
        let Loaded {
            system_prompt,
            rules,
        } = self.project.load(&cwd, &tools.specs());
        let sessions_root = self.project.agent_dir.join("sessions");
        let session_dir = self.project.session_dir(&sessions_root, &cwd);
        let (store, messages, name) = match opening {
            Opening::New { parent } if self.persistent => (
                Store::create(&session_dir, &id, &cwd, parent.as_deref()),
                Default::default(),
                None,
            ),
            Opening::New { .. } => (Store::in_memory(&id, &cwd), Default::default(), None),
            Opening::Stored(stored) => {
                let Stored {
                    store,
                    context,
                    name,
                } = *stored;
                (store, context, name)
            }
        };
        Ok(Session {
            id,
            name,
            cwd,
            catalog: self.catalog.clone(),
            model: self.model.clone(),
            thinking: self.thinking,
            queues: Queues::default(),
            retry: RetryPolicy::new(self.settings.retry_base),
            auto_compaction: true,
            messages,
            todos: Vec::new(),
            system_prompt,
            rules: Arc::new(rules),
            tools,
            script: self.script.clone(),
            schemes: Arc::default(),
            store,
            session_dir,
            sessions_root,
            project: self.project.clone(),
            workflow: Default::default(),
            project_trusted: false,
            settings: self.settings.clone(),
        })
    }

    /// The sandbox of a session working in `cwd`.
    pub fn sandbox(&self, cwd: PathBuf) -> crate::sandbox::Sandbox {
        crate::sandbox::Sandbox::new(self.policy.clone(), cwd, self.settings.landlock_abi_cap)
    }

    /// The registry record of a session working in `cwd`.
    pub fn registry(&self, cwd: &std::path::Path) -> crate::registry::Registry {
        crate::registry::Registry::new(&self.project.agent_dir, self.transport, cwd)
    }
}
