//! Running a call: on a kept `gjc-tool` thread (`spawn`), or, for a host tool, a shell command
//! or an MCP tool with nothing to run around it, on no thread of its own (`start_direct`): the
//! session answers a host tool call itself when the host's answer reaches it, `gjc-bash` turns a
//! command's output and exit into the call's messages, and an MCP server's reader thread its
//! progress and answer. Either way the session hears of the call through `ToolMsg`s tagged with
//! the run generation, and stops it through its `ToolHandle`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;
use serde_json::Value;

use super::{guard, DirectCall, DirectStep, Outcome, Services, Tool, ToolContext};
use crate::exec::{BashHandle, JobOwner};
use crate::host::tools::Step;
use crate::host::HostHandle;
use crate::protocol::host_reply::HostReply;
use crate::protocol::message::ToolOutput;
use crate::protocol::Outbound;
use crate::sandbox::Launch;

#[derive(Debug)]
pub struct ToolMsg {
    pub generation: u64,
    pub call_id: String,
    pub event: ToolEvent,
}

#[derive(Debug)]
pub enum ToolEvent {
    Update(ToolOutput),
    /// The call's end: its output, and its effects on the session.
    Done(Outcome),
    /// A request to the gate broker, which the session owns.
    Gate(crate::gates::GateRequest),
}

/// What the session keeps for a running call.
pub struct ToolHandle {
    cancel: Arc<AtomicBool>,
    /// Who runs a call started without a thread, and is told to stop it.
    direct: Option<Direct>,
}

enum Direct {
    /// A host tool call the session answers itself: its id, and the broker's handle, which
    /// makes its cancel frame.
    Host(HostHandle, String),
    /// `gjc-bash`, and the call's command there.
    Bash(BashHandle, JobOwner),
    /// A call another thread reports (an MCP server's reader).
    Other(Box<dyn DirectCall>),
}

impl ToolHandle {
    /// Asks the call to stop; its output, if it still sends one, no longer matters. Returns
    /// the frame that withdraws a host tool call the session answers itself, for the session to
    /// queue behind the call's own frame.
    #[must_use]
    pub fn cancel(&self) -> Option<Outbound> {
        self.cancel.store(true, Ordering::SeqCst);
        match &self.direct {
            Some(Direct::Host(host, id)) => return Some(host.tool_cancel(id)),
            Some(Direct::Bash(bash, owner)) => bash.abort(owner.clone()),
            Some(Direct::Other(call)) => call.abort(),
            None => {}
        }
        None
    }

    /// When the call times out, for a call whose clock the session keeps (one another thread
    /// reports, as an MCP call).
    pub fn deadline(&self) -> Option<Instant> {
        match &self.direct {
            Some(Direct::Other(call)) => call.deadline(),
            _ => None,
        }
    }

    /// The result a call past its deadline ends with (it is given up); `None` while it has
    /// time, or when its end is already on its way.
    pub fn expire(&self, now: Instant) -> Option<ToolOutput> {
        match &self.direct {
            Some(Direct::Other(call)) => call.expire(now),
            _ => None,
        }
    }

    /// The id of the host tool call this is, when the session answers it itself.
    pub fn host_call(&self) -> Option<&str> {
        match &self.direct {
            Some(Direct::Host(_, id)) => Some(id),
            _ => None,
        }
    }
}

/// The threads tool calls run on: calls run one at a time, and a second thread is only needed
/// while an aborted call winds down.
static TOOL_THREADS: std::sync::LazyLock<crate::workers::Workers> =
    std::sync::LazyLock::new(|| crate::workers::Workers::new(c"gjc-tool", 2));

/// Runs one call on a `gjc-tool` thread.
pub fn spawn(
    tool: Arc<dyn Tool>,
    args: Value,
    services: Services,
    call_id: String,
    generation: u64,
    tx: Sender<ToolMsg>,
) -> ToolHandle {
    let cancel = Arc::new(AtomicBool::new(false));
    let panic_here = services.settings.test_panic.clone();
    let ctx = context(services, &call_id, cancel.clone(), generation, &tx);
    log::debug!("tool {} call {call_id} starts", tool.name());
    let worker = TOOL_THREADS.run(move || {
        let started = std::time::Instant::now();
        let mut outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::exec::test_panic_point(panic_here.as_deref());
            match guard::refusal(tool.name(), &args, &ctx) {
                Some(refused) => refused.into(),
                None => tool.run(&args, &ctx),
            }
        }))
        .unwrap_or_else(|_| {
            ToolOutput::error(format!("tool {} failed unexpectedly", tool.name())).into()
        });
        outcome.scrub();
        log::debug!(
            "tool {} call {call_id} ended ({}) after {} ms",
            tool.name(),
            if outcome.output.is_error {
                "error"
            } else {
                "ok"
            },
            started.elapsed().as_millis()
        );
        let _ = tx.send(ToolMsg {
            generation,
            call_id,
            event: ToolEvent::Done(outcome),
        });
    });
    if let Err(e) = worker {
        log::error!("cannot start tool thread: {e}");
    }
    ToolHandle {
        cancel,
        direct: None,
    }
}

