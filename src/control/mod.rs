//! The unattended control plane: what an external agent declared it may do (actor, budget,
//! scopes, action classes), the checks the session consults before anything runs on its behalf,
//! the budget meter and the audit trail. It never drives the session: the session asks it
//! (`preflight` before a command, `tool_call` before a model tool call, `live`/`commit` as model
//! usage arrives, `tick` when the wall-time timer fires) and acts on the answer.

pub mod audit;
pub mod budget;
use crate::gates::canonical;
pub mod classify;
pub mod declaration;
mod lex;
pub mod scope;

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};

pub use audit::AuditEvent;
pub use budget::Breach;
pub use classify::{classify_bash, is_read_only, ActionClass};
use declaration::Declaration;

use crate::protocol::reply::{BudgetFigures, UnattendedAccepted, UnattendedStatus};

/// A refusal: `code: message` on the wire, and the same error as an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
    pub details: Value,
}

/// What a preflight or a model tool call may do.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow,
    /// Not allowed by the declaration; nothing happened.
    Deny(Refusal),
    /// Over budget. `first`: this call found the breach (the run is to be aborted now).
    Exceeded {
        refusal: Refusal,
        first: bool,
    },
}

struct Active {
    declaration: Declaration,
    accepted_at: String,
    meter: budget::Meter,
    audit: audit::Audit,
    audit_error: Option<String>,
}

pub struct Plane {
    /// The session id gjc started with: the unattended run id.
    run_id: String,
    /// Whether the startup model reports usage while streaming (fixed at start-up).
    usage_capable: bool,
    session_dir: PathBuf,
    active: Option<Active>,
}

impl Plane {
    pub fn new(run_id: &str, usage_capable: bool, session_dir: PathBuf) -> Plane {
        Plane {
            run_id: run_id.to_string(),
            usage_capable,
            session_dir,
            active: None,
        }
    }

    pub fn is_unattended(&self) -> bool {
        self.active.is_some()
    }

    /// What the declaration lets commands do in the kernel sandbox: `(may write, may use the
    /// network)`. Writing needs a class that changes files (`bash.mutating`, `bash.destructive`,
    /// `file.write`, `file.delete`, `git.force_push`); the network needs `network.access`.
    pub fn sandbox_limit(&self) -> Option<(bool, bool)> {
        let allowed = &self.active.as_ref()?.declaration.action_allowlist;
        let write = allowed.iter().any(|c| c.changes_files());
        let network = allowed.contains(&ActionClass::NetworkAccess);
        Some((write, network))
    }

    /// `negotiate_unattended`: validates, opens the audit trail, and replaces any earlier
    /// negotiation (budgets and counters start over, the wall clock restarts).
    pub fn negotiate(
        &mut self,
        declaration: Option<&Value>,
        session_id: &str,
    ) -> Result<UnattendedAccepted, Refusal> {
        let declaration =
            declaration::validate(declaration, self.usage_capable).map_err(|r| Refusal {
                details: json!({"code": r.code, "message": r.message}),
                code: r.code,
                message: r.message,
            })?;
        let audit = audit::Audit::open(&self.session_dir, &self.run_id).map_err(|e| {
            let message = e.to_string();
            Refusal {
                code: "unattended_audit_unavailable",
                details: json!({"code": "unattended_audit_unavailable", "message": message}),
                message,
            }
        })?;
        let active = Active {
            meter: budget::Meter::new(declaration.budget.clone()),
            declaration,
            accepted_at: crate::ids::iso_now(),
            audit,
            audit_error: None,
        };
        self.active = Some(active);
        let accepted = self.accepted().expect("just negotiated");
        let budget = Value::Object(accepted.budget.clone());
        self.audit(
            AuditEvent {
                event: "unattended_negotiated",
                budget: Some(budget),
                ..Default::default()
            },
            session_id,
        );
        Ok(accepted)
    }

    fn accepted(&self) -> Option<UnattendedAccepted> {
        let a = self.active.as_ref()?;
        let d = &a.declaration;
        Some(UnattendedAccepted {
            run_id: self.run_id.clone(),
            actor: d.actor.clone(),
            budget: d.budget.as_sent.clone(),
            scopes: d.scopes.iter().map(|s| s.as_str()).collect(),
            action_allowlist: d.action_allowlist.iter().map(|c| c.as_str()).collect(),
            accepted_at: a.accepted_at.clone(),
        })
    }

    /// Records an event in the audit trail (one record per event, numbered). A failed write is kept for
    /// `get_state` and logged; the command goes on.
    pub fn audit(&mut self, ev: AuditEvent<'_>, session_id: &str) {
        let Some(a) = &mut self.active else { return };
        let actor = a.declaration.actor.clone();
        if let Err(e) = a.audit.record(ev, session_id, Some(&actor)) {
            log::error!("unattended audit: {e}");
            a.audit_error = Some(e.to_string());
        }
    }

