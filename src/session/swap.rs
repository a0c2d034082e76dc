//! `new_session`, `switch_session`, `branch` and a manual `handoff` replace the session's actor.
//! The old actor checks everything that can fail first (the folder, the file to load), so a
//! refused command leaves it untouched; then it ends as at shutdown (its run aborted, its MCP
//! servers stopped, its commands killed, its host callbacks rejected, its file synced) and hands
//! a [`Handover`] to the session host, which starts the successor from the blueprint on the same thread. The
//! successor answers the command first, so no frame of the old actor follows the answer.
//!
//! What passes over is what belongs to the connection, not the conversation: the front end's
//! lanes (so the RPC reader routes on to the successor without knowing of the swap, and the
//! commands queued behind the swap are the successor's), the output lane's outbox, the host's
//! settings (model, thinking level, queue modes, auto-compaction and retry switches, host tools,
//! URI schemes, tool policy, sandbox policy), the process's registry record and the side
//! workers with the requests they still owe an answer. Everything of the conversation is the
//! new session's own: history, todos, gates and stage, the unattended declaration, rules and
//! context, hooks, MCP servers.
//!
//! A manual `handoff` swaps too, once its document is written (the successor writes it first).
//! An automatic handoff (`handoff.rs`) does not: its run goes on in the new session, and a run
//! (its phase, queues, retry budget, tool loop) lives in the actor; it continues in place.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::reply::{response, Answer, CommandError, Reply};
use super::retry::RetryPolicy;
use super::{Lanes, SessionLoop};
use crate::exec::{BashHandle, JobOwner};
use crate::host::HostHandle;
use crate::protocol::{reply, Data, Outbound, Response};
use crate::provider::catalog::{self, Model};

/// What a session's file is when its actor starts.
pub enum Opening {
    /// A new file (none with `--no-session`), its `parentSession` the given one.
    New { parent: Option<String> },
    /// A stored session, already opened (`switch_session`, `branch`).
    Stored(Box<Stored>),
}

/// A stored session as it was opened: its file, its context and its title.
pub struct Stored {
    pub store: super::store::Store,
    pub context: super::context::Context,
    pub name: Option<String>,
}

/// The session that follows, as the old actor decided it.
pub struct Successor {
    pub id: String,
    pub cwd: PathBuf,
    pub opening: Opening,
    /// The model and thinking level the loaded file names, when the catalog has them.
    loaded_model: Option<Model>,
    loaded_thinking: Option<String>,
    /// Frames the successor sends just before its answer (`branch`'s editor text).
    before: Vec<Outbound>,
    /// The answer to the command that asked for the swap.
    answer: Answering,
}

/// How the successor answers the command that made it.
enum Answering {
    /// With this response.
    Now(Response),
    /// A manual `handoff`: once it has written the document (`handoff.rs`).
    Handoff { id: Option<Value>, document: String },
}

/// The host's settings for the connection, which outlive a session.
struct Carried {
    model: Option<Model>,
    thinking: &'static str,
    queues: super::queue::Queues,
    auto_compaction: bool,
    retry: RetryPolicy,
    host_tools: crate::tools::HostTools,
    schemes: std::sync::Arc<Vec<crate::host::uri::UriScheme>>,
    tool_policy: crate::tools::guard::ToolPolicy,
    sandbox: crate::sandbox::Policy,
}

/// What an ending actor hands to its successor (see the module documentation).
pub struct Handover {
    pub successor: Successor,
    ch: Lanes,
    outbox: super::outbox::Outbox,
    side: super::side::SideWorkers,
    registry: crate::registry::Registry,
    next_generation: u64,
    carried: Carried,
    /// The front end's input had ended: the successor answers what is queued, then returns.
    input_closed: bool,
}

impl Handover {
    /// The successor's file, for the blueprint to open the successor's state with.
    pub fn take_opening(&mut self) -> Opening {
        let none = Opening::New { parent: None };
        std::mem::replace(&mut self.successor.opening, none)
    }
}

/// The parts of a successor the session host makes for it.
pub struct Parts {
    pub state: super::state::Session,
    pub bash: BashHandle,
    pub host: HostHandle,
    pub sandbox: crate::sandbox::Sandbox,
}

