//! The bash tool in the editor's terminal. When the client offers `terminal/*`, the session's
//! bash calls arrive here as `TerminalFrame::Run` (through the host broker, like a file read)
//! and run as: `terminal/create` (the command through the shell, in the session's folder, the
//! output's tail bounded), a `tool_call_update` carrying the terminal so the editor shows it
//! live, `terminal/wait_for_exit`, `terminal/output` for the final text and exit status, then
//! `terminal/release`; the exit goes back to the broker as `HostRequest::TerminalDone`.
//!
//! A bash `timeout` kills the command and keeps its output (kill, output, release). A caller
//! that gives up (abort, shutdown) gets `TerminalFrame::Cancel`: the terminal is killed and
//! released at once, and the call has already ended on the session's side. Every step that
//! should be quick (create, kill, output) has a deadline, so an editor that never answers ends
//! the call with an error instead of holding the session.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1::{
    CancelRequestNotification, CreateTerminalRequest, CreateTerminalResponse, EnvVariable, Error,
    KillTerminalRequest, ReleaseTerminalRequest, RequestId, Terminal, TerminalExitStatus,
    TerminalId, TerminalOutputRequest, TerminalOutputResponse, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
};
use crossbeam_channel::{after, never, Receiver};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::callbacks::{describe, Outgoing};
use super::front::Front;
use super::updates::SessionUpdate;
use crate::host::HostRequest;
use crate::protocol::terminal::{TerminalExit, TerminalFrame, TerminalRun};

/// How long the editor may take over a step that should be quick (create, kill, output).
const STEP: Duration = Duration::from_secs(30);
/// Tool calls remembered with their terminal until their final update.
const SHOWN: usize = 64;

/// The terminals being run, by the host broker's call id.
#[derive(Default)]
pub(super) struct Terminals {
    runs: HashMap<String, Run>,
    /// (tool call, terminal) for the final `tool_call_update`, which keeps showing the terminal.
    shown: VecDeque<(String, TerminalId)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Create,
    Wait,
    Kill,
    Output,
}

impl Step {
    fn method(self) -> &'static str {
        match self {
            Step::Create => "terminal/create",
            Step::Wait => "terminal/wait_for_exit",
            Step::Kill => "terminal/kill",
            Step::Output => "terminal/output",
        }
    }
}

struct Run {
    tool_call_id: String,
    terminal: Option<TerminalId>,
    step: Step,
    /// The request of the current step.
    request: RequestId,
    /// When the current step is given up; `None` while a command without a timeout runs.
    deadline: Option<Instant>,
    /// The bash `timeout`: when the command is killed.
    kill_at: Option<Instant>,
    timed_out: bool,
    /// From `wait_for_exit`, in case `output` leaves it out.
    exit: Option<TerminalExitStatus>,
    /// The caller gave up while the terminal was being made: it is killed once it exists.
    cancelled: bool,
}

impl Terminals {
    /// Fires at the earliest deadline.
    pub(super) fn timer(&self) -> Receiver<Instant> {
        match self.runs.values().filter_map(|r| r.deadline).min() {
            Some(d) => after(d.saturating_duration_since(Instant::now())),
            None => never(),
        }
    }

    /// The runs whose deadline has passed.
    fn due(&self, now: Instant) -> Vec<String> {
        let mut due = Vec::new();
        for (host_id, run) in &self.runs {
            if run.deadline.is_some_and(|d| d <= now) {
                due.push(host_id.clone());
            }
        }
        due
    }

    fn remember(&mut self, tool_call_id: String, terminal: TerminalId) {
        if self.shown.len() >= SHOWN {
            self.shown.pop_front();
        }
        self.shown.push_back((tool_call_id, terminal));
    }
}

impl<W: Write> Front<W> {
    pub(super) fn on_terminal(&mut self, frame: TerminalFrame) -> std::io::Result<()> {
        match frame {
            TerminalFrame::Run(run) => self.create_terminal(run),
            TerminalFrame::Cancel { target_id } => self.cancel_terminal(&target_id),
        }
    }

