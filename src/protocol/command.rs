//! Every inbound command of the seed, typed. The `commands!` table below is the single list of
//! command names: it generates the `Command` enum, its decoder and `Command::NAMES`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::message::ImageContent;

macro_rules! commands {
    ($($variant:ident = $name:literal => $params:ty),* $(,)?) => {
        /// One decoded command. The `id` travels beside it (see `decode.rs`).
        /// Its schema is the `type`-tagged union the decoder accepts (docs/schema/commands.json).
        #[derive(Debug, Clone, schemars::JsonSchema)]
        #[schemars(tag = "type")]
        pub enum Command {
            $(#[schemars(rename = $name)] $variant($params),)*
        }

        impl Command {
            /// Every command type this build understands, in table order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The wire name, as echoed in `response.command`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Command::$variant(_) => $name,)*
                }
            }

            /// Decodes the fields of a command whose `type` is `name` from any deserializer (a
            /// `Value`, or the line's fields borrowed in place). `None` for an unknown type.
            pub fn decode<'de, D: Deserializer<'de>>(
                name: &str,
                fields: D,
            ) -> Option<Result<Command, String>> {
                match name {
                    $($name => Some(decode_params::<$params, D>(fields).map(Command::$variant)),)*
                    _ => None,
                }
            }
        }

        /// The command as a host writes it: `{"type": name, ...fields}` (no `id`).
        impl Serialize for Command {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Command::$variant(params) => Tagged { kind: $name, params }.serialize(s),)*
                }
            }
        }
    };
}

#[derive(Serialize)]
struct Tagged<'a, P> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    params: &'a P,
}

fn decode_params<'de, T: Deserialize<'de>, D: Deserializer<'de>>(fields: D) -> Result<T, String> {
    serde_path_to_error::deserialize(fields).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path.is_empty() {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        }
    })
}

commands! {
    Prompt = "prompt" => PromptParams,
    Steer = "steer" => MessageParams,
    FollowUp = "follow_up" => MessageParams,
    Abort = "abort" => NoParams,
    AbortAndPrompt = "abort_and_prompt" => MessageParams,
    NewSession = "new_session" => NewSessionParams,
    GetState = "get_state" => GetStateParams,
    SetTodos = "set_todos" => SetTodosParams,
    SetHostTools = "set_host_tools" => SetHostToolsParams,
    SetHostUriSchemes = "set_host_uri_schemes" => SetHostUriSchemesParams,
    WorkflowGateResponse = "workflow_gate_response" => WorkflowGateResponseParams,
    GetPendingWorkflowGates = "get_pending_workflow_gates" => NoParams,
    NegotiateUnattended = "negotiate_unattended" => NegotiateUnattendedParams,
    SetCapabilities = "set_capabilities" => SetCapabilitiesParams,
    SetSandbox = "set_sandbox" => super::sandbox::SetSandboxParams,
    SetModel = "set_model" => SetModelParams,
    CycleModel = "cycle_model" => NoParams,
    GetAvailableModels = "get_available_models" => NoParams,
    SetThinkingLevel = "set_thinking_level" => SetThinkingLevelParams,
    CycleThinkingLevel = "cycle_thinking_level" => NoParams,
    SetSteeringMode = "set_steering_mode" => ModeParams,
    SetFollowUpMode = "set_follow_up_mode" => ModeParams,
    SetInterruptMode = "set_interrupt_mode" => ModeParams,
    Compact = "compact" => CompactParams,
    SetAutoCompaction = "set_auto_compaction" => EnabledParams,
    SetAutoRetry = "set_auto_retry" => EnabledParams,
    AbortRetry = "abort_retry" => NoParams,
    Bash = "bash" => BashParams,
    AbortBash = "abort_bash" => NoParams,
    GetSessionStats = "get_session_stats" => NoParams,
    ExportHtml = "export_html" => ExportHtmlParams,
    SwitchSession = "switch_session" => SwitchSessionParams,
    Branch = "branch" => BranchParams,
    GetBranchMessages = "get_branch_messages" => NoParams,
    GetLastAssistantText = "get_last_assistant_text" => NoParams,
    SetSessionName = "set_session_name" => SetSessionNameParams,
    GetMessages = "get_messages" => NoParams,
    ListSessions = "list_sessions" => ListSessionsParams,
    Handoff = "handoff" => CompactParams,
    GetLoginProviders = "get_login_providers" => NoParams,
    Login = "login" => LoginParams,
    CheckpointForHandoff = "checkpoint_for_handoff" => CheckpointParams,
    TrustProject = "trust_project" => TrustProjectParams,
    ListMcpServers = "list_mcp_servers" => NoParams,
    AddMcpServer = "add_mcp_server" => super::mcp::AddMcpServerParams,
    RemoveMcpServer = "remove_mcp_server" => super::mcp::McpServerNameParams,
    RestartMcpServer = "restart_mcp_server" => super::mcp::McpServerNameParams,
}

impl Command {
    /// Cancellations take the control lane: they overtake every queued command (see docs/protocol.md).
    pub fn is_control(&self) -> bool {
        matches!(
            self,
            Command::Abort(_) | Command::AbortBash(_) | Command::AbortRetry(_)
        )
    }
}

/// Commands without fields. Unknown fields are ignored everywhere, for forward compatibility.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct NoParams {}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptParams {
    pub message: String,
    #[serde(default)]
    pub images: Vec<ImageContent>,
    #[serde(default)]
    pub streaming_behavior: Option<StreamingBehavior>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
