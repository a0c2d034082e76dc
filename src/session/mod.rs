//! The `gjc-session` thread: the single owner of the session state and the agent loop. It never
//! blocks on anything but its own `select!`: provider streams, tool calls and shell commands run on
//! other threads and report back through channels, so `get_state` and `abort` are answered at once
//! even while a run streams.
//!
//! The loop takes, in this order of priority: control frames (cancellations, shutdown), commands
//! (in the order they were read), then work events (provider, tools, user bash, timers).
//!
//! Output never blocks it either (`crate::output`): while the host is not reading stdout, the
//! loop stops taking commands (the control lane still works) and its outbox (`outbox.rs`) merges
//! streamed deltas into one held `message_update` until the writer catches up.
//!
//! The session's parts own their state: the run its phase (`run/phase.rs`), the outbox the
//! output lane, the side workers their lanes (`side.rs`); a command answers with a value
//! (`reply.rs`) that the loop sends before the post-command steps.

pub mod checkpoint;
pub mod commands;
pub mod compaction;
pub mod context;
pub mod gates;
mod handoff;
pub mod hooks;
pub mod listing;
pub mod mcp;
pub mod models;
mod outbox;
pub mod project;
pub mod queue;
mod reply;
pub mod retry;
pub mod run;
mod sandbox;
pub mod scan;
mod side;
pub mod state;
pub mod store;
pub mod stream;
pub mod swap;
pub mod todos;
pub mod tool_calls;
pub mod unattended;
pub mod usage;
pub mod user_bash;

use std::time::Instant;

use crossbeam_channel::{after, never, select_biased, Receiver, Sender};
use serde_json::Value;

use crate::exec::{BashEvent, BashHandle};
use crate::host::HostHandle;
use crate::output::OutTx;
use crate::protocol::host_reply::HostReply;
use crate::protocol::message::StreamEvent;
use crate::protocol::{AgentEvent, Outbound, Response};
use crate::provider::ProviderMsg;
use crate::tools::ToolMsg;
use outbox::Outbox;
use run::Run;
use side::SideDone;
use state::Session;

pub use crate::lanes::{CommandFrame, ControlFrame};

/// The receiving ends the session loop selects over, and the senders it hands to workers.
pub struct Channels {
    pub control: Receiver<ControlFrame>,
    pub commands: Receiver<CommandFrame>,
    /// Told of each command taken, for a sender waiting for room in the lane.
    pub taken: crate::room::Taken,
    pub out: OutTx,
    /// Woken when the output lane, backed up before, has drained.
    pub out_drained: Receiver<()>,
    pub provider_tx: Sender<ProviderMsg>,
    pub provider: Receiver<ProviderMsg>,
    pub tool_tx: Sender<ToolMsg>,
    pub tool: Receiver<ToolMsg>,
    pub bash_tx: Sender<BashEvent>,
    pub bash_events: Receiver<BashEvent>,
    /// Host tool answers, from the RPC reader (`transport::stdin`): the session answers the
    /// host tool calls it started itself and passes the others to the broker. The session holds
    /// a sender too, so the lane stays open after the reader has gone.
    pub host_answers_tx: Sender<HostReply>,
    pub host_answers: Receiver<HostReply>,
}

/// `Channels` without the output lane (the outbox owns that).
struct Lanes {
    control: Receiver<ControlFrame>,
    commands: Receiver<CommandFrame>,
    taken: crate::room::Taken,
    provider_tx: Sender<ProviderMsg>,
    provider: Receiver<ProviderMsg>,
    tool_tx: Sender<ToolMsg>,
    tool: Receiver<ToolMsg>,
    bash_tx: Sender<BashEvent>,
    bash_events: Receiver<BashEvent>,
    /// Kept so the lane stays open after the reader has gone.
    _host_answers_tx: Sender<HostReply>,
    host_answers: Receiver<HostReply>,
}

impl Lanes {
    /// Splits the output lane off for the outbox.
    fn split(ch: Channels, compact_updates: bool) -> (Lanes, Outbox) {
        let lanes = Lanes {
            control: ch.control,
            commands: ch.commands,
            taken: ch.taken,
            provider_tx: ch.provider_tx,
            provider: ch.provider,
            tool_tx: ch.tool_tx,
            tool: ch.tool,
            bash_tx: ch.bash_tx,
            bash_events: ch.bash_events,
            _host_answers_tx: ch.host_answers_tx,
            host_answers: ch.host_answers,
        };
        (lanes, Outbox::new(ch.out, ch.out_drained, compact_updates))
    }
}

