//! The wiring: creates every channel and spawns every role thread in one place, in the order
//! that guarantees `ready` is the first frame, and joins them at shutdown.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, select_biased, unbounded, Receiver, Sender};

use crate::cli::Args;
use crate::protocol::Outbound;
use crate::provider::catalog::{clamp_thinking, Catalog, Model};
use crate::provider::scripted::Script;
use crate::session::project::ProjectOptions;
use crate::session::queue::Queues;
use crate::session::retry::RetryPolicy;
use crate::session::state::Session;
use crate::session::{Channels, ControlFrame, SessionLoop};
use crate::tools::{ToolRegistry, DEFAULT_TOOLS};
use crate::transport::{stdin, stdout};
use crate::{exec, host, prompt};

/// The exit status after a role thread panicked (what Rust uses for a panicking `main`).
const CRASH_EXIT: i32 = 101;

/// How long a crash waits for the bash thread to kill commands and remove the spill folder.
const CRASH_CLEANUP: Duration = Duration::from_secs(3);

/// Threads whose panic is caught where they run and reported as a failed call or command (a
/// tool call, a session-loading range).
const WORKERS: &[&str] = &["gjc-tool", "gjc-load"];

/// The kernel's parent-death signal. Not SIGTERM: the kernel sends it when the *thread* that
/// spawned gjc exits, which a host running a thread pool does all the time, so its arrival only
/// means "look at the parent process", while a SIGTERM always means stop.
const PARENT_DEATH_SIGNAL: libc::c_int = libc::SIGUSR2;

/// The process that started gjc, as seen at the top of `main`.
#[derive(Clone, Copy, Debug)]
pub struct Parent(libc::pid_t);

impl Parent {
    pub fn current() -> Parent {
        // SAFETY: getppid has no preconditions.
        Parent(unsafe { libc::getppid() })
    }

    fn is_gone(self) -> bool {
        Parent::current().0 != self.0
    }
}

/// Runs RPC mode until stdin closes, a signal arrives or `parent` dies. Returns the exit code.
pub fn run(args: Args, parent: Parent) -> i32 {
    let cwd = match resolve_cwd(&args) {
        Ok(c) => c,
        Err(e) => return fatal(&e),
    };
    let tool_names: Vec<String> = match (&args.tools, args.no_tools) {
        (_, true) => Vec::new(),
        (Some(t), _) => t
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        (None, _) => DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect(),
    };
    let tools = match ToolRegistry::builtin(&tool_names) {
        Ok(t) => t,
        Err(e) => return fatal(&e),
    };
    let agent_dir = crate::settings::get().agent_dir.clone();
    if args.trust_project {
        if let Err(e) = crate::trust::TrustStore::new(&agent_dir).remember(&cwd, true) {
            return fatal(&format!("--trust-project: {e}"));
        }
    }
    let catalog = Catalog::load(&agent_dir);
    crate::secrets::Secrets::from_catalog(&catalog, args.pass_secrets_to_tools).install();
    let model = match pick_model(&catalog, &args) {
        Ok(m) => m,
        Err(e) => return fatal(&e),
    };
    let project = ProjectOptions {
        agent_dir: agent_dir.clone(),
        replace: args.system_prompt.clone(),
        append: args.append_system_prompt.clone(),
        rules: !args.no_rules,
        skills: !args.no_skills,
        fixed_session_dir: args.session_dir.clone(),
    };
    let crate::session::project::Loaded {
        system_prompt,
        rules,
    } = project.load(&cwd, &tools.specs());
    let session_id = args
        .provider_session_id
        .clone()
        .unwrap_or_else(crate::ids::uuid_v7);
    let thinking = clamp_thinking(args.thinking.as_deref().unwrap_or("off"), model.as_ref());
    let script = args.script.as_ref().map(|p| Script::load(p).map(Arc::new));
    let sessions_root = agent_dir.join("sessions");
    let session_dir = project.session_dir(&sessions_root, &cwd);
    let store = if args.no_session {
        crate::session::store::Store::in_memory(&session_id, &cwd)
    } else {
        crate::session::store::Store::create(&session_dir, &session_id, &cwd, None)
    };
    let state = Session {
        id: session_id.clone(),
        name: None,
        cwd,
        catalog,
        model,
        thinking,
        queues: Queues::default(),
        retry: RetryPolicy::default(),
        auto_compaction: true,
        messages: Default::default(),
        todos: Vec::new(),
        system_prompt,
        rules: Arc::new(rules),
        tools,
        script,
        schemes: Arc::default(),
        store,
        session_dir,
        sessions_root,
        project,
        workflow: Default::default(),
        project_trusted: false,
    };
    serve(state, &args, session_id, parent)
}

