//! The wiring, as values: [`Startup`] is what the command line and the environment resolve to,
//! [`Threads`] the running role threads, whose `join` returns the exit code. Every channel is
//! made and every role thread spawned here, in the order that makes `ready` the first frame.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, never, select_biased, unbounded, Receiver, Sender};

use crate::cli::Args;
use crate::exec::BashHandle;
use crate::host::HostRequest;
use crate::lanes::ControlFrame;
use crate::protocol::Outbound;
use crate::provider::catalog::{clamp_thinking, Catalog, Model};
use crate::provider::scripted::Script;
use crate::session::project::ProjectOptions;
use crate::sessions::{Blueprint, SessionHost};
use crate::settings::Settings;
use crate::tools::{ToolRegistry, DEFAULT_TOOLS};
use crate::transport::{stdin, stdout};
use crate::{exec, host};

mod process;

pub use process::Parent;
use process::{
    arm_parent_death, install_signal_handlers, raise_open_file_limit, watch_parent, watch_signals,
};

/// The exit status after a role thread panicked (what Rust uses for a panicking `main`).
const CRASH_EXIT: i32 = 101;

/// How long a crash waits for the bash thread to kill commands and remove the spill folder.
const CRASH_CLEANUP: Duration = Duration::from_secs(3);

/// Threads whose panic is caught where they run and reported as a failed call or command (a
/// tool call, a session-loading range).
const WORKERS: &[&str] = &["gjc-tool", "gjc-load"];

/// Runs the front end chosen by `--mode` until stdin closes, a signal arrives or `parent` dies.
/// Returns the exit code.
pub fn run(args: Args, settings: Settings, parent: Parent) -> i32 {
    let startup = match Startup::resolve(&args, settings) {
        Ok(s) => s,
        Err(e) => return fatal(&e),
    };
    match Threads::start(startup, parent) {
        Ok(threads) => threads.join(),
        Err(e) => fatal(&e),
    }
}

/// Everything resolved from the command line and the environment before any thread starts.
pub struct Startup {
    /// The folder the first session works in (`--cwd`, else the current one).
    pub cwd: PathBuf,
    /// What every session is made from.
    pub blueprint: Blueprint,
    /// The id of RPC mode's session (`--provider-session-id`, else a new one).
    pub session_id: String,
    pub acp: bool,
    pub keep_bash_output: bool,
    /// Skills are offered as ACP slash commands (not with `--no-skills`).
    pub skills: bool,
    /// `--session-dir`.
    pub session_dir: Option<PathBuf>,
    /// The environment's settings, resolved once; each part gets what it needs when it is built.
    pub settings: Arc<Settings>,
}

impl Startup {
    pub fn resolve(args: &Args, settings: Settings) -> Result<Startup, String> {
        let settings = Arc::new(settings);
        let cwd = resolve_cwd(args)?;
        let tool_names: Vec<String> = match (&args.tools, args.no_tools) {
            (_, true) => Vec::new(),
            (Some(t), _) => t
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            (None, _) => DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect(),
        };
        // Checked here, so a bad `--tools` stops the start instead of every session.
        ToolRegistry::builtin(&tool_names).map_err(|e| e.to_string())?;
        let agent_dir = settings.agent_dir.clone();
        if args.trust_project {
            crate::trust::TrustStore::new(&agent_dir)
                .remember(&cwd, true)
                .map_err(|e| format!("--trust-project: {e}"))?;
        }
        let catalog = Catalog::load(&agent_dir);
        crate::secrets::Secrets::from_catalog(&catalog, args.pass_secrets_to_tools).install();
        let model = pick_model(&catalog, args)?;
        let acp = args.mode.as_deref() == Some("acp");
        let policy = crate::sandbox::Policy::from_args(
            args.sandbox.as_deref(),
            acp,
            args.sandbox_network,
            &args.writable_root,
        )
        .map_err(|e| format!("--sandbox: {e}"))?;
        let project = ProjectOptions {
            agent_dir,
            replace: args.system_prompt.clone(),
            append: args.append_system_prompt.clone(),
            rules: !args.no_rules,
            skills: !args.no_skills,
            fixed_session_dir: args.session_dir.clone(),
            todo_reminders: settings.todo_reminders,
            home: settings.home.clone(),
        };
        let thinking = clamp_thinking(args.thinking.as_deref().unwrap_or("off"), model.as_ref());
        let blueprint = Blueprint {
            catalog: std::sync::Arc::new(catalog),
            model,
            thinking,
            tool_names,
            script: args
                .script
                .as_ref()
                .map(|p| Script::load(p).map(Arc::new).map_err(|e| e.to_string())),
            project,
            persistent: !args.no_session,
            compact_updates: args.compact_updates,
            policy,
            transport: "stdio",
            settings: settings.clone(),
        };
        Ok(Startup {
            cwd,
            blueprint,
            session_id: args
                .provider_session_id
                .clone()
                .unwrap_or_else(crate::ids::uuid_v7),
            acp,
            keep_bash_output: args.keep_bash_output,
            skills: !args.no_skills,
            session_dir: args.session_dir.clone(),
            settings,
        })
    }