    /// A call that ran in a terminal ends showing it (released terminals stay visible).
    pub(super) fn keep_terminal(&mut self, update: &mut ToolCallUpdate) {
        let id = &*update.tool_call_id.0;
        let shown = &mut self.terminals.shown;
        if let Some(i) = shown.iter().position(|(call, _)| call == id) {
            if let Some((_, terminal)) = shown.remove(i) {
                let content = vec![ToolCallContent::Terminal(Terminal::new(terminal))];
                update.fields.content = Some(content);
            }
        }
    }

    fn create_terminal(&mut self, run: TerminalRun) -> std::io::Result<()> {
        if !self.client.terminal {
            self.terminal_done(&run.id, Err("the editor offers no terminal".into()));
            return Ok(());
        }
        // Keys gjc hides from its own commands stay hidden from the terminal's.
        let env = crate::secrets::installed()
            .hidden_env()
            .iter()
            .map(|name| EnvVariable::new(name.clone(), String::new()))
            .collect();
        // Under a sandbox the terminal runs gjc's launcher, which confines itself, then the shell.
        let shell = crate::exec::process::shell().to_string();
        let mut words = run.launcher;
        words.extend([shell, "-c".to_string(), run.command]);
        let program = words.remove(0);
        let params = CreateTerminalRequest::new(self.session_id(), program)
            .args(words)
            .env(env)
            .cwd(run.cwd)
            .output_byte_limit(run.output_limit);
        let now = Instant::now();
        let state = Run {
            tool_call_id: run.tool_call_id,
            terminal: None,
            step: Step::Create,
            request: RequestId::Null,
            deadline: None,
            kill_at: run.timeout.map(|t| now + t),
            timed_out: false,
            exit: None,
            cancelled: false,
        };
        self.terminals.runs.insert(run.id.clone(), state);
        self.step(&run.id, Step::Create, params, Some(now + STEP))
    }

    fn cancel_terminal(&mut self, host_id: &str) -> std::io::Result<()> {
        let Some(run) = self.terminals.runs.get_mut(host_id) else {
            return Ok(());
        };
        let request = run.request.clone();
        if run.step == Step::Create {
            // The terminal's id is not known yet; it is killed when it comes.
            run.cancelled = true;
            run.deadline = Some(Instant::now() + STEP);
            return self.cancel_request(request);
        }
        let terminal = run.terminal.clone();
        self.terminals.runs.remove(host_id);
        self.outgoing.remove(&request);
        self.cancel_request(request)?;
        self.kill_and_release(terminal)
    }

    pub(super) fn on_terminal_response(
        &mut self,
        host_id: &str,
        result: Result<Value, Error>,
    ) -> std::io::Result<()> {
        let Some(step) = self.terminals.runs.get(host_id).map(|r| r.step) else {
            return Ok(());
        };
        match step {
            Step::Create => self.created(host_id, decode(result)),
            Step::Wait => match decode::<WaitForTerminalExitResponse>(result) {
                Ok(exited) => {
                    if let Some(run) = self.terminals.runs.get_mut(host_id) {
                        run.exit = Some(exited.exit_status);
                    }
                    self.ask_output(host_id)
                }
                Err(e) => self.give_up(host_id, describe(e)),
            },
            // Killed at the timeout (or the kill failed because it had just ended): the output
            // is what the model gets either way.
            Step::Kill => self.ask_output(host_id),
            Step::Output => self.output(host_id, decode(result)),
        }
    }