fn serve(state: Session, args: &Args, session_id: String, parent: Parent) -> i32 {
    let crashed = install_panic_hook();
    let (out_tx, out_rx, out_drained) = crate::output::lane();
    let (control_tx, control_rx) = bounded(stdin::CONTROL_QUEUE);
    let (command_tx, command_rx) = bounded(stdin::COMMAND_QUEUE);
    let (taken, room) = crate::room::room();

    // 0. Signal handlers and the parent-death signal come first: a host may act as soon as it
    // sees `ready`. The handlers must exist before the parent-death signal is armed, or that
    // SIGTERM would kill the process without its shutdown. Their threads start after `ready`;
    // what arrives before then waits in the handlers' pipe or is seen by the first check.
    let signals = install_signal_handlers();
    arm_parent_death();
    // Before any command runs: what escapes a command's process group comes back to gjc.
    exec::orphans::become_subreaper();
    if parent.is_gone() {
        let _ = control_tx.send(ControlFrame::Shutdown("parent process exited"));
    }

    // 1. The writer, and `ready` as its first frame, before anything can be read. In ACP mode
    // the front end is the writer; it starts with its reader (3.), and there is no `ready`.
    let acp = args.mode.as_deref() == Some("acp");
    let (writer_done_tx, writer_done) = bounded::<()>(1);
    let mut frames = Some(out_rx);
    let mut writer = None;
    if !acp {
        let out_rx = frames.take();
        let session_id = session_id.clone();
        writer = Some(spawn_writer(
            "gjc-stdout",
            move || {
                stdout::widen_pipe();
                let writer = stdout::Writer::new(std::io::stdout().lock(), session_id);
                match out_rx {
                    Some(out_rx) => writer.run(out_rx),
                    None => Ok(()),
                }
            },
            control_tx.clone(),
            writer_done_tx.clone(),
        ));
        let _ = out_tx.send(Outbound::Ready);
    }

    // 2. The actors the session talks to.
    let (bash, bash_thread) = match exec::spawn(std::env::temp_dir(), args.keep_bash_output) {
        Ok(b) => b,
        Err(e) => return fatal(&format!("cannot start the bash thread: {e}")),
    };
    let (host, host_thread) = match host::spawn(out_tx.clone()) {
        Ok(h) => h,
        Err(e) => return fatal(&format!("cannot start the host thread: {e}")),
    };

    // 3. The session, then the reader.
    let (provider_tx, provider) = bounded(256);
    let (tool_tx, tool) = unbounded();
    let (bash_tx, bash_events) = unbounded();
    // Unbounded like the broker's lane: the reader hands on each answer at once, so that one
    // behind it (an abort) is never held up; the session takes each as it comes.
    let (host_answers_tx, host_answers) = unbounded();
    let channels = Channels {
        control: control_rx,
        commands: command_rx,
        taken,
        out: out_tx,
        out_drained,
        provider_tx,
        provider,
        tool_tx,
        tool,
        bash_tx,
        bash_events,
        host_answers_tx: host_answers_tx.clone(),
        host_answers,
    };
    let bash_at_crash = bash.clone();
    let cwd = state.cwd.clone();
    let models = crate::acp::front::Models {
        available: state
            .catalog
            .available()
            .iter()
            .map(|m| (format!("{}/{}", m.provider, m.id), m.name.clone()))
            .collect(),
        current: state
            .model
            .as_ref()
            .map(|m| format!("{}/{}", m.provider, m.id)),
        windows: state
            .catalog
            .available()
            .into_iter()
            .chain(state.model.as_ref())
            .map(|m| (format!("{}/{}", m.provider, m.id), m.context_window))
            .collect(),
    };
    let registry =
        crate::registry::Registry::new(&crate::settings::get().agent_dir, "stdio", &state.cwd);
    let policy = match crate::sandbox::Policy::from_args(
        args.sandbox.as_deref(),
        acp,
        args.sandbox_network,
        &args.writable_root,
    ) {
        Ok(policy) => policy,
        Err(e) => return fatal(&format!("--sandbox: {e}")),
    };
    let sandbox_mode = policy.mode;
    let sandbox = crate::sandbox::Sandbox::new(policy, state.cwd.clone());
    let session = SessionLoop::new(
        state,
        channels,
        bash,
        host.clone(),
        args.compact_updates,
        registry,
        sandbox,
    );
    let (session_done_tx, session_done) = bounded(1);
    let session_thread = spawn("gjc-session", move || {
        session.run();
        let _ = session_done_tx.send(());
    });
    if let Some(frames) = frames.take() {
        let skills = if args.no_skills {
            Vec::new()
        } else {
            prompt::find_skills(&crate::settings::get().agent_dir, &cwd)
        };
        let connections = crate::acp::Connections {
            frames,
            control: control_tx.clone(),
            commands: command_tx,
            host: host.sender(),
            cwd,
            session: session_id,
            skills,
            models,
            projects: crate::acp::sessions::Projects {
                agent_dir: crate::settings::get().agent_dir.clone(),
                sessions_root: crate::settings::get().agent_dir.join("sessions"),
                fixed_dir: args.session_dir.clone(),
                persistent: !args.no_session,
                skills: !args.no_skills,
            },
            sandbox: sandbox_mode,
        };
        let front = crate::acp::start(connections, crate::settings::get().max_line_bytes);
        writer = Some(spawn_writer(
            "gjc-acp",
            front,
            control_tx.clone(),
            writer_done_tx,
        ));
    } else {
        let routes = stdin::StdinRoutes {
            control: control_tx.clone(),
            commands: command_tx,
            room,
            host: host.sender(),
            host_tools: host_answers_tx,
        };
        // Never joined: a read blocked on a live stdin cannot be interrupted, and at a signal
        // the process exits with the reader still waiting.
        let _stdin = spawn("gjc-stdin", move || {
            stdin::run(
                std::io::stdin().lock(),
                routes,
                crate::settings::get().max_line_bytes,
            )
        });
    }
    drop(host);
    // The parent-death signal follows the parent (it fires at every reparenting); the poll is
    // only for when its handler could not be installed. One thread fewer at idle.
    match signals {
        Some(signals) => watch_signals(signals, control_tx.clone(), parent),
        None => watch_parent(control_tx.clone(), parent),
    }

    // A crashed role thread ends the process: the others may be waiting for it forever.
    select_biased! {
        recv(crashed) -> _ => {
            let _ = control_tx.send(ControlFrame::Shutdown("a thread crashed"));
            bash_at_crash.shutdown();
            wait_bounded(&bash_thread, CRASH_CLEANUP);
            return CRASH_EXIT;
        },
        recv(session_done) -> _ => {},
    }
    // Shutdown: the session returns after aborting its run; the writer drains once every sender
    // (session, host broker) is gone.
    drop(bash_at_crash);
    for (handle, name) in [
        (session_thread, "gjc-session"),
        (bash_thread, "gjc-bash"),
        (host_thread, "gjc-host"),
    ] {
        if handle.join().is_err() {
            log::debug!("thread {name} ended by a panic");
        }
    }
    // A host that stopped reading stdout cannot hold the process: what it does not read within
    // the grace period is lost with the process, as it would be with the host gone.
    if writer_done.recv_timeout(WRITER_GRACE).is_ok() {
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

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let name = std::thread::current().name().unwrap_or("?").to_string();
            log::debug!("thread {name} started");
            exec::test_panic_point();
            f();
            log::debug!("thread {name} stopped");
        })
        .unwrap_or_else(|e| {
            log::error!("cannot start thread {name}: {e}");
            std::process::exit(1)
        })
}

