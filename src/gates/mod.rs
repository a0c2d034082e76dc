//! Workflow gates: machine-answerable human decisions (docs/workflows.md). `canonical` prints
//! JSON as JavaScript would and hashes it, `schema` is the JSON Schema subset, `store` the
//! durable file, `broker` the owner of every gate.

pub mod broker;
pub mod canonical;
pub mod schema;
pub mod store;

pub use broker::{Broker, GateSpec, Waiter};

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;

/// What a tool call asks of the broker (through `ToolEvent::Gate`, handled by the session).
#[derive(Debug)]
pub enum GateRequest {
    Open {
        what: OpenWhat,
        reply: Sender<Result<Opened, String>>,
    },
    /// The host answered the question's UI dialog first; `answer` is in the gate's answer form.
    ResolvedElsewhere { gate_id: String, answer: Value },
    /// The producer stopped waiting (cancelled, timed out, dialog dismissed).
    Withdraw { gate_id: String },
}

#[derive(Debug)]
pub enum OpenWhat {
    /// An `ask` question (its own stage and kind).
    Question(GateSpec),
    /// The active stage's decision: ralplan approval or ultragoal execution.
    Decision {
        title: Option<String>,
        summary: String,
    },
}

#[derive(Debug)]
pub struct Opened {
    pub gate_id: String,
    /// No UI dialog goes with the gate: only the gate can answer.
    pub unattended: bool,
    /// Receives the accepted answer.
    pub answer: Receiver<Value>,
}
