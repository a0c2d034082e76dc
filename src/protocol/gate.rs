//! Workflow gates on the wire: the `workflow_gate` frame, what `workflow_gate_response` answers,
//! and `get_pending_workflow_gates`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `{type:"workflow_gate", ...}`: a question the run waits on until the host answers it with
/// `workflow_gate_response` (or, for `ask` questions in attended mode, through the UI dialog).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkflowGate {
    /// `wg_<run8>_<stage>_<NNNNNN>`: the per-stage counter, zero-padded to six digits, wider
    /// once past 999,999.
    pub gate_id: String,
    /// `deep-interview`, `ralplan` or `ultragoal`.
    pub stage: String,
    /// `question`, `approval` or `execution`.
    pub kind: String,
    /// What a valid answer looks like (a JSON Schema subset).
    pub schema: Value,
    /// SHA-256 of the canonical JSON of `schema`.
    pub schema_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<GateOption>>,
    #[serde(default)]
    pub context: Map<String, Value>,
    /// ISO-8601 UTC with milliseconds.
    pub created_at: String,
    /// Always true: a gate cannot be skipped.
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GateOption {
    pub value: Value,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `workflow_gate_response` data: `accepted`, or `rejected` (the answer failed the schema; the
/// gate stays pending) with `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GateResolution {
    pub gate_id: String,
    pub status: String,
    pub answer_hash: String,
    pub resolved_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<GateAnswerError>,
}

/// Why an answer was rejected: `code` is `invalid_workflow_gate_answer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GateAnswerError {
    pub code: String,
    pub gate_id: String,
    pub schema_hash: String,
    pub errors: Vec<Violation>,
}

/// One violation; `path` is rooted at `#` (`#/selected/0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Violation {
    pub path: String,
    pub keyword: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
}

/// `get_pending_workflow_gates` data.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PendingGates {
    pub gates: Vec<WorkflowGate>,
}
