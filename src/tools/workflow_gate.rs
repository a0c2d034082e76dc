//! `workflow_gate`: how the model presents its plan (ralplan) or its autonomous course
//! (ultragoal) for a decision. The call opens the stage's gate and waits for the answer; the
//! session has already applied it to the stage (cleared, or ended with outcome `denied`) when the
//! result comes back.

use std::time::Duration;

use serde_json::{json, Value};

use super::{Tool, ToolContext};
use crate::gates::{GateRequest, OpenWhat};
use crate::protocol::message::ToolOutput;

pub struct WorkflowGateTool;

impl Tool for WorkflowGateTool {
    fn name(&self) -> &str {
        crate::workflow::GATE_TOOL
    }

    fn description(&self) -> String {
        "Present your plan (during /ralplan) or your course of action (during /ultragoal) to the user for a decision, and wait for it. The result is the decision: approve, request-changes (with comments), reject or decline.".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object",
            "properties": {
                "summary": {"type": "string", "minLength": 1, "description": "The full plan or course of action, as the user should read it"},
                "title": {"type": "string", "description": "A one-line title"}},
            "required": ["summary"], "additionalProperties": false})
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let what = OpenWhat::Decision {
            title: args["title"].as_str().map(str::to_string),
            summary: args["summary"].as_str().unwrap_or("").to_string(),
        };
        let opened = match open(ctx, what) {
            Ok(Some(o)) => o,
            Ok(None) => return ToolOutput::error("workflow gates are not available here"),
            Err(e) => return ToolOutput::error(e),
        };
        let Some(answer) = wait(ctx, &opened.gate_id, &opened.answer, None) else {
            return ToolOutput::error("The decision was cancelled");
        };
        let decision = answer["decision"].as_str().unwrap_or("");
        let note = answer["comments"].as_str().or(answer["reason"].as_str());
        let text = match decision {
            "approve" => "Approved. The read-only restriction is lifted: carry out the plan now, step by step, and verify the result.".to_string(),
            "request-changes" => format!(
                "Changes requested: {}\nRevise the plan accordingly and present it again with workflow_gate.",
                note.unwrap_or("")
            ),
            "reject" => "Rejected. Stop here: the run ends.".to_string(),
            _ => format!("Declined{}. Stop here: the run ends.", note.map(|r| format!(": {r}")).unwrap_or_default()),
        };
        ToolOutput::text(text).with_details(json!({"gateId": opened.gate_id, "answer": answer}))
    }
}

/// Opens a gate through the session and waits for it to be persisted (and its frame written).
/// `Ok(None)`: no broker is reachable from this call (it runs outside a session, or its run
/// was abandoned); `Err`: the broker refused the gate (`code: message`).
pub fn open(ctx: &ToolContext, what: OpenWhat) -> Result<Option<crate::gates::Opened>, String> {
    let (reply, rx) = crossbeam_channel::bounded(1);
    if !ctx.gate(GateRequest::Open { what, reply }) {
        return Ok(None);
    }
    loop {
        if ctx.is_cancelled() {
            return Ok(None);
        }
        match crate::park::recv_timeout(&rx, Duration::from_millis(20)) {
            Ok(result) => return result.map(Some),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(_) => return Ok(None),
        }
    }
}

/// Waits for the gate's answer until it comes, the call is cancelled, or `timeout` passes; the
/// gate is withdrawn when no answer came.
pub fn wait(
    ctx: &ToolContext,
    gate_id: &str,
    answers: &crossbeam_channel::Receiver<Value>,
    timeout: Option<Duration>,
) -> Option<Value> {
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    loop {
        if ctx.is_cancelled() || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            ctx.gate(GateRequest::Withdraw {
                gate_id: gate_id.into(),
            });
            return None;
        }
        match crate::park::recv_timeout(answers, Duration::from_millis(20)) {
            Ok(answer) => return Some(answer),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(_) => return None,
        }
    }
}