    fn created(
        &mut self,
        host_id: &str,
        created: Result<CreateTerminalResponse, Error>,
    ) -> std::io::Result<()> {
        let Some(run) = self.terminals.runs.get_mut(host_id) else {
            return Ok(());
        };
        let cancelled = run.cancelled;
        let terminal = match created {
            Ok(created) => created.terminal_id,
            Err(e) => {
                self.terminals.runs.remove(host_id);
                if !cancelled {
                    self.terminal_done(host_id, Err(describe(e)));
                }
                return Ok(());
            }
        };
        if cancelled {
            self.terminals.runs.remove(host_id);
            return self.kill_and_release(Some(terminal));
        }
        run.terminal = Some(terminal.clone());
        let (tool_call_id, kill_at) = (run.tool_call_id.clone(), run.kill_at);
        self.terminals
            .remember(tool_call_id.clone(), terminal.clone());
        // Shown first, so the editor displays the terminal while the command runs.
        let fields = ToolCallUpdateFields::new()
            .status(ToolCallStatus::InProgress)
            .content(vec![ToolCallContent::Terminal(Terminal::new(
                terminal.clone(),
            ))]);
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            tool_call_id,
            fields,
        )))?;
        let params = WaitForTerminalExitRequest::new(self.session_id(), terminal);
        self.step(host_id, Step::Wait, params, kill_at)
    }

    fn ask_output(&mut self, host_id: &str) -> std::io::Result<()> {
        let Some(terminal) = self
            .terminals
            .runs
            .get(host_id)
            .and_then(|r| r.terminal.clone())
        else {
            return Ok(());
        };
        let params = TerminalOutputRequest::new(self.session_id(), terminal);
        self.step(host_id, Step::Output, params, Some(Instant::now() + STEP))
    }

    fn output(
        &mut self,
        host_id: &str,
        output: Result<TerminalOutputResponse, Error>,
    ) -> std::io::Result<()> {
        let Some(run) = self.terminals.runs.remove(host_id) else {
            return Ok(());
        };
        self.release(run.terminal.clone())?;
        let result = output.map_err(describe).map(|o| {
            let status = o.exit_status.or(run.exit).unwrap_or_default();
            TerminalExit {
                output: o.output,
                truncated: o.truncated,
                exit_code: status.exit_code,
                signal: status.signal,
                timed_out: run.timed_out,
            }
        });
        self.terminal_done(host_id, result);
        Ok(())
    }

    /// The timer fired: a command past its timeout is killed; a step the editor did not
    /// answer in time ends the call.
    pub(super) fn terminal_deadlines(&mut self) -> std::io::Result<()> {
        for host_id in self.terminals.due(Instant::now()) {
            let Some(run) = self.terminals.runs.get(&host_id) else {
                continue;
            };
            if run.cancelled {
                let request = run.request.clone();
                self.terminals.runs.remove(&host_id);
                self.outgoing.remove(&request);
                continue;
            }
            if run.step == Step::Wait {
                self.kill_at_timeout(&host_id)?;
            } else {
                let why = format!(
                    "the editor did not answer {} within {} s",
                    run.step.method(),
                    STEP.as_secs()
                );
                self.give_up(&host_id, why)?;
            }
        }
        Ok(())
    }

    fn kill_at_timeout(&mut self, host_id: &str) -> std::io::Result<()> {
        let Some(run) = self.terminals.runs.get(host_id) else {
            return Ok(());
        };
        let (waiting, terminal) = (run.request.clone(), run.terminal.clone());
        self.outgoing.remove(&waiting);
        self.cancel_request(waiting)?;
        let Some(terminal) = terminal else {
            return Ok(());
        };
        if let Some(run) = self.terminals.runs.get_mut(host_id) {
            run.timed_out = true;
        }
        let params = KillTerminalRequest::new(self.session_id(), terminal);
        self.step(host_id, Step::Kill, params, Some(Instant::now() + STEP))
    }

    /// Ends the call with an error, leaving nothing running in the editor.
    fn give_up(&mut self, host_id: &str, why: String) -> std::io::Result<()> {
        let Some(run) = self.terminals.runs.remove(host_id) else {
            return Ok(());
        };
        if self.outgoing.remove(&run.request).is_some() {
            self.cancel_request(run.request)?;
        }
        self.kill_and_release(run.terminal)?;
        self.terminal_done(host_id, Err(why));
        Ok(())
    }

    /// Kill, then release. Their answers are not waited for: the call has ended, and release
    /// kills what a lost kill left running.
    fn kill_and_release(&mut self, terminal: Option<TerminalId>) -> std::io::Result<()> {
        let Some(terminal) = terminal else {
            return Ok(());
        };
        let id = self.next_request_id();
        let params = KillTerminalRequest::new(self.session_id(), terminal.clone());
        self.wire.request(id, Step::Kill.method(), params)?;
        self.release(Some(terminal))
    }

    fn release(&mut self, terminal: Option<TerminalId>) -> std::io::Result<()> {
        let Some(terminal) = terminal else {
            return Ok(());
        };
        let id = self.next_request_id();
        let params = ReleaseTerminalRequest::new(self.session_id(), terminal);
        self.wire.request(id, "terminal/release", params)
    }

    /// Moves the run to `step` and sends its request, given up at `deadline`; the answer comes
    /// back to `on_terminal_response`.
    fn step<T: Serialize>(
        &mut self,
        host_id: &str,
        step: Step,
        params: T,
        deadline: Option<Instant>,
    ) -> std::io::Result<()> {
        let id = self.next_request_id();
        let Some(run) = self.terminals.runs.get_mut(host_id) else {
            return Ok(());
        };
        run.step = step;
        run.request = id.clone();
        run.deadline = deadline;
        let host_id = host_id.to_string();
        self.ask(id.clone(), Outgoing::Terminal { host_id });
        self.wire.request(id, step.method(), params)
    }

    fn cancel_request(&mut self, request: RequestId) -> std::io::Result<()> {
        self.wire
            .notify("$/cancel_request", CancelRequestNotification::new(request))
    }

    fn terminal_done(&mut self, host_id: &str, result: Result<TerminalExit, String>) {
        let id = host_id.to_string();
        let _ = self.host.send(HostRequest::TerminalDone { id, result });
    }
}