/// The thread that owns stdout (the RPC writer or the ACP front end). A write error means the
/// host stopped reading: shut down as at stdin EOF.
fn spawn_writer(
    name: &str,
    body: impl FnOnce() -> std::io::Result<()> + Send + 'static,
    control: Sender<ControlFrame>,
    done: Sender<()>,
) -> std::thread::JoinHandle<()> {
    spawn(name, move || {
        if let Err(e) = body() {
            log::info!("stdout closed: {e}");
            let _ = control.send(ControlFrame::Shutdown("stdout closed"));
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
        (Some(p), Some(m)) => catalog.resolve(p, m).map(Some),
        (Some(p), None) => catalog.default_of(p).map(Some),
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

/// SIGTERM, SIGINT and SIGHUP shut down as stdin EOF does; the parent-death signal does when the
/// parent process is gone.
fn install_signal_handlers() -> Option<signal_hook::iterator::Signals> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, PARENT_DEATH_SIGNAL])
        .map_err(|e| log::warn!("cannot install signal handlers: {e}"))
        .ok()
}

fn watch_signals(
    mut signals: signal_hook::iterator::Signals,
    control: Sender<ControlFrame>,
    parent: Parent,
) {
    spawn("gjc-signal", move || {
        for signal in signals.forever() {
            if signal != PARENT_DEATH_SIGNAL {
                let _ = control.send(ControlFrame::Shutdown("signal"));
                return;
            }
            // The spawning thread ended; only the parent process's end is ours to follow.
            if parent.is_gone() {
                let _ = control.send(ControlFrame::Shutdown("parent process exited"));
                return;
            }
        }
    });
}

/// The kernel's parent-death signal on Linux. Armed before the first check of the parent, so a
/// parent that died at any moment since `main` began is caught by one or the other. It fires
/// whenever the thread that spawned gjc exits (the setting is per thread); `watch_signals` then
/// compares the parent pid, which changes only when the whole parent process is gone.
fn arm_parent_death() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG only sets a process attribute.
    unsafe {
        // The kernel reads the signal as an unsigned long: pass one, not a variadic int.
        libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL as libc::c_ulong);
    }
}

/// A poll of the parent pid, for when the signal handlers could not be installed (the
/// parent-death signal then has no one to tell).
fn watch_parent(control: Sender<ControlFrame>, parent: Parent) {
    spawn("gjc-parent", move || loop {
        std::thread::sleep(Duration::from_millis(500));
        if parent.is_gone() {
            let _ = control.send(ControlFrame::Shutdown("parent process exited"));
            return;
        }
    });
}