/// The context a call runs with on a `gjc-tool` thread: its updates and gate requests go to the
/// session as the call's messages.
fn context(
    services: Services,
    call_id: &str,
    cancel: Arc<AtomicBool>,
    generation: u64,
    tx: &Sender<ToolMsg>,
) -> ToolContext {
    let (update_tx, update_id) = (tx.clone(), call_id.to_string());
    let (gate_tx, gate_id) = (tx.clone(), call_id.to_string());
    ToolContext {
        cwd: services.cwd,
        home: services.settings.home.clone(),
        call_id: call_id.to_string(),
        cancel,
        bash: services.bash,
        host: Some(services.host),
        schemes: services.schemes,
        policy: services.policy,
        sandbox: services.sandbox,
        updates: Box::new(move |mut partial| {
            crate::secrets::scrub_output(&mut partial);
            let _ = update_tx.send(ToolMsg {
                generation,
                call_id: update_id.clone(),
                event: ToolEvent::Update(partial),
            });
        }),
        gates: Box::new(move |request| {
            gate_tx
                .send(ToolMsg {
                    generation,
                    call_id: gate_id.clone(),
                    event: ToolEvent::Gate(request),
                })
                .is_ok()
        }),
    }
}

/// A call started without a thread of its own ([`start_direct`]).
pub struct Started {
    pub handle: ToolHandle,
    /// A host tool call's `host_tool_call` frame, for the caller to queue behind the call's
    /// start; `None` for other calls.
    pub frame: Option<Outbound>,
}

/// Starts a call with no thread of its own when nothing needs one: a host tool, the shell tool
/// or the tool of a ready MCP server, no hook wrapping it, and nothing for the approval guard
/// to ask (which it never has for a tool that only reads). `None` when the call needs a thread
/// (`spawn`). The session answers a host tool call itself: it gets the host's answers and turns
/// them into the call's messages with [`host_answer`]; it times an MCP call out itself too
/// ([`ToolHandle::expire`]).
pub fn start_direct(
    tool: &dyn Tool,
    args: &Value,
    services: &Services,
    call_id: &str,
    generation: u64,
    tx: &Sender<ToolMsg>,
) -> Option<Started> {
    let shell = tool.as_bash().is_some() && !services.policy.host_terminal;
    if tool.as_host().is_none() && tool.as_direct().is_none() && !shell {
        return None;
    }
    let send = messages(call_id, generation, tx);
    let read_only_kernel = !matches!(services.sandbox.read_only, Launch::Refused(_));
    let ruling = guard::ruling(tool.name(), args, services.policy, true, read_only_kernel);
    let cancel = Arc::new(AtomicBool::new(false));
    let started = |direct, frame| Started {
        handle: ToolHandle {
            cancel: cancel.clone(),
            direct,
        },
        frame,
    };
    match ruling {
        guard::Ruling::Ask => None,
        guard::Ruling::Refuse(output) => {
            send(ToolEvent::Done(output.into()));
            Some(started(None, None))
        }
        guard::Ruling::Run => {
            log::debug!("tool {} call {call_id} starts on no thread", tool.name());
            if let Some(host_tool) = tool.as_host() {
                let (id, frame) = host_tool.start_direct(args, call_id);
                let direct = Direct::Host(host_tool.host.clone(), id);
                return Some(started(Some(direct), Some(frame)));
            }
            if let Some(direct) = tool.as_direct() {
                let report = Box::new(move |step| {
                    send(scrubbed(match step {
                        DirectStep::Progress(partial) => ToolEvent::Update(partial),
                        DirectStep::Done(output) => ToolEvent::Done(output.into()),
                    }))
                });
                let call = direct.start(args, call_id, report)?;
                return Some(started(Some(Direct::Other(call)), None));
            }
            let owner = JobOwner::Tool(call_id.to_string());
            let bash = tool.as_bash()?;
            let plan = super::escalate::plan(args, services.policy, &services.sandbox);
            let mut escalation = plan.then.map(|to| Escalating {
                to,
                args: args.clone(),
                services: services.clone(),
                call_id: call_id.to_string(),
                cancel: cancel.clone(),
                generation,
                tx: tx.clone(),
            });
            let deliver = move |event, denied| match event {
                ToolEvent::Done(done) if denied && escalation.is_some() => {
                    if let Some(escalating) = escalation.take() {
                        escalating.on_thread(done.output);
                    }
                }
                event => send(scrubbed(event)),
            };
            bash.start(
                args,
                &services.bash,
                (services.cwd.clone(), &plan.first),
                owner.clone(),
                deliver,
            );
            Some(started(
                Some(Direct::Bash(services.bash.clone(), owner)),
                None,
            ))
        }
    }
}