pub struct SessionLoop {
    state: Session,
    run: Option<Run>,
    ch: Lanes,
    /// Every frame the session sends goes through it.
    outbox: Outbox,
    bash: BashHandle,
    host: HostHandle,
    /// Run generations: events of an abandoned run or stream are recognised and dropped.
    next_generation: u64,
    /// The `id` and command text of the user `bash` command in flight, if any.
    user_bash: Option<(Option<Value>, String)>,
    /// Applied to every tool call as it starts.
    tool_policy: crate::tools::guard::ToolPolicy,
    /// A summary being written (manual or automatic compaction).
    compaction: Option<compaction::Compaction>,
    /// The hooks loaded at start (`hooks.rs`); `None` until then.
    hooks: Option<std::sync::Arc<crate::hooks::Hooks>>,
    /// Prompt hooks, model discovery and session listings running on threads of their own.
    side: side::SideWorkers,
    /// This process's record in the session registry.
    registry: crate::registry::Registry,
    /// The unattended control plane, consulted before commands and tool calls.
    unattended: crate::control::Plane,
    /// The kernel sandbox commands run in (`sandbox.rs`).
    sandbox: crate::sandbox::Sandbox,
    /// The session's MCP servers (`mcp.rs`).
    mcp: mcp::McpServers,
    /// The session that follows this one, once a command has asked for it (`swap.rs`): the loop
    /// ends after that command and the actor hands over.
    successor: Option<swap::Successor>,
    /// The front end's input has ended: what is queued is answered, then the actor returns.
    input_closed: bool,
}

enum Event {
    Control(ControlFrame),
    Command(CommandFrame),
    CommandsClosed,
    Provider(ProviderMsg),
    Tool(ToolMsg),
    HostAnswer(HostReply),
    Bash(BashEvent),
    Timer,
    OutputDrained,
    Side(side::SideDone),
    Mcp(crate::mcp::server::Changed),
}

impl SessionLoop {
    pub fn new(
        state: Session,
        ch: Channels,
        bash: BashHandle,
        host: HostHandle,
        compact_updates: bool,
        registry: crate::registry::Registry,
        sandbox: crate::sandbox::Sandbox,
    ) -> SessionLoop {
        let (ch, outbox) = Lanes::split(ch, compact_updates);
        SessionLoop::assemble(state, ch, outbox, bash, host, registry, sandbox)
    }

    /// A session of `state` over lanes already split.
    fn assemble(
        state: Session,
        ch: Lanes,
        outbox: Outbox,
        bash: BashHandle,
        host: HostHandle,
        registry: crate::registry::Registry,
        sandbox: crate::sandbox::Sandbox,
    ) -> SessionLoop {
        let unattended = unattended::plane_for(&state);
        SessionLoop {
            outbox,
            unattended,
            sandbox,
            state,
            run: None,
            ch,
            bash,
            host,
            next_generation: 0,
            user_bash: None,
            tool_policy: Default::default(),
            compaction: None,
            hooks: None,
            side: side::SideWorkers::new(),
            registry,
            mcp: mcp::McpServers::default(),
            successor: None,
            input_closed: false,
        }
    }

    /// Runs until stdin closes (or a shutdown signal), then aborts what runs and returns; or
    /// until a command asks for another session, then hands over to it (`swap.rs`).
    pub fn run(mut self) -> Option<swap::Handover> {
        self.registry_update();
        self.start_hooks();
        self.recover_gates();
        self.start_mcp();
        self.serve()
    }

    /// A successor's run: it answers the command that made it, then serves as any session.
    pub fn run_after(mut self, successor: swap::Successor) -> Option<swap::Handover> {
        self.take_over(successor);
        self.serve()
    }

    /// The loop, then the end: a shutdown, or the handover to the session that follows.
    fn serve(mut self) -> Option<swap::Handover> {
        if self.input_closed {
            self.drain_commands();
        } else {
            self.event_loop();
        }
        if let Some(successor) = self.successor.take() {
            let input_closed = self.input_closed;
            return Some(self.retire(successor, input_closed));
        }
        self.shutdown();
        // The process exits next and takes the session's memory with it at once; freeing a long
        // history here (its spans, ids, a 15 MB block returned to the system) cost milliseconds
        // of every exit. `shutdown` has already synced the file and removed the registry
        // record; the channels and handles still go, so the other threads can finish.
        let SessionLoop { state, .. } = self;
        std::mem::forget(state);
        None
    }