impl SessionLoop {
    /// `new_session`: a new session (in `cwd` when given) follows this one.
    pub(super) fn new_session(
        &mut self,
        id: Option<Value>,
        parent: Option<&str>,
        cwd: Option<String>,
    ) -> Reply {
        let cwd = match project_cwd(cwd) {
            Ok(cwd) => cwd.unwrap_or_else(|| self.state.cwd.clone()),
            Err(e) => return Reply::answer(id, "new_session", Err(e)),
        };
        let parent = match self.state.store.is_persistent() {
            true => parent
                .map(str::to_string)
                .or_else(|| self.state.store.path().map(|p| p.display().to_string())),
            false => None,
        };
        let answer = data(&reply::Cancelled {
            cancelled: false,
            repaired: None,
        });
        self.successor = Some(Successor {
            id: crate::ids::uuid_v7(),
            cwd,
            opening: Opening::New { parent },
            loaded_model: None,
            loaded_thinking: None,
            before: Vec::new(),
            answer: Answering::Now(response(id, "new_session", answer)),
        });
        Reply::later()
    }

    /// A manual `handoff` whose document is written: a new session (its parent this one's
    /// file) follows this one and starts with the document.
    pub(super) fn hand_off_to_successor(&mut self, id: Option<Value>, document: String) {
        let parent = (self.state.store.path()).map(|p| p.display().to_string());
        self.successor = Some(Successor {
            id: crate::ids::uuid_v7(),
            cwd: self.state.cwd.clone(),
            opening: Opening::New { parent },
            loaded_model: None,
            loaded_thinking: None,
            before: Vec::new(),
            answer: Answering::Handoff { id, document },
        });
    }

    /// `switch_session`: the stored session at `path` follows this one. A missing or corrupt
    /// file, or a bad folder, leaves this session as it was.
    pub(super) fn switch_session(
        &mut self,
        id: Option<Value>,
        path: &Path,
        cwd: Option<String>,
    ) -> Reply {
        match self.open_stored(path, cwd) {
            Ok((successor, repaired)) => {
                let answer = data(&reply::Cancelled {
                    cancelled: false,
                    repaired,
                });
                self.successor = Some(Successor {
                    answer: Answering::Now(response(id, "switch_session", answer)),
                    ..successor
                });
                Reply::later()
            }
            Err(e) => Reply::answer(id, "switch_session", Err(e)),
        }
    }

    /// `branch`: a new file holding the path to `entry_id` follows this session; the host's
    /// editor gets the branched message back.
    pub(super) fn branch(&mut self, id: Option<Value>, entry_id: &str) -> Reply {
        let Some(path) = self.state.store.path().map(Path::to_path_buf) else {
            let refused = CommandError::Invalid("Invalid entry ID for branching".into());
            return Reply::answer(id, "branch", Err(refused));
        };
        self.state.store.sync();
        let new_id = crate::ids::uuid_v7();
        let branched = super::store::branch(
            &path,
            entry_id,
            &self.state.session_dir,
            &new_id,
            &self.state.cwd,
        )
        .map_err(CommandError::from)
        .and_then(|(new_path, text)| Ok((self.open_stored(&new_path, None)?.0, text)));
        match branched {
            Ok((successor, text)) => {
                let answer = data(&reply::BranchResult {
                    text: text.clone(),
                    cancelled: false,
                });
                let show = crate::protocol::Show::EditorText(text);
                self.successor = Some(Successor {
                    before: vec![Outbound::Show(show)],
                    answer: Answering::Now(response(id, "branch", answer)),
                    ..successor
                });
                Reply::later()
            }
            Err(e) => Reply::answer(id, "branch", Err(e)),
        }
    }