    /// The models ACP offers, and the one sessions start with.
    fn models(&self) -> crate::acp::front::Models {
        let b = &self.blueprint;
        let key = |m: &Model| format!("{}/{}", m.provider, m.id);
        crate::acp::front::Models {
            available: b
                .catalog
                .available()
                .iter()
                .map(|m| (key(m), m.name.clone()))
                .collect(),
            current: b.model.as_ref().map(key),
            windows: b
                .catalog
                .available()
                .into_iter()
                .chain(b.model.as_ref())
                .map(|m| (key(m), m.context_window))
                .collect(),
        }
    }
}

/// The running process: its role threads, joined in order at the end.
pub struct Threads {
    crashed: Receiver<()>,
    control: Sender<ControlFrame>,
    /// The RPC session's end (its number); ACP's front end reaps its own sessions.
    session_done: Receiver<u64>,
    sessions: Option<SessionHost>,
    bash: BashHandle,
    bash_thread: std::thread::JoinHandle<()>,
    /// The broker's request lane only: a `HostHandle` would hold the output lane open, and
    /// ACP's front end (the writer) ends when that lane closes.
    host: Sender<HostRequest>,
    host_thread: std::thread::JoinHandle<()>,
    writer: Option<std::thread::JoinHandle<()>>,
    writer_done: Receiver<()>,
}