    /// The checks before a command runs (every command but `negotiate_unattended`, once
    /// unattended): for a charged command the wall clock and one tool-call unit (taken before the
    /// scope check, as the reference does), then the scope and the action class. `bash` is
    /// checked by the class of its command text. Commands that do no work (reads, `abort`) are
    /// never refused by the budget, so a host can still look and stop after a breach.
    pub fn preflight(&mut self, command: &str, bash: Option<&str>, session_id: &str) -> Verdict {
        if self.active.is_none() || command == "negotiate_unattended" {
            return Verdict::Allow;
        }
        if scope::is_charged(command) {
            let phase = format!("{command} preflight");
            if let Some(v) = self.charge(&phase, session_id) {
                return v;
            }
        }
        match self.permission(command, bash) {
            Ok(()) => Verdict::Allow,
            Err(denial) => Verdict::Deny(self.deny(denial, bash, None, session_id)),
        }
    }

    /// Wall time, then one tool-call unit; `None` when both pass.
    fn charge(&mut self, phase: &str, session_id: &str) -> Option<Verdict> {
        let a = self.active.as_mut()?;
        let first = a.meter.breach.is_none();
        if let Some(previous) = a.meter.breach.clone() {
            let again = Breach {
                phase: phase.to_string(),
                ..previous
            };
            return Some(Verdict::Exceeded {
                refusal: self.exceeded(&again, session_id),
                first: false,
            });
        }
        let checked = a
            .meter
            .check_wall(phase)
            .and_then(|_| a.meter.reserve_tool_call(phase));
        let breach = checked.err()?;
        Some(self.breach(breach, first, session_id))
    }

    fn permission(&self, command: &str, bash: Option<&str>) -> Result<(), Denial> {
        let Some(a) = &self.active else {
            return Ok(());
        };
        let d = &a.declaration;
        let Some(scope) = scope::scope_of(command) else {
            return Err(Denial::Scope(None));
        };
        if !d.scopes.contains(&scope) {
            return Err(Denial::Scope(Some(scope)));
        }
        let action = match (command, bash) {
            ("bash", Some(text)) => classify_bash(text),
            _ => scope.action(),
        };
        if !d.action_allowlist.contains(&action) {
            return Err(Denial::Action(action));
        }
        Ok(())
    }

    /// The refusal of a command, or (`tool`: the tool's name and call id) of a model tool call;
    /// audited before it is returned.
    fn deny(
        &mut self,
        denial: Denial,
        bash: Option<&str>,
        tool: Option<(&str, &str)>,
        session_id: &str,
    ) -> Refusal {
        let text = bash.map(|t| crate::secrets::installed().scrub(t).into_owned());
        let (code, field, value, message) = match denial {
            Denial::Scope(Some(s)) => (
                "scope_denied",
                "scope",
                Some(s.as_str()),
                format!("scope {} is not declared", s.as_str()),
            ),
            Denial::Scope(None) => (
                "scope_denied",
                "scope",
                None,
                "the command belongs to no unattended scope".to_string(),
            ),
            Denial::Action(c) => (
                "action_denied",
                "action",
                Some(c.as_str()),
                format!("action {} is not in the action_allowlist", c.as_str()),
            ),
        };
        let mut details = json!({"code": code});
        if let Some(v) = value {
            details[field] = json!(v);
        }
        if let Some(t) = &text {
            details["command"] = json!(t);
        }
        if let Some((name, call_id)) = tool {
            details["tool"] = json!(name);
            details["toolCallId"] = json!(call_id);
        }
        details["run_id"] = json!(self.run_id);
        details["session_id"] = json!(session_id);
        details["pre_side_effect"] = json!(true);
        self.audit(
            AuditEvent {
                event: code,
                scope: (field == "scope").then_some(value).flatten(),
                action: (field == "action").then_some(value).flatten(),
                error: Some(details.clone()),
                ..Default::default()
            },
            session_id,
        );
        Refusal {
            code,
            message,
            details,
        }
    }

    /// A breach as the `budget_exceeded` error; the first one is audited with the abort.
    fn breach(&mut self, breach: Breach, first: bool, session_id: &str) -> Verdict {
        let refusal = self.exceeded(&breach, session_id);
        if first {
            let budget = self
                .accepted()
                .map(|a| Value::Object(a.budget))
                .unwrap_or(Value::Null);
            for event in ["budget_exceeded", "unattended_aborted"] {
                self.audit(
                    AuditEvent {
                        event,
                        budget: Some(budget.clone()),
                        error: Some(refusal.details.clone()),
                        ..Default::default()
                    },
                    session_id,
                );
            }
        }
        Verdict::Exceeded { refusal, first }
    }