    /// Loads and opens the file at `path` for a successor (its answer still to be set), and
    /// what was repaired in it.
    fn open_stored(
        &self,
        path: &Path,
        cwd: Option<String>,
    ) -> Result<(Successor, Option<reply::Repaired>), CommandError> {
        let cwd = project_cwd(cwd)?.unwrap_or_else(|| self.state.cwd.clone());
        let mut loaded = super::store::load(path).map_err(CommandError::from)?;
        let store = super::store::Store::open(path, &mut loaded).map_err(CommandError::from)?;
        let id = loaded.header["id"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(crate::ids::uuid_v7);
        let name = loaded.header["title"].as_str().map(str::to_string);
        let loaded_model = (loaded.model.as_deref())
            .and_then(|m| m.split_once('/'))
            .and_then(|(provider, model)| self.state.catalog.find(provider, model).cloned());
        let repaired = store.repaired().map(|r| reply::Repaired {
            dropped_bytes: r.dropped_bytes,
            added_newline: r.added_newline,
        });
        let successor = Successor {
            id,
            cwd,
            opening: Opening::Stored(Box::new(Stored {
                store,
                context: loaded.context,
                name,
            })),
            loaded_model,
            loaded_thinking: loaded.thinking,
            before: Vec::new(),
            answer: Answering::Now(Response::done(None, "")),
        };
        Ok((successor, repaired))
    }

    /// Ends this actor for `successor`: what `shutdown` does for the conversation (its run
    /// aborted, a running user `bash` answered, its hooks released, its MCP servers stopped,
    /// its commands killed and their spill files removed, its callbacks rejected, its file
    /// synced), while what belongs to the connection goes into the handover.
    pub(super) fn retire(mut self, successor: Successor, input_closed: bool) -> Handover {
        self.abort_run();
        if let Some((id, _)) = self.user_bash.take() {
            self.bash.abort(JobOwner::User);
            let why = "cancelled: the session was replaced before the command ended";
            self.respond(Response::err(id, "bash", why));
        }
        self.outbox.flush_held();
        self.flush_out();
        if let Some(hooks) = self.hooks.take() {
            hooks.release();
        }
        self.mcp.stop_all();
        self.bash.end_session();
        self.bash.clear_spill();
        self.host.end_session("the session was replaced");
        self.state.store.sync();
        let state = &mut self.state;
        let carried = Carried {
            model: state.model.take(),
            thinking: state.thinking,
            queues: std::mem::take(&mut state.queues),
            auto_compaction: state.auto_compaction,
            retry: state.retry.clone(),
            host_tools: state.tools.take_host_tools(),
            schemes: state.schemes.clone(),
            tool_policy: self.tool_policy,
            sandbox: self.sandbox.policy().clone(),
        };
        let SessionLoop {
            ch,
            outbox,
            side,
            registry,
            next_generation,
            ..
        } = self;
        Handover {
            successor,
            ch,
            outbox,
            side,
            registry,
            next_generation,
            carried,
            input_closed,
        }
    }

    /// The successor of the actor that handed `handover` over, from `parts` the session host
    /// made from the blueprint. `serve` answers the command, then goes on.
    pub fn succeed(handover: Handover, parts: Parts) -> (SessionLoop, Successor) {
        let Handover {
            successor,
            mut ch,
            outbox,
            side,
            mut registry,
            next_generation,
            carried,
            input_closed,
        } = handover;
        let Parts {
            mut state,
            bash,
            host,
            mut sandbox,
        } = parts;
        state.model = carried.model;
        state.thinking = carried.thinking;
        if let Some(found) = &successor.loaded_model {
            state.model = Some(found.clone());
        }
        if let Some(level) = &successor.loaded_thinking {
            state.thinking = catalog::clamp_thinking(level, state.model.as_ref());
        }
        let mut queues = carried.queues;
        queues.clear();
        state.queues = queues;
        state.auto_compaction = carried.auto_compaction;
        state.retry = carried.retry;
        state.tools.keep_host_tools(carried.host_tools);
        state.schemes = carried.schemes;
        sandbox.set_policy(carried.sandbox);
        registry.set_cwd(&state.cwd);
        // A user `bash` of the old actor may still report its exit (killed); its events carry
        // no generation, so the successor listens on a lane of its own.
        (ch.bash_tx, ch.bash_events) = crossbeam_channel::unbounded();
        let mut session = SessionLoop::assemble(state, ch, outbox, bash, host, registry, sandbox);
        session.side = side;
        session.next_generation = next_generation;
        session.tool_policy = carried.tool_policy;
        session.input_closed = input_closed;
        (session, successor)
    }

    /// The successor's first steps: the loaded file's notices, then the answer (after the frames
    /// that go before it), then what a session does at start, except `session_start`: the
    /// process's hooks see one start and one end.
    pub(super) fn take_over(&mut self, successor: Successor) {
        self.emit_store_notices();
        for frame in successor.before {
            self.send(frame);
        }
        match successor.answer {
            Answering::Now(response) => self.respond(response),
            Answering::Handoff { id, document } => self.seed_handoff(id, &document),
        }
        self.flush_out();
        crate::memory::release_free_pages();
        self.registry_update();
        self.continue_hooks();
        self.recover_gates();
        self.start_mcp();
    }
}

fn data<T: serde::Serialize>(value: &T) -> Answer {
    serde_json::value::to_raw_value(value)
        .map(|raw| Some(Data::Checked(raw)))
        .map_err(|e| CommandError::Internal(format!("internal error: {e}")))
}

pub(super) fn project_cwd(cwd: Option<String>) -> Result<Option<PathBuf>, CommandError> {
    cwd.map(|c| super::project::resolve_cwd(Path::new(&c)))
        .transpose()
        .map_err(|e| CommandError::Invalid(e.to_string()))
}
