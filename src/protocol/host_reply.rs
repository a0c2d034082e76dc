//! Inbound replies to callbacks the agent made: host tool updates and results, host URI results and
//! extension UI responses. They produce no response frame; `gjc-host` routes them by `id`.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::message::ToolOutput;

#[derive(Debug, Clone)]
pub enum HostReply {
    UiResponse(UiResponse),
    ToolUpdate(HostToolUpdate),
    ToolResult(HostToolResult),
    UriResult(HostUriResult),
}

impl HostReply {
    /// The frame types routed here, never to the command queue.
    pub const NAMES: &'static [&'static str] = &[
        "extension_ui_response",
        "host_tool_update",
        "host_tool_result",
        "host_uri_result",
    ];

    /// Decodes a reply whose `type` is `name` from any deserializer. `None` for another type.
    pub fn decode<'de, D: Deserializer<'de>>(
        name: &str,
        fields: D,
    ) -> Option<Result<HostReply, String>> {
        let decoded = match name {
            "extension_ui_response" => decode(fields).map(HostReply::UiResponse),
            "host_tool_update" => decode(fields).map(HostReply::ToolUpdate),
            "host_tool_result" => decode(fields).map(HostReply::ToolResult),
            "host_uri_result" => decode(fields).map(HostReply::UriResult),
            _ => return None,
        };
        Some(decoded)
    }

    pub fn id(&self) -> &str {
        match self {
            HostReply::UiResponse(r) => &r.id,
            HostReply::ToolUpdate(r) => &r.id,
            HostReply::ToolResult(r) => &r.id,
            HostReply::UriResult(r) => &r.id,
        }
    }
}

fn decode<'de, T: Deserialize<'de>, D: Deserializer<'de>>(fields: D) -> Result<T, String> {
    serde_path_to_error::deserialize(fields).map_err(|err| {
        let path = err.path().to_string();
        format!("{path}: {}", err.into_inner())
    })
}

/// `{id, value}`, `{id, confirmed}` or `{id, cancelled, timedOut?}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UiResponse {
    pub id: String,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub confirmed: Option<bool>,
    #[serde(default)]
    pub cancelled: bool,
    #[serde(default)]
    pub timed_out: bool,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostToolUpdate {
    pub id: String,
    pub partial_result: ToolOutput,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostToolResult {
    pub id: String,
    pub result: ToolOutput,
    #[serde(default)]
    pub is_error: bool,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostUriResult {
    pub id: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default)]
    pub immutable: bool,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default)]
    pub error: Option<String>,
}
