//! Running a call: on a kept `gjc-tool` thread (`spawn`), or, for a host tool with nothing
//! to run around it, on no thread at all (`start_on_host`). Either way the session hears of it
//! through `ToolMsg`s tagged with the run generation, and stops it through its `ToolHandle`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;
use serde_json::Value;

use super::{guard, Services, Tool, ToolContext};
use crate::host::tools::Step;
use crate::host::HostHandle;
use crate::protocol::message::ToolOutput;
use crate::protocol::Outbound;

#[derive(Debug)]
pub struct ToolMsg {
    pub generation: u64,
    pub call_id: String,
    pub event: ToolEvent,
}

#[derive(Debug)]
pub enum ToolEvent {
    Update(ToolOutput),
    Done(ToolOutput),
    /// A request to the gate broker, which the session owns.
    Gate(crate::gates::GateRequest),
}

/// What the session keeps for a running call.
pub struct ToolHandle {
    cancel: Arc<AtomicBool>,
    /// A host tool call started without a thread: its broker and id.
    host_call: Option<(HostHandle, String)>,
}

impl ToolHandle {
    /// Asks the call to stop; its output, if it still sends one, no longer matters.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
        if let Some((host, id)) = &self.host_call {
            host.cancel(id.clone());
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
    let update_tx = tx.clone();
    let update_id = call_id.clone();
    let gate_tx = tx.clone();
    let gate_id = call_id.clone();
    let ctx = ToolContext {
        cwd: services.cwd,
        call_id: call_id.clone(),
        cancel: cancel.clone(),
        bash: services.bash,
        host: Some(services.host),
        schemes: services.schemes,
        policy: services.policy,
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
    };
    log::debug!("tool {} call {call_id} starts", tool.name());
    let worker = TOOL_THREADS.run(move || {
        let started = std::time::Instant::now();
        let mut output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            guard::refusal(tool.name(), &args, &ctx).unwrap_or_else(|| tool.execute(&args, &ctx))
        }))
        .unwrap_or_else(|_| ToolOutput::error(format!("tool {} failed unexpectedly", tool.name())));
        crate::secrets::scrub_output(&mut output);
        log::debug!(
            "tool {} call {call_id} ended ({}) after {} ms",
            tool.name(),
            if output.is_error { "error" } else { "ok" },
            started.elapsed().as_millis()
        );
        let _ = tx.send(ToolMsg {
            generation,
            call_id,
            event: ToolEvent::Done(output),
        });
    });
    if let Err(e) = worker {
        log::error!("cannot start tool thread: {e}");
    }
    ToolHandle {
        cancel,
        host_call: None,
    }
}

/// A host tool call started without a thread ([`start_on_host`]).
pub struct Started {
    pub handle: ToolHandle,
    /// The `host_tool_call` frame, for the caller to queue behind the call's start; `None` when
    /// the call already ended (the broker had stopped).
    pub frame: Option<Outbound>,
}

/// Starts a host tool's call with no tool thread when nothing needs one (no hook wraps it, and
/// the approval guard has nothing to ask, which it never has for a tool that only reads): the
/// broker turns the host's answers into this call's messages on `tx`. `None` when the call
/// needs a thread (`spawn`).
pub fn start_on_host(
    tool: &dyn Tool,
    args: &Value,
    call_id: &str,
    generation: u64,
    tx: &Sender<ToolMsg>,
) -> Option<Started> {
    let host_tool = tool.as_host()?;
    if guard::effect(tool.name(), args) != guard::Effect::ReadOnly {
        return None;
    }
    log::debug!("host tool {} call {call_id} starts", tool.name());
    let (to_session, id) = (tx.clone(), call_id.to_string());
    let send = move |event| {
        let _ = to_session.send(ToolMsg {
            generation,
            call_id: id.clone(),
            event,
        });
    };
    let on = {
        let send = send.clone();
        move |step| match step {
            Step::Update(mut partial) => {
                crate::secrets::scrub_output(&mut partial);
                send(ToolEvent::Update(partial));
            }
            Step::Done(mut output) => {
                crate::secrets::scrub_output(&mut output);
                send(ToolEvent::Done(output));
            }
            Step::Other => {}
        }
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let (host_call, frame) = match host_tool.start(args, call_id, on) {
        Ok((id, frame)) => (Some((host_tool.host.clone(), id)), Some(frame)),
        Err(output) => {
            send(ToolEvent::Done(output));
            (None, None)
        }
    };
    Some(Started {
        handle: ToolHandle { cancel, host_call },
        frame,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tools::HostTool;
    use crate::host::HostRequest;
    use crate::protocol::command::HostToolDefinition;
    use crate::protocol::host_reply::{HostReply, HostToolResult};
    use crate::protocol::FlatFrame;
    use serde_json::json;

    /// A host tool starts on no thread: its frame comes back for the session to queue, and the
    /// host's result reaches the session as the call's `Done`, tagged with the call. Any other
    /// tool is left to `spawn`.
    #[test]
    fn a_host_tool_starts_on_no_thread() {
        let (out, _frames, _wake) = crate::output::lane();
        let (host, _thread) = crate::host::spawn(out).unwrap();
        let def = HostToolDefinition {
            name: "echo".into(),
            label: None,
            description: String::new(),
            parameters: json!({"type": "object"}),
        };
        let tool = HostTool::new(def, host.clone());
        let (tx, rx) = crossbeam_channel::unbounded();
        let started = start_on_host(&*tool, &json!({"m": 1}), "call_1", 7, &tx).expect("direct");
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
        let result = HostToolResult {
            id,
            result: ToolOutput::text("ok"),
            is_error: true,
        };
        host.sender()
            .send(HostRequest::Reply(HostReply::ToolResult(result)))
            .unwrap();
        let msg = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert_eq!((msg.generation, msg.call_id.as_str()), (7, "call_1"));
        match msg.event {
            ToolEvent::Done(output) => assert!(output.is_error, "the host's isError is kept"),
            _ => panic!("not the call's end"),
        }
        assert!(start_on_host(&super::super::read::Read, &json!({}), "call_2", 7, &tx).is_none());
    }
}