/// A command started on no thread that the sandbox denied, and the host may let run again:
/// asking waits for the user, so it goes on on a `gjc-tool` thread.
struct Escalating {
    to: super::escalate::Escalation,
    args: Value,
    services: Services,
    call_id: String,
    cancel: Arc<AtomicBool>,
    generation: u64,
    tx: Sender<ToolMsg>,
}

impl Escalating {
    fn on_thread(self, denied: ToolOutput) {
        let Escalating {
            to,
            args,
            services,
            call_id,
            cancel,
            generation,
            tx,
        } = self;
        let started = TOOL_THREADS.run(move || {
            let ctx = context(services, &call_id, cancel, generation, &tx);
            let (command, timeout) = super::bash::command_of(&args);
            let run = |launch: &Launch| super::bash::run_waiting(&command, timeout, &ctx, launch);
            let mut outcome = super::bash::escalate_after(&ctx, &command, &to, denied, run);
            outcome.scrub();
            let _ = tx.send(ToolMsg {
                generation,
                call_id,
                event: ToolEvent::Done(outcome),
            });
        });
        if let Err(e) = started {
            log::error!("cannot start tool thread: {e}");
        }
    }
}

/// Sends one call's messages to the session.
fn messages(
    call_id: &str,
    generation: u64,
    tx: &Sender<ToolMsg>,
) -> impl Fn(ToolEvent) + Send + 'static {
    let (to_session, id) = (tx.clone(), call_id.to_string());
    move |event| {
        let _ = to_session.send(ToolMsg {
            generation,
            call_id: id.clone(),
            event,
        });
    }
}

/// A host tool answer to a call the session answers itself, as the call's message (scrubbed
/// like any tool output); `None` for an answer that is not a tool's.
pub fn host_answer(reply: HostReply) -> Option<ToolEvent> {
    let event = match crate::host::tools::answer(reply) {
        Step::Update(partial) => ToolEvent::Update(partial),
        Step::Done(output) => ToolEvent::Done(output.into()),
        Step::Other => return None,
    };
    Some(scrubbed(event))
}