pub enum StreamingBehavior {
    #[serde(rename = "steer")]
    Steer,
    #[serde(rename = "followUp")]
    FollowUp,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct MessageParams {
    pub message: String,
    #[serde(default)]
    pub images: Vec<ImageContent>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionParams {
    #[serde(default)]
    pub parent_session: Option<String>,
    /// The folder the new session works in (absolute); by default the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct GetStateParams {
    #[serde(default)]
    pub include: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SetTodosParams {
    pub phases: Vec<Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SetHostToolsParams {
    pub tools: Vec<HostToolDefinition>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct HostToolDefinition {
    pub name: String,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SetHostUriSchemesParams {
    pub schemes: Vec<HostUriSchemeDefinition>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct HostUriSchemeDefinition {
    pub scheme: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub writable: bool,
    #[serde(default)]
    pub immutable: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct WorkflowGateResponseParams {
    pub gate_id: String,
    /// Absent means null (the published client leaves a null answer out).
    #[serde(default)]
    pub answer: Value,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct NegotiateUnattendedParams {
    #[serde(default)]
    pub declaration: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SetCapabilitiesParams {
    #[serde(default)]
    pub capabilities: Value,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetModelParams {
    pub provider: String,
    pub model_id: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SetThinkingLevelParams {
    pub level: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ModeParams {
    pub mode: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactParams {
    #[serde(default)]
    pub custom_instructions: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct EnabledParams {
    pub enabled: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct BashParams {
    pub command: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportHtmlParams {
    #[serde(default)]
    pub output_path: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SwitchSessionParams {
    pub session_path: String,
    /// The folder the session works in from now on (absolute); by default the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BranchParams {
    pub entry_id: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SetSessionNameParams {
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ListSessionsParams {
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoginParams {
    pub provider_id: String,
}

/// `checkpoint_for_handoff`: the lease the host holds and the lane to hand over. Both are echoed
/// in the receipt and hashed into its completed marker.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct CheckpointParams {
    pub authority: HandoffAuthority,
    pub lane: HandoffLane,
}

/// The orchestrator's lease. Exactly these four fields: the receipt must echo it unchanged, so a
/// field gjc would drop is refused rather than ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffAuthority {
    /// 64 lower-case hex digits.
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub incarnation_digest: String,
    /// A positive integer, at most 2^53 - 1 (what every JSON reader holds exactly); so are the
    /// other two.
    #[schemars(range(min = 1, max = 9_007_199_254_740_991u64))]
    pub epoch_revision: u64,
    /// A positive integer, at most 2^53 - 1.
    #[schemars(range(min = 1, max = 9_007_199_254_740_991u64))]
    pub lease_id: u64,
    /// A positive integer, at most 2^53 - 1.
    #[schemars(range(min = 1, max = 9_007_199_254_740_991u64))]
    pub deployment_generation: u64,
}

/// Which lane of the orchestrator the session moves in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
pub enum HandoffLane {
    #[serde(rename = "main")]
    Main,
    #[serde(rename = "self")]
    Own,
}

impl HandoffLane {
    pub fn as_str(self) -> &'static str {
        match self {
            HandoffLane::Main => "main",
            HandoffLane::Own => "self",
        }
    }
}

/// `trust_project`: whether a project's own files may run programs (its `.gjc/hooks.json`).
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct TrustProjectParams {
    /// The project folder (absolute); by default the session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `false` revokes the trust (and is remembered as a refusal).
    #[serde(default = "yes")]
    pub trusted: bool,
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_prompt_with_streaming_behavior() {
        let cmd = Command::decode(
            "prompt",
            json!({"type":"prompt","message":"hi","streamingBehavior":"followUp","extra":1}),
        )
        .unwrap()
        .unwrap();
        match cmd {
            Command::Prompt(p) => {
                assert_eq!(p.message, "hi");
                assert_eq!(p.streaming_behavior, Some(StreamingBehavior::FollowUp));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn wrong_type_names_the_field() {
        let err = Command::decode("prompt", json!({"message": 5}))
            .unwrap()
            .unwrap_err();
        assert!(
            err.starts_with("message: invalid type: integer `5`"),
            "{err}"
        );
        let err = Command::decode("set_model", json!({"provider":"a"}))
            .unwrap()
            .unwrap_err();
        assert!(err.contains("missing field `modelId`"), "{err}");
    }

    #[test]
    fn commands_serialize_as_the_decoder_reads_them() {
        let sent = Command::SetModel(SetModelParams {
            provider: "openai".into(),
            model_id: "gpt".into(),
        });
        let wire = serde_json::to_value(&sent).unwrap();
        assert_eq!(
            wire,
            json!({"type": "set_model", "provider": "openai", "modelId": "gpt"})
        );
        match Command::decode("set_model", wire).unwrap().unwrap() {
            Command::SetModel(p) => assert_eq!(
                (p.provider.as_str(), p.model_id.as_str()),
                ("openai", "gpt")
            ),
            other => panic!("{other:?}"),
        }
        let abort = serde_json::to_value(Command::Abort(NoParams {})).unwrap();
        assert_eq!(abort, json!({"type": "abort"}));
    }

    #[test]
    fn unknown_type_is_none_and_names_are_unique() {
        assert!(Command::decode("nope", json!({})).is_none());
        let mut names = Command::NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Command::NAMES.len());
    }
}