    /// After the front end's input has ended: the commands already queued are answered (the
    /// command lane disconnects once the reader's last command is in it), unless one of them
    /// swaps the session, whose successor answers the rest.
    fn drain_commands(&mut self) {
        self.input_closed = true;
        while !self.outbox.is_closed() && self.successor.is_none() {
            let frame = self.ch.commands.recv();
            self.ch.taken.taken();
            match frame {
                Ok(CommandFrame::Command(queued)) => self.handle_command(queued.id, queued.command),
                Ok(CommandFrame::Invalid(response)) => self.respond(*response),
                Ok(CommandFrame::Policy(policy)) => self.tool_policy = policy,
                Err(_) => break,
            }
            self.flush_out();
        }
        if self.successor.is_none() {
            log::info!("stdin closed; shutting down");
        }
    }

    /// Handles events until the input ends, a shutdown, or a command that swaps the session.
    fn event_loop(&mut self) {
        while !self.outbox.is_closed() && self.successor.is_none() {
            // Everything produced so far goes out before the loop waits again. While the model
            // stream's next events are already queued, the frames wait for theirs: what one read
            // of the socket brought reaches the host in one write (one wake-up of the writer, and
            // of the host), and nothing waits longer than the session takes to handle them.
            if !self.stream_is_ahead() {
                self.flush_out();
            }
            if self.outbox.is_closed() {
                break;
            }
            match self.next_event() {
                Event::Control(ControlFrame::Command { id, command }) => {
                    self.handle_command(id, command)
                }
                Event::Control(ControlFrame::Shutdown(why)) => {
                    log::info!("shutting down: {why}");
                    break;
                }
                Event::Control(ControlFrame::InputClosed) => {
                    self.drain_commands();
                    break;
                }
                Event::Command(CommandFrame::Command(queued)) => {
                    self.handle_command(queued.id, queued.command)
                }
                Event::Command(CommandFrame::Invalid(response)) => self.respond(*response),
                Event::Command(CommandFrame::Policy(policy)) => self.tool_policy = policy,
                Event::CommandsClosed => {
                    log::info!("stdin closed; shutting down");
                    break;
                }
                Event::Provider(msg) => self.on_provider(msg),
                Event::Tool(msg) => self.on_tool(msg),
                Event::HostAnswer(reply) => self.on_host_answer(reply),
                Event::Bash(ev) => self.on_bash(ev),
                Event::Timer => {
                    self.on_timer();
                    self.unattended_tick();
                }
                Event::OutputDrained => self.outbox.flush_held(),
                Event::Side(done) => self.on_side(done),
                Event::Mcp(changed) => self.on_mcp_changed(changed),
            }
        }
        // What the swapping command produced goes out before the old actor ends.
        self.flush_out();
    }

    fn next_event(&self) -> Event {
        let deadline = [self.deadline(), self.unattended.wall_deadline()]
            .into_iter()
            .flatten()
            .min();
        let timer = match deadline {
            Some(d) => after(d.saturating_duration_since(Instant::now())),
            None => never(),
        };
        // A host that does not read stdout gets no new command handled (their responses would
        // only pile up), but its cancellations still act at once.
        let paused = never();
        let commands = if self.outbox.pause_if_backed_up() {
            &paused
        } else {
            &self.ch.commands
        };
        let (hooks, discovered, listed) = self.side.receivers();
        select_biased! {
            recv(self.ch.control) -> m => m.map(Event::Control).unwrap_or(Event::CommandsClosed),
            recv(self.outbox.drained()) -> _ => Event::OutputDrained,
            recv(commands) -> m => {
                self.ch.taken.taken();
                m.map(Event::Command).unwrap_or(Event::CommandsClosed)
            },
            recv(self.ch.provider) -> m => m.map(Event::Provider).unwrap_or(Event::Timer),
            recv(self.ch.tool) -> m => m.map(Event::Tool).unwrap_or(Event::Timer),
            recv(self.ch.host_answers) -> m => m.map(Event::HostAnswer).unwrap_or(Event::Timer),
            recv(self.ch.bash_events) -> m => m.map(Event::Bash).unwrap_or(Event::Timer),
            recv(hooks) -> m => m.map(|d| Event::Side(SideDone::PromptHook(d))).unwrap_or(Event::Timer),
            recv(discovered) -> m => m.map(|d| Event::Side(SideDone::Discovered(d))).unwrap_or(Event::Timer),
            recv(listed) -> m => m.map(|l| Event::Side(SideDone::Listed(l))).unwrap_or(Event::Timer),
            recv(self.mcp.changes()) -> m => m.map(Event::Mcp).unwrap_or(Event::Timer),
            recv(timer) -> _ => Event::Timer,
        }
    }

