//! Tool hooks: `before_tool_call` and `after_tool_call` run inside the call's `gjc-tool` worker,
//! before and after the tool itself, so the session never waits for them. A `before_tool_call`
//! hook may deny the call or replace its arguments (checked against the tool's schema again);
//! when it fails, the call is denied (fail closed). `after_tool_call` hooks only observe.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{exec, Hook, Hooks};
use crate::exec::JobOwner;
use crate::protocol::message::ToolOutput;
use crate::tools::{Outcome, Tool, ToolContext};

const ABORTED: &str = "Tool execution was aborted";

/// A tool with its hooks around it; the session spawns this instead of the tool when any tool
/// hook is configured for the tool's name.
pub struct HookedTool {
    pub inner: Arc<dyn Tool>,
    pub hooks: Arc<Hooks>,
}

impl HookedTool {
    /// Wraps `tool` when a tool hook applies to it.
    pub fn wrap(tool: Arc<dyn Tool>, hooks: Option<Arc<Hooks>>) -> Arc<dyn Tool> {
        let Some(hooks) = hooks else { return tool };
        let name = tool.name().to_string();
        let applies = ["before_tool_call", "after_tool_call"]
            .iter()
            .any(|ev| hooks.for_event(ev, Some(&name)).next().is_some());
        if applies {
            Arc::new(HookedTool { inner: tool, hooks })
        } else {
            tool
        }
    }

    fn payload(&self, event: &str, args: &Value, ctx: &ToolContext) -> Value {
        json!({
            "event": event,
            "toolName": self.inner.name(),
            "toolCallId": ctx.call_id,
            "arguments": args,
            "cwd": ctx.cwd,
        })
    }

    /// The arguments to run with, or the output that replaces the call.
    fn before(&self, mut args: Value, ctx: &ToolContext) -> Result<Value, ToolOutput> {
        let name = self.inner.name().to_string();
        for hook in self.hooks.for_event("before_tool_call", Some(&name)) {
            let payload = self.payload("before_tool_call", &args, ctx);
            let owner = JobOwner::Tool(ctx.call_id.clone());
            // An abort sets `ctx.cancel` before it aborts the call's jobs, the order
            // `run_cancellable` needs: a hook whose start races the abort is still killed.
            let answer = exec::run_cancellable(&self.hooks, hook, &payload, owner, &ctx.cancel);
            if ctx.is_cancelled() {
                return Err(ToolOutput::error(ABORTED));
            }
            match answer.and_then(|a| self.decide(hook, a)) {
                Ok(Decision::Allow(None)) => {}
                Ok(Decision::Allow(Some(new))) => args = new,
                Ok(Decision::Deny(reason)) => {
                    return Err(denied(hook, &format!("Denied by hook: {reason}"), &reason))
                }
                Err(e) => {
                    self.hooks.report(hook, &e);
                    let text = format!(
                        "Tool call denied: the before_tool_call hook {} failed ({e}), and a failing hook denies the call.",
                        hook.command.display()
                    );
                    return Err(denied(hook, &text, &e));
                }
            }
        }
        Ok(args)
    }

    /// Reads a hook's answer: nothing or `{"decision":"allow"}` lets the call run, optionally
    /// with new `arguments`; `{"decision":"deny","reason":…}` stops it.
    fn decide(&self, hook: &Hook, answer: Option<Value>) -> Result<Decision, String> {
        let Some(answer) = answer else {
            return Ok(Decision::Allow(None));
        };
        let reason = answer.get("reason").and_then(Value::as_str);
        match answer.get("decision").and_then(Value::as_str) {
            None | Some("allow") => {}
            Some("deny") => {
                let reason = reason.unwrap_or("no reason given");
                return Ok(Decision::Deny(reason.to_string()));
            }
            Some(other) => return Err(format!("decision {other:?} is neither allow nor deny")),
        }
        match answer.get("arguments") {
            None | Some(Value::Null) => Ok(Decision::Allow(None)),
            Some(args @ Value::Object(_)) => {
                self.check(args)?;
                log::debug!("hook {} replaced the arguments", hook.command.display());
                Ok(Decision::Allow(Some(args.clone())))
            }
            Some(_) => Err("arguments must be an object".into()),
        }
    }

    /// Replaced arguments must still fit the tool's schema.
    fn check(&self, args: &Value) -> Result<(), String> {
        let Ok(validator) = jsonschema::validator_for(&self.inner.parameters()) else {
            return Ok(());
        };
        let errors: Vec<String> = validator.iter_errors(args).map(|e| e.to_string()).collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "its arguments do not fit the {} tool: {}",
                self.inner.name(),
                errors.join("; ")
            ))
        }
    }

    fn after(&self, args: &Value, output: &ToolOutput, ctx: &ToolContext) {
        let name = self.inner.name().to_string();
        for hook in self.hooks.for_event("after_tool_call", Some(&name)) {
            let mut payload = self.payload("after_tool_call", args, ctx);
            payload["result"] = serde_json::to_value(output).unwrap_or(Value::Null);
            payload["isError"] = Value::Bool(output.is_error);
            let owner = JobOwner::Tool(ctx.call_id.clone());
            let answer = exec::run_cancellable(&self.hooks, hook, &payload, owner, &ctx.cancel);
            if ctx.is_cancelled() {
                return;
            }
            if let Err(e) = answer {
                self.hooks.report(hook, &e);
            }
        }
    }
}

enum Decision {
    Allow(Option<Value>),
    Deny(String),
}

fn denied(hook: &Hook, text: &str, reason: &str) -> ToolOutput {
    ToolOutput::error(text).with_details(json!({
        "deniedBy": hook.command.display().to_string(),
        "reason": reason,
    }))
}

impl Tool for HookedTool {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn description(&self) -> String {
        self.inner.description()
    }

    fn parameters(&self) -> Value {
        self.inner.parameters()
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        self.run(args, ctx).output
    }

    /// The inner tool's outcome, effects included, between the hooks.
    fn run(&self, args: &Value, ctx: &ToolContext) -> Outcome {
        let args = match self.before(args.clone(), ctx) {
            Ok(a) => a,
            Err(output) => return output.into(),
        };
        if ctx.is_cancelled() {
            return ToolOutput::error(ABORTED).into();
        }
        let outcome = self.inner.run(&args, ctx);
        if !ctx.is_cancelled() {
            self.after(&args, &outcome.output, ctx);
        }
        outcome
    }
}
