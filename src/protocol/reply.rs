//! Response payloads (`response.data`), one type per command that has one. Published clients read
//! these field by field (`docs/protocol.md`, "Responses"): every payload is a JSON object, numbers
//! are never `null`, and optional fields are left out rather than sent as `null` where a client
//! applies its default only to a missing key.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A model as hosts see it (`get_state.model`, `set_model`, `cycle_model.model`,
/// `get_available_models.models[]`). Headers and keys are never echoed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    pub name: String,
    pub api: &'static str,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    pub input: Vec<String>,
    pub cost: ModelCostInfo,
    pub context_window: u64,
    pub max_tokens: u64,
    /// The thinking levels the model accepts, for reasoning models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingRange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compat: Option<Value>,
}

/// Dollars per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelCostInfo {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingRange {
    pub min_level: &'static str,
    pub max_level: &'static str,
    /// How the level reaches the provider: `effort` (a named effort) or `budget` (a token budget).
    pub mode: &'static str,
}

/// One todo phase (`get_state.todoPhases`, `set_todos`, the `todo_write` tool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TodoPhase {
    pub id: String,
    pub name: String,
    pub tasks: Vec<TodoTask>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TodoTask {
    pub id: String,
    pub content: String,
    /// `pending` | `in_progress` | `completed` | `abandoned`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
}

/// `get_state`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    pub thinking_level: &'static str,
    pub is_streaming: bool,
    pub is_compacting: bool,
    pub steering_mode: &'static str,
    pub follow_up_mode: &'static str,
    pub interrupt_mode: &'static str,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_save_error: Option<String>,
    /// Why models.json was skipped, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    pub auto_compaction_enabled: bool,
    pub auto_retry_enabled: bool,
    pub message_count: usize,
    pub queued_message_count: usize,
    pub todo_phases: Vec<TodoPhase>,
    /// The ids of the workflow gates waiting for an answer, oldest first.
    pub pending_workflow_gate_ids: Vec<String>,
    /// The workflow stage in progress (`deep-interview`, `ralplan`, `ultragoal`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_stage: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_usage: Option<ContextUsage>,
    /// With `include: ["systemPrompt"]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<Vec<String>>,
    /// With `include: ["tools"]` (or `dumpTools`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dump_tools: Option<Vec<ToolInfo>>,
    /// The unattended control plane's status, once `negotiate_unattended` was accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unattended: Option<UnattendedStatus>,
    /// The kernel sandbox commands run in (docs/sandbox.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::sandbox::SandboxState>,
    /// Whether the session's project is trusted, so its `.gjc/hooks.json` is loaded.
    pub project_trusted: bool,
    /// The session's MCP servers (docs/mcp.md), when it has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<super::mcp::McpServerStatus>,
}

/// `trust_project`: the decision as remembered.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ProjectTrust {
    /// The project folder, canonical.
    pub cwd: String,
    pub trusted: bool,
}

/// How full the model's context window is.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextUsage {
    /// `null` when unknown (right after a compaction, until the next reply reports usage).
    pub tokens: Option<u64>,
    pub context_window: u64,
    pub percent: Option<f64>,
    /// `provider_anchor` (the last reply's usage plus an estimate of what followed it),
    /// `heuristic` (an estimate only) or `unknown`.
    pub source: &'static str,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// `get_session_stats`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    pub session_file: Option<String>,
    pub session_id: String,
    pub user_messages: u64,
    pub assistant_messages: u64,
    pub tool_calls: u64,
    pub tool_results: u64,
    pub total_messages: u64,
    pub tokens: TokenTotals,
    pub cost: f64,
}

#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

/// The user `bash` command's result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BashResult {
    pub output: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    pub total_lines: u64,
    pub total_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

/// `compact` and `auto_compaction_end.result`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// `new_session`, `switch_session`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Cancelled {
    pub cancelled: bool,
    /// What opening the file repaired (a torn last line cut off), when anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repaired: Option<Repaired>,
}

#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Repaired {
    /// Bytes of a torn last line that were cut off.
    pub dropped_bytes: u64,
    /// A newline was added after a last line that was complete but lacked one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub added_newline: bool,
}

/// `branch`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BranchResult {
    /// The branched user message, for the host's input box.
    pub text: String,
    pub cancelled: bool,
}

/// `get_branch_messages`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BranchMessages {
    pub messages: Vec<BranchMessage>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BranchMessage {
    pub entry_id: String,
    pub text: String,
}

/// `get_last_assistant_text`: `text` absent when there is none.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LastAssistantText {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `set_todos`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TodoPhases<'a> {
    pub todo_phases: &'a [TodoPhase],
}