fn decode<T: DeserializeOwned>(result: Result<Value, Error>) -> Result<T, Error> {
    result.and_then(|v| {
        serde_json::from_value(v).map_err(|e| Error::invalid_params().data(e.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::unbounded;

    /// A front end writing to memory, and what it tells the host broker.
    fn front(terminal: bool) -> (Front<Vec<u8>>, Receiver<HostRequest>) {
        let (_out, frames, _wake) = crate::output::lane();
        let (_ended, ended) = unbounded();
        let (_shutdowns, shutdowns) = unbounded();
        let (host, broker) = unbounded();
        let connections = super::super::Connections {
            frames,
            sessions: None,
            ended,
            shutdowns,
            host,
            models: super::super::front::Models {
                available: Vec::new(),
                current: None,
                windows: Default::default(),
            },
            projects: super::super::sessions::Projects {
                agent_dir: std::env::temp_dir(),
                sessions_root: std::env::temp_dir(),
                fixed_dir: None,
                persistent: false,
                skills: false,
                home: None,
            },
            sandbox: Default::default(),
        };
        let (mut front, _) = Front::new(Vec::new(), connections);
        front.client.terminal = terminal;
        (front, broker)
    }

    fn run(id: &str) -> TerminalFrame {
        TerminalFrame::Run(TerminalRun {
            id: id.into(),
            tool_call_id: "call_1".into(),
            command: "true".into(),
            launcher: Vec::new(),
            cwd: std::env::temp_dir(),
            timeout: None,
            output_limit: 1024,
        })
    }

    fn answer(broker: &Receiver<HostRequest>) -> (String, Result<TerminalExit, String>) {
        match broker.try_recv() {
            Ok(HostRequest::TerminalDone { id, result }) => (id, result),
            _ => panic!("no terminal answer"),
        }
    }

    #[test]
    fn an_editor_that_never_creates_the_terminal_fails_the_call_at_the_deadline() {
        let (mut front, broker) = front(true);
        front.on_terminal(run("term_1")).unwrap();
        assert!(front.wire.sent().contains(r#""method":"terminal/create""#));
        assert!(broker.try_recv().is_err(), "nothing is answered yet");
        front.terminals.runs.get_mut("term_1").unwrap().deadline = Some(Instant::now());
        front.terminal_deadlines().unwrap();
        let (id, result) = answer(&broker);
        assert_eq!(id, "term_1");
        let error = result.unwrap_err();
        assert!(error.contains("terminal/create within 30 s"), "{error}");
        assert!(front.wire.sent().contains(r#""method":"$/cancel_request""#));
        // Nothing is kept for it.
        assert!(front.terminals.runs.is_empty() && front.outgoing.is_empty());
    }

    #[test]
    fn without_a_terminal_the_call_is_refused_at_once() {
        let (mut front, broker) = front(false);
        front.on_terminal(run("term_2")).unwrap();
        let (_, result) = answer(&broker);
        assert!(result.unwrap_err().contains("no terminal"));
        assert!(!front.wire.sent().contains("terminal/create"));
    }
}