impl Threads {
    /// Starts every role thread in the order that makes `ready` the first frame.
    pub fn start(startup: Startup, parent: Parent) -> Result<Threads, String> {
        let settings = startup.settings.clone();
        let crashed = install_panic_hook();
        raise_open_file_limit();
        let (out_tx, out_rx, _drained) = crate::output::lane_with(settings.output_backlog_bytes);
        // 0. Signal handlers and the parent-death signal come first: a host may act as soon as
        // it sees `ready`. The handlers must exist before the parent-death signal is armed, or
        // that SIGTERM would kill the process without its shutdown. Their threads start after
        // `ready`; what arrives before then waits in the handlers' pipe or is seen by the
        // first check.
        let signals = install_signal_handlers();
        arm_parent_death();
        // Before any command runs: what escapes a command's process group comes back to gjc.
        exec::orphans::become_subreaper();
        // 1. `ready` is queued before anything else can be, so it is the first frame written.
        // In ACP mode the front end is the writer; it starts with its reader, and there is no
        // `ready`.
        if !startup.acp {
            let _ = out_tx.send(Outbound::Ready);
        }
        let (writer_done_tx, writer_done) = bounded::<()>(1);

        // 2. The threads every session shares.
        let (bash, bash_thread) = exec::spawn(
            std::env::temp_dir(),
            startup.keep_bash_output,
            settings.test_panic.clone(),
        )
        .map_err(|e| format!("cannot start the bash thread: {e}"))?;
        let (host, host_thread) = host::spawn(out_tx.clone())
            .map_err(|e| format!("cannot start the host thread: {e}"))?;

        // 3. The writer, the sessions, then the reader. Shutdown requests (signals, parent
        // death, a closed stdout) go to `control`: RPC's one session's control lane, or ACP's
        // front end, which ends every session.
        let models = startup.models();
        let (mut sessions, session_done) =
            SessionHost::new(startup.blueprint, bash.clone(), host.clone(), out_tx);
        let control;
        let writer;
        let mut kept = None;
        if startup.acp {
            let (shutdown_tx, shutdowns) = bounded::<ControlFrame>(stdin::CONTROL_QUEUE);
            control = shutdown_tx;
            if parent.is_gone() {
                let _ = control.send(ControlFrame::Shutdown("parent process exited"));
            }
            let projects = crate::acp::sessions::Projects {
                agent_dir: sessions.blueprint().project.agent_dir.clone(),
                sessions_root: sessions.blueprint().project.agent_dir.join("sessions"),
                fixed_dir: startup.session_dir,
                persistent: sessions.blueprint().persistent,
                skills: startup.skills,
                home: settings.home.clone(),
            };
            let sandbox = sessions.blueprint().policy.mode;
            let connections = crate::acp::Connections {
                frames: out_rx,
                sessions: Some(sessions),
                ended: session_done.clone(),
                shutdowns,
                host: host.sender(),
                models,
                projects,
                sandbox,
            };
            let front = crate::acp::start(connections, settings.max_line_bytes);
            let (control_now, control_known) = bounded(1);
            let _ = control_now.send(control.clone());
            writer = spawn_writer(&settings, "gjc-acp", front, control_known, writer_done_tx);
        } else {
            // The writer starts before the session, which starts its MCP servers at once: `ready`
            // then goes out while they are being forked instead of after. The lane a closed stdout
            // stops is the session's, known once it has started.
            let (control_later, control_known) = bounded::<Sender<ControlFrame>>(1);
            let session_id = startup.session_id.clone();
            let titles = settings.emit_title;
            writer = spawn_writer(
                &settings,
                "gjc-stdout",
                move || {
                    stdout::widen_pipe();
                    stdout::Writer::new(std::io::stdout().lock(), session_id, titles).run(out_rx)
                },
                control_known,
                writer_done_tx,
            );
            let started = sessions
                .start(Some(startup.session_id), startup.cwd)
                .map_err(|e| e.to_string())?;
            let (commands, control_lane) = started.live.into_lanes();
            control = control_lane;
            let _ = control_later.send(control.clone());
            if parent.is_gone() {
                let _ = control.send(ControlFrame::Shutdown("parent process exited"));
            }
            let routes = stdin::StdinRoutes {
                control: control.clone(),
                commands,
                room: started.room,
                host: host.sender(),
                host_tools: started.host_answers,
            };
            // Never joined: a read blocked on a live stdin cannot be interrupted, and at a
            // signal the process exits with the reader still waiting.
            let max_line_bytes = settings.max_line_bytes;
            let _stdin = spawn(&settings, "gjc-stdin", move || {
                stdin::run(std::io::stdin().lock(), routes, max_line_bytes)
            });
            kept = Some(sessions);
        }
        // The parent-death signal comes at every reparenting, so the pid poll is only needed
        // when its handler could not be installed.
        match signals {
            Some(signals) => watch_signals(&settings, signals, control.clone(), parent),
            None => watch_parent(&settings, control.clone(), parent),
        }
        Ok(Threads {
            crashed,
            control,
            session_done,
            sessions: kept,
            bash,
            bash_thread,
            host: host.sender(),
            host_thread,
            writer: Some(writer),
            writer_done,
        })
    }

    /// Waits for the end (stdin closed, a signal, a crash) and returns the exit code.
    pub fn join(self) -> i32 {
        let Threads {
            crashed,
            control,
            session_done,
            mut sessions,
            bash,
            bash_thread,
            host,
            host_thread,
            writer,
            writer_done,
        } = self;
        // A crashed role thread ends the process: the others may be waiting for it forever.
        // In ACP mode the front end (the writer) ends once its sessions have.
        // RPC waits for its session; the ACP front end (the writer) for all of its own.
        let (ended, front_done) = match &sessions {
            Some(_) => (session_done, never()),
            None => (never(), writer_done.clone()),
        };
        select_biased! {
            recv(crashed) -> _ => {
                let _ = control.send(ControlFrame::Shutdown("a thread crashed"));
                bash.shutdown();
                wait_bounded(&bash_thread, CRASH_CLEANUP);
                return CRASH_EXIT;
            },
            recv(ended) -> number => {
                if let (Some(sessions), Ok(number)) = (sessions.as_mut(), number) {
                    sessions.reap(number);
                }
            },
            recv(front_done) -> _ => {
                // The ACP front end has ended (its sessions first).
                return finish(bash, bash_thread, host, host_thread, writer, None, &crashed);
            },
        }
        drop(sessions);
        finish(
            bash,
            bash_thread,
            host,
            host_thread,
            writer,
            Some(writer_done),
            &crashed,
        )
    }
}