/// `set_host_tools`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolNames {
    pub tool_names: Vec<String>,
}

/// `set_host_uri_schemes`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Schemes {
    pub schemes: Vec<String>,
}

/// `set_capabilities`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub accepted_capabilities: Vec<Value>,
    pub unsupported: Vec<Value>,
}

/// `cycle_model`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CycledModel {
    pub model: ModelInfo,
    pub thinking_level: &'static str,
    pub is_scoped: bool,
}

/// `cycle_thinking_level`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ThinkingLevel {
    pub level: &'static str,
}

/// `get_available_models`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Models {
    pub models: Vec<ModelInfo>,
    /// Why models.json was skipped, when it was (also in `get_state`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models_error: Option<String>,
}

/// `list_sessions`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Sessions {
    pub sessions: Vec<SessionSummary>,
}

/// One session file, newest first in `list_sessions`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub id: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// The file's modification time, ISO-8601 UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    pub message_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

/// `export_html`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Exported {
    pub path: String,
}

/// `get_login_providers`: the providers gjc can use and whether a key for each is present.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LoginProviders {
    pub providers: Vec<LoginProvider>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LoginProvider {
    pub id: String,
    pub name: String,
    pub available: bool,
    pub authenticated: bool,
}

/// `negotiate_unattended`: the accepted declaration. Keys are snake_case, as the host sent them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct UnattendedAccepted {
    /// The id of the session gjc started with; names the audit trail.
    pub run_id: String,
    pub actor: String,
    /// The four limits as the host wrote them.
    pub budget: serde_json::Map<String, Value>,
    /// Declared scopes, de-duplicated, `prompt` appended when absent.
    pub scopes: Vec<&'static str>,
    /// Declared action classes, de-duplicated, `command.prompt` appended when absent.
    pub action_allowlist: Vec<&'static str>,
    pub accepted_at: String,
}

/// Budget figures by metric: used so far or left.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BudgetFigures {
    #[schemars(with = "f64")]
    pub tokens: Value,
    #[schemars(with = "f64")]
    pub tool_calls: Value,
    #[schemars(with = "f64")]
    pub wall_time_ms: Value,
    #[schemars(with = "f64")]
    pub cost_usd: Value,
}

/// `get_state.unattended`, present once `negotiate_unattended` was accepted.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct UnattendedStatus {
    #[serde(flatten)]
    pub declaration: UnattendedAccepted,
    pub used: BudgetFigures,
    pub left: BudgetFigures,
    /// The breach that stopped charged work (the `budget_exceeded` error object), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exceeded: Option<Value>,
    /// Why the audit trail could not be written, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_error: Option<String>,
}

/// `checkpoint_for_handoff`: the receipt an orchestrator checks before it stops this process and
/// lets another continue the session from `sessionFile`. Exactly these 13 fields.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckpointReceipt {
    /// Always `1`.
    #[schemars(range(min = 1, max = 1))]
    pub protocol_version: u32,
    /// The requested authority, unchanged.
    pub authority: super::command::HandoffAuthority,
    /// The requested lane, unchanged.
    pub lane: super::command::HandoffLane,
    /// Always `true`: nothing was running, queued or waiting when the file was synced.
    pub clean_quiesced: bool,
    /// Always `true`: the session file was written and fsynced before this reply.
    pub transcript_fsynced: bool,
    /// Lower-case hex SHA-256 of the canonical JSON of the completed marker (docs/protocol.md).
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub completed_marker_digest: String,
    /// Lower-case hex SHA-256 of the session file's bytes after the fsync.
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub transcript_digest: String,
    pub session_id: String,
    /// The session file, an absolute path.
    pub session_file: String,
    pub provider: String,
    pub model: String,
    /// The thinking level after clamping to the model (never `inherit`).
    pub thinking: &'static str,
    /// The wire API the model is spoken through (`anthropic-messages`, `openai-completions`, ...).
    pub model_profile: &'static str,
}

/// `handoff`: where the handoff document was saved. The session has continued in a new session
/// whose context starts with the document; `savedPath` is absent with `--no-session`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffResult {
    /// The saved document, an absolute path beside the new session's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_path: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_fields_are_left_out_not_null() {
        let task = TodoTask {
            id: "t".into(),
            content: "c".into(),
            status: "pending".into(),
            notes: None,
            details: None,
        };
        assert_eq!(
            serde_json::to_string(&task).unwrap(),
            r#"{"id":"t","content":"c","status":"pending"}"#
        );
        let text = LastAssistantText { text: None };
        assert_eq!(serde_json::to_string(&text).unwrap(), "{}");
    }
}
