//! A shell command run in the front end's terminal (`CallKind::Terminal`): the round trip the
//! bash tool makes when the front end offers terminals, shaped like the host URI one: one call,
//! one answer, cancellable at any time by the caller.

use std::path::PathBuf;
use std::time::Duration;

use crossbeam_channel::{unbounded, RecvTimeoutError};

use super::{CallKind, HostEvent, HostHandle};
use crate::protocol::terminal::{TerminalExit, TerminalFrame, TerminalRun};
use crate::protocol::Outbound;

/// What to run and where.
pub struct Command {
    pub tool_call_id: String,
    pub command: String,
    /// The sandbox launcher's words before the shell (`TerminalRun::launcher`).
    pub launcher: Vec<String>,
    pub cwd: PathBuf,
    pub timeout: Option<Duration>,
    pub output_limit: u64,
}

/// Why no exit status came back.
#[derive(Debug, PartialEq)]
pub enum Failed {
    /// `cancelled` turned true; the front end was told to kill and release the terminal.
    Cancelled,
    /// The front end or the editor could not run it (the reason, for the model).
    Refused(String),
}

/// Asks the front end to run `c` in its terminal and waits until it ends, the call is
/// cancelled, or the broker goes away. The front end bounds every step it waits on the editor
/// for, so a silent editor ends in `Refused`, not in a wait without end.
pub fn run(
    host: &HostHandle,
    c: Command,
    cancelled: &dyn Fn() -> bool,
) -> Result<TerminalExit, Failed> {
    let (reply, rx) = unbounded();
    let call = host.call(CallKind::Terminal, None, reply, |id| {
        Outbound::Terminal(TerminalFrame::Run(TerminalRun {
            id,
            tool_call_id: c.tool_call_id,
            command: c.command,
            launcher: c.launcher,
            cwd: c.cwd,
            timeout: c.timeout,
            output_limit: c.output_limit,
        }))
    });
    let Some(id) = call else {
        return Err(Failed::Refused("the host broker is not running".into()));
    };
    loop {
        if cancelled() {
            host.cancel(id);
            return Err(Failed::Cancelled);
        }
        match crate::park::recv_timeout(&rx, Duration::from_millis(10)) {
            Ok(HostEvent::TerminalExit(exit)) => return Ok(exit),
            Ok(HostEvent::Rejected { reason, .. }) => return Err(Failed::Refused(reason)),
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Failed::Refused("the host broker stopped".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::HostRequest;

    fn command() -> Command {
        Command {
            tool_call_id: "call_1".into(),
            command: "echo hi".into(),
            launcher: Vec::new(),
            cwd: PathBuf::from("/"),
            timeout: None,
            output_limit: 1024,
        }
    }

    /// The broker, with the output lane's receiving end.
    fn broker() -> (HostHandle, crate::output::OutRx) {
        let (out, frames, _wake) = crate::output::lane();
        let (host, _thread) = crate::host::spawn(out).unwrap();
        (host, frames)
    }

    fn next_terminal(frames: &crate::output::OutRx) -> TerminalFrame {
        let queued = frames
            .receivers()
            .1
            .recv_timeout(Duration::from_secs(5))
            .expect("a frame");
        match queued.frame {
            Outbound::Terminal(t) => t,
            _ => panic!("not a terminal frame"),
        }
    }

    #[test]
    fn the_front_end_answer_is_the_result() {
        let (host, frames) = broker();
        let answering = host.clone();
        let front = std::thread::spawn(move || {
            let TerminalFrame::Run(run) = next_terminal(&frames) else {
                panic!("not a run")
            };
            assert_eq!(run.command, "echo hi");
            let exit = TerminalExit {
                output: "hi\n".into(),
                exit_code: Some(0),
                ..TerminalExit::default()
            };
            let _ = answering.sender().send(HostRequest::TerminalDone {
                id: run.id,
                result: Ok(exit),
            });
        });
        let exit = run(&host, command(), &|| false).unwrap();
        assert_eq!(exit.output, "hi\n");
        front.join().unwrap();
    }

    #[test]
    fn a_cancelled_run_tells_the_front_end() {
        let (host, frames) = broker();
        let flag = std::sync::atomic::AtomicBool::new(false);
        let watcher = std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                run(&host, command(), &|| {
                    flag.load(std::sync::atomic::Ordering::SeqCst)
                })
            });
            let TerminalFrame::Run(started) = next_terminal(&frames) else {
                panic!("not a run")
            };
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(waiting.join().unwrap(), Err(Failed::Cancelled));
            started.id
        });
        assert_eq!(
            next_terminal(&frames),
            TerminalFrame::Cancel { target_id: watcher }
        );
    }
}