/// The end, once every session has: the shared threads stop (the broker rejects what is left),
/// and the writer drains once every sender is gone. A host that stopped reading stdout cannot
/// hold the process: what it does not read within the grace period is lost with the process,
/// as it would be with the host gone.
fn finish(
    bash: BashHandle,
    bash_thread: std::thread::JoinHandle<()>,
    host: Sender<HostRequest>,
    host_thread: std::thread::JoinHandle<()>,
    writer: Option<std::thread::JoinHandle<()>>,
    writer_done: Option<Receiver<()>>,
    crashed: &Receiver<()>,
) -> i32 {
    bash.shutdown();
    let _ = host.send(HostRequest::Shutdown {
        reason: "RPC client disconnected".into(),
    });
    drop((bash, host));
    for (handle, name) in [(bash_thread, "gjc-bash"), (host_thread, "gjc-host")] {
        if handle.join().is_err() {
            log::debug!("thread {name} ended by a panic");
        }
    }
    let written = writer_done.is_none_or(|done| done.recv_timeout(WRITER_GRACE).is_ok());
    if written {
        if writer.is_some_and(|w| w.join().is_err()) {
            log::debug!("thread gjc-stdout ended by a panic");
        }
    } else {
        log::warn!("stdout is not being read; exiting with frames unwritten");
    }
    if crashed.try_recv().is_ok() {
        CRASH_EXIT
    } else {
        0
    }
}

/// How long the writer may take to hand its last frames to the host at shutdown.
const WRITER_GRACE: Duration = Duration::from_millis(500);

/// A role thread named `name`; `settings` say whether a test asked it to panic.
fn spawn(settings: &Settings, name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    let panic_here = settings.test_panic.clone();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let name = std::thread::current().name().unwrap_or("?").to_string();
            log::debug!("thread {name} started");
            exec::test_panic_point(panic_here.as_deref());
            f();
            log::debug!("thread {name} stopped");
        })
        .unwrap_or_else(|e| panic!("cannot start thread {name}: {e}"))
}

/// The thread that owns stdout (the RPC writer or the ACP front end). A write error means the
/// host stopped reading: shut down as at stdin EOF, through the lane `control` brings (it may
/// start before that lane exists).
fn spawn_writer(
    settings: &Settings,
    name: &str,
    body: impl FnOnce() -> std::io::Result<()> + Send + 'static,
    control: Receiver<Sender<ControlFrame>>,
    done: Sender<()>,
) -> std::thread::JoinHandle<()> {
    spawn(settings, name, move || {
        if let Err(e) = body() {
            log::info!("stdout closed: {e}");
            if let Ok(control) = control.recv() {
                let _ = control.send(ControlFrame::Shutdown("stdout closed"));
            }
        }
        let _ = done.send(());
    })
}

fn wait_bounded(handle: &std::thread::JoinHandle<()>, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while !handle.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Replaces the default panic output with one line on stderr naming the thread and the reason.
/// A role thread's panic is also reported on the returned channel, which ends the process; a
/// worker's is caught where it runs (see `WORKERS`).
fn install_panic_hook() -> Receiver<()> {
    let (tx, rx) = unbounded();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        let payload = info.payload();
        let reason = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)")
            .replace('\n', " ");
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if WORKERS.contains(&name) {
            log::error!("thread {name} panicked{place}: {reason}");
        } else {
            eprintln!("gjc: thread {name} panicked{place}: {reason}");
            let _ = tx.send(());
        }
    }));
    rx
}

fn fatal(message: &str) -> i32 {
    eprintln!("gjc: {message}");
    2
}

fn resolve_cwd(args: &Args) -> Result<PathBuf, String> {
    let cwd = match &args.cwd {
        Some(c) => c.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    let cwd = std::fs::canonicalize(&cwd).map_err(|e| format!("--cwd {}: {e}", cwd.display()))?;
    if !cwd.is_dir() {
        return Err(format!("--cwd {} is not a directory", cwd.display()));
    }
    Ok(cwd)
}

/// `--provider`/`--model`; else the first provider with a key; else Anthropic's default model
/// (a prompt then fails with a clear missing-key error, never the startup).
fn pick_model(catalog: &Catalog, args: &Args) -> Result<Option<Model>, String> {
    match (&args.provider, &args.model) {
        (Some(p), Some(m)) => catalog.resolve(p, m).map(Some).map_err(|e| e.to_string()),
        (Some(p), None) => catalog.default_of(p).map(Some).map_err(|e| e.to_string()),
        (None, Some(m)) => catalog
            .models()
            .iter()
            .find(|x| x.id == *m)
            .cloned()
            .map(Some)
            .ok_or(format!("Model not found: {m}")),
        (None, None) => {
            let preferred = ["anthropic", "openai", "google"]
                .iter()
                .find(|p| catalog.has_key(p))
                .copied()
                .unwrap_or("anthropic");
            Ok(catalog.first_of(preferred).cloned())
        }
    }
}