/// A call's message with key values scrubbed from its output, as from any tool.
fn scrubbed(mut event: ToolEvent) -> ToolEvent {
    match &mut event {
        ToolEvent::Update(out) => crate::secrets::scrub_output(out),
        ToolEvent::Done(outcome) => outcome.scrub(),
        ToolEvent::Gate(_) => {}
    }
    event
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::protocol::command::HostToolDefinition;
    use crate::protocol::host_reply::HostToolResult;
    use crate::protocol::FlatFrame;
    use serde_json::json;

    const WAIT: Duration = Duration::from_secs(10);

    /// The services of a call, with the output lane's far end (kept open while they are used).
    fn services(cwd: &std::path::Path, policy: guard::ToolPolicy) -> (Services, impl Sized) {
        let (out, frames, wake) = crate::output::lane();
        let (host, _thread) = crate::host::spawn(out).unwrap();
        let services = Services {
            cwd: cwd.to_path_buf(),
            bash: crate::tools::tests::bash(),
            host,
            schemes: Arc::default(),
            policy,
            sandbox: Default::default(),
            settings: Default::default(),
        };
        (services, (frames, wake))
    }

    /// The call's messages until its end: the updates' texts and the end.
    fn until_done(rx: &crossbeam_channel::Receiver<ToolMsg>) -> (Vec<ToolMsg>, ToolOutput) {
        let mut seen = Vec::new();
        loop {
            let msg = rx.recv_timeout(WAIT).expect("the call ends");
            match msg.event {
                ToolEvent::Done(outcome) => return (seen, outcome.output),
                _ => seen.push(msg),
            }
        }
    }

    /// A host tool starts on no thread and past the broker: its frame comes back for the
    /// session to queue, the handle names the call so the session knows its answers, an answer
    /// becomes the call's message (the host's `isError` kept), and a cancel is a frame for the
    /// session to queue.
    #[test]
    fn a_host_tool_starts_on_no_thread() {
        let dir = tempfile::tempdir().unwrap();
        let (services, _lane) = services(dir.path(), guard::ToolPolicy::default());
        let def = HostToolDefinition {
            name: "echo".into(),
            label: None,
            description: String::new(),
            parameters: json!({"type": "object"}),
        };
        let tool = super::super::host_tool::HostTool::new(def, services.host.clone());
        let (tx, rx) = crossbeam_channel::unbounded();
        let started =
            start_direct(&*tool, &json!({"m": 1}), &services, "call_1", 7, &tx).expect("direct");
        let Some(Outbound::Frame(FlatFrame::HostToolCall {
            id,
            tool_call_id,
            arguments,
            ..
        })) = started.frame
        else {
            panic!("no host tool call frame")
        };
        assert_eq!(
            (tool_call_id.as_str(), arguments),
            ("call_1", json!({"m": 1}))
        );
        assert_eq!(started.handle.host_call(), Some(id.as_str()));
        let answer = HostReply::ToolResult(HostToolResult {
            id: id.clone(),
            result: ToolOutput::text("ok"),
            is_error: true,
        });
        let Some(ToolEvent::Done(outcome)) = host_answer(answer) else {
            panic!("not the call's end")
        };
        assert!(outcome.output.is_error, "the host's isError is kept");
        let Some(Outbound::Frame(FlatFrame::HostToolCancel { target_id, .. })) =
            started.handle.cancel()
        else {
            panic!("no cancel frame")
        };
        assert_eq!(target_id, id);
        assert!(
            rx.try_recv().is_err(),
            "the session, not the broker, answers it"
        );
    }

    /// The shell tool starts on no thread: `gjc-bash` sends the call's end, tagged with the call,
    /// and the handle's cancel stops the command. Other tools, a command the host must approve
    /// and a command for the host's terminal are left to `spawn`; plan mode refuses at once.
    #[test]
    fn a_shell_command_starts_on_no_thread() {
        use super::super::bash::Bash;
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let (plain, _lane) = services(dir.path(), guard::ToolPolicy::default());
        let run = |args: Value, services: &Services| {
            start_direct(&Bash, &args, services, "call_1", 3, &tx)
        };

        let started = run(json!({"command": "echo hi; exit 2"}), &plain).expect("direct");
        assert!(started.frame.is_none());
        let (_, output) = until_done(&rx);
        assert!(output.is_error);
        assert_eq!(
            crate::tools::tests::text(&output),
            "hi\n\nCommand exited with code 2"
        );

        let started = run(
            json!({"command": "sleep 0.1; echo started; sleep 30"}),
            &plain,
        )
        .expect("direct");
        // Output comes as a preview once the call has run for 50 ms.
        let msg = rx.recv_timeout(WAIT).expect("the first output");
        assert_eq!((msg.generation, msg.call_id.as_str()), (3, "call_1"));
        let ToolEvent::Update(preview) = msg.event else {
            panic!("not a preview")
        };
        assert_eq!(crate::tools::tests::text(&preview), "started\n");
        assert!(
            started.handle.cancel().is_none(),
            "a command has no frame to withdraw"
        );
        let (_, output) = until_done(&rx);
        assert!(crate::tools::tests::text(&output).ends_with("Command aborted"));

        let plan = guard::ToolPolicy {
            read_only: true,
            ..Default::default()
        };
        let started = run(json!({"command": "touch x"}), &services(dir.path(), plan).0);
        assert!(started.expect("refused at once").frame.is_none());
        let (_, output) = until_done(&rx);
        assert_eq!(output.details, Some(json!({"denied": true})));
        assert!(!dir.path().join("x").exists());

        for policy in [
            guard::ToolPolicy {
                approval: guard::Approval::Commands,
                ..Default::default()
            },
            guard::ToolPolicy {
                host_terminal: true,
                ..Default::default()
            },
        ] {
            assert!(run(
                json!({"command": "touch x"}),
                &services(dir.path(), policy).0
            )
            .is_none());
        }
        let read = start_direct(&super::super::read::Read, &json!({}), &plain, "c", 3, &tx);
        assert!(read.is_none());
        assert!(rx.try_recv().is_err(), "nothing more was sent");
    }
}