    /// What a side worker reported.
    fn on_side(&mut self, done: SideDone) {
        match done {
            SideDone::PromptHook(done) => self.on_prompt_hooks(done),
            SideDone::Discovered(found) => self.on_discovered(found),
            SideDone::Listed(listed) => self.on_listed(listed),
        }
    }

    fn shutdown(&mut self) {
        if self.run.is_some() {
            self.abort_run();
        }
        // Every accepted command gets its response: a running `bash`, a model list still
        // waiting for discovery (with the models that need no server), a session listing.
        self.answer_models_waiting(&[], Vec::new());
        self.answer_listings();
        if let Some((id, _)) = self.user_bash.take() {
            self.respond(Response::err(
                id,
                "bash",
                "cancelled: gjc is shutting down (stdin closed or a signal)",
            ));
        }
        self.outbox.flush_held();
        self.flush_out();
        self.end_hooks();
        self.mcp.stop_all();
        // The bash thread and the broker serve every session of the process: this one's
        // commands and callbacks end here, the threads at the process's end (`app`).
        self.bash.end_session();
        self.host.end_session("RPC client disconnected");
        self.state.store.sync();
        self.registry.remove();
    }

    /// Publishes the current session and model in the registry.
    pub fn registry_update(&mut self) {
        let model = self
            .state
            .model
            .as_ref()
            .map(|m| format!("{}/{}", m.provider, m.id));
        self.registry.publish(&self.state.id, model.as_deref());
    }

    pub fn next_generation(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation
    }

    pub fn provider_tx(&self) -> Sender<ProviderMsg> {
        self.ch.provider_tx.clone()
    }

    pub fn tool_tx(&self) -> Sender<ToolMsg> {
        self.ch.tool_tx.clone()
    }

    pub fn bash_tx(&self) -> Sender<BashEvent> {
        self.ch.bash_tx.clone()
    }

    /// More model stream events are queued, and the frames held back are few and small enough
    /// to wait for theirs (see `run`). A long reply in reference-shape frames, where every
    /// update costs its snapshot, is handed over as it comes: a batch of those would back the
    /// lane up and pause the commands behind it.
    fn stream_is_ahead(&self) -> bool {
        const HELD_FRAMES: usize = 64;
        const HELD_BYTES: usize = 16 << 10;
        !self.ch.provider.is_empty()
            && self.ch.control.is_empty()
            && self.outbox.can_wait(HELD_FRAMES, HELD_BYTES)
    }

    /// Queues a frame (never blocking) with the others of the event being handled.
    pub fn send(&mut self, frame: Outbound) {
        self.outbox.send(frame);
    }

    /// Hands the frames of the event handled so far to the writer, together. Called when the
    /// event is done, and before work goes to a thread that writes frames of its own (a tool
    /// call, a hook, the host broker at shutdown), so those come after what led to them. A
    /// failed send means the writer is gone (stdout closed): shut down.
    pub fn flush_out(&mut self) {
        // The file has every entry before a frame announces it.
        self.state.store.write_queued();
        self.emit_store_notices();
        self.outbox.flush();
    }

    pub fn emit(&mut self, event: AgentEvent) {
        self.outbox.emit(event);
    }

    /// A streamed delta as `message_update` (`Outbox::update`).
    pub fn emit_update(&mut self, event: StreamEvent) {
        self.outbox.update(event);
    }

    /// A status line for hosts that show one; `None` clears it.
    pub fn set_status(&mut self, key: &'static str, text: Option<String>) {
        self.send(Outbound::Show(crate::protocol::Show::Status { key, text }));
    }

    pub fn respond(&mut self, response: Response) {
        self.send(Outbound::Response(response));
    }

    /// Answers ahead of the queued output: a host polling `get_state` during a fast stream
    /// does not wait for the snapshot frames before it (see `output.rs`).
    pub fn respond_first(&mut self, response: Response) {
        self.outbox.flush_held();
        self.flush_out();
        self.outbox.send_first(Outbound::Response(response));
    }
}
