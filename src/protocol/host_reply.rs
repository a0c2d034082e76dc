//! Inbound replies to callbacks the agent made: host tool updates and results, host URI results and
//! extension UI responses. They produce no response frame; `gjc-host` routes them by `id`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::message::ToolOutput;

/// Serialized as the frame a host writes (`{"type": "host_tool_result", "id": ..., ...}`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum HostReply {
    #[serde(rename = "extension_ui_response")]
    UiResponse(UiResponse),
    #[serde(rename = "host_tool_update")]
    ToolUpdate(HostToolUpdate),
    #[serde(rename = "host_tool_result")]
    ToolResult(HostToolResult),
    #[serde(rename = "host_uri_result")]
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
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UiResponse {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = null))]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = null))]
    pub confirmed: Option<bool>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub cancelled: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub timed_out: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostToolUpdate {
    pub id: String,
    pub partial_result: ToolOutput,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostToolResult {
    pub id: String,
    pub result: ToolOutput,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub is_error: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostUriResult {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = null))]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = null))]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("default" = []))]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub immutable: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = null))]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_serialize_as_the_decoder_reads_them() {
        let reply = HostReply::ToolResult(HostToolResult {
            id: "h1".into(),
            result: ToolOutput::text("done"),
            is_error: false,
        });
        let wire = serde_json::to_value(&reply).unwrap();
        assert_eq!(
            wire,
            serde_json::json!({"type": "host_tool_result", "id": "h1",
                "result": {"content": [{"type": "text", "text": "done"}]}})
        );
        match HostReply::decode("host_tool_result", wire)
            .unwrap()
            .unwrap()
        {
            HostReply::ToolResult(r) => assert_eq!(r.result, ToolOutput::text("done")),
            other => panic!("{other:?}"),
        }
    }
}