    fn exceeded(&self, b: &Breach, session_id: &str) -> Refusal {
        Refusal {
            code: "budget_exceeded",
            message: b.message(),
            details: json!({
                "code": "budget_exceeded",
                "metric": b.metric.as_str(),
                "limit": budget::number(b.limit),
                "observed": budget::number(b.observed),
                "phase": b.phase,
                "run_id": self.run_id,
                "session_id": session_id,
                "abort_status": "aborting",
            }),
        }
    }

    /// After the abort a breach started has finished.
    pub fn abort_settled(&mut self, session_id: &str) {
        self.audit(
            AuditEvent {
                event: "unattended_abort_settled",
                error: Some(json!({"status": "aborted", "failures": []})),
                ..Default::default()
            },
            session_id,
        );
    }

    /// Before one of the model's tool calls runs: one tool-call unit, then, for `bash` the class
    /// of its command and for `write` / `edit` `file.write`, which the allowlist must contain.
    pub fn tool_call(
        &mut self,
        tool: &str,
        call_id: &str,
        args: &Value,
        session_id: &str,
    ) -> Verdict {
        if self.active.is_none() {
            return Verdict::Allow;
        }
        if let Some(v) = self.charge("tool call", session_id) {
            return v;
        }
        let (action, command) = match tool {
            "bash" => {
                let text = args.get("command").and_then(Value::as_str).unwrap_or("");
                (classify_bash(text), Some(text))
            }
            "write" | "edit" => (ActionClass::FileWrite, None),
            name if name.starts_with(crate::protocol::mcp::MCP_TOOL_PREFIX) => {
                (ActionClass::McpToolInvoke, None)
            }
            _ => return Verdict::Allow,
        };
        let allowed = self
            .active
            .as_ref()
            .is_some_and(|a| a.declaration.action_allowlist.contains(&action));
        if allowed {
            return Verdict::Allow;
        }
        Verdict::Deny(self.deny(
            Denial::Action(action),
            command,
            Some((tool, call_id)),
            session_id,
        ))
    }

    /// Model request `stream` streamed about `tokens` more output tokens at `price` USD each.
    pub fn stream_output(
        &mut self,
        stream: u64,
        tokens: f64,
        price: f64,
        session_id: &str,
    ) -> Verdict {
        self.usage(|m| m.stream_output(stream, tokens, price), session_id)
    }

    /// The provider reported model request `stream`'s usage so far.
    pub fn stream_report(
        &mut self,
        stream: u64,
        usage: &crate::protocol::message::Usage,
        session_id: &str,
    ) -> Verdict {
        let total = (usage.input + usage.output + usage.cache_read + usage.cache_write) as f64;
        let (output, cost) = (usage.output as f64, usage.cost.total);
        self.usage(|m| m.stream_report(stream, total, output, cost), session_id)
    }

    /// A model request finished having used this much.
    pub fn commit(&mut self, tokens: f64, cost: f64, session_id: &str) -> Verdict {
        self.usage(|m| m.commit(tokens, cost, "model stream"), session_id)
    }

    fn usage(
        &mut self,
        f: impl FnOnce(&mut budget::Meter) -> Result<(), Breach>,
        session_id: &str,
    ) -> Verdict {
        let Some(a) = &mut self.active else {
            return Verdict::Allow;
        };
        let first = a.meter.breach.is_none();
        match f(&mut a.meter) {
            Ok(()) => Verdict::Allow,
            // Only the first breach stops anything; later usage of the aborted stream is counted.
            Err(_) if !first => Verdict::Allow,
            Err(b) => self.breach(b, true, session_id),
        }
    }

    /// When the session must wake to check the wall clock.
    pub fn wall_deadline(&self) -> Option<Instant> {
        self.active.as_ref()?.meter.wall_deadline()
    }

    /// The wall-time timer fired (or any timer: the check is cheap).
    pub fn tick(&mut self, session_id: &str) -> Verdict {
        let Some(a) = &mut self.active else {
            return Verdict::Allow;
        };
        if a.meter.breach.is_some() {
            return Verdict::Allow;
        }
        match a.meter.check_wall("timer") {
            Ok(()) => Verdict::Allow,
            Err(b) => self.breach(b, true, session_id),
        }
    }

    pub fn status(&self, session_id: &str) -> Option<UnattendedStatus> {
        let declaration = self.accepted()?;
        let a = self.active.as_ref()?;
        let figures = |u: budget::Used| BudgetFigures {
            tokens: budget::number(u.tokens),
            tool_calls: budget::number(u.tool_calls),
            wall_time_ms: budget::number(u.wall_time_ms),
            cost_usd: budget::number(u.cost_usd),
        };
        Some(UnattendedStatus {
            declaration,
            used: figures(a.meter.used()),
            left: figures(a.meter.left()),
            exceeded: a
                .meter
                .breach
                .as_ref()
                .map(|b| self.exceeded(b, session_id).details),
            audit_error: a.audit_error.clone(),
        })
    }
}

enum Denial {
    /// `None`: the command has no scope at all.
    Scope(Option<scope::Scope>),
    Action(ActionClass),
}
