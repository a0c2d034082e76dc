//! MCP server state on the RPC wire: in `get_state.mcpServers`, the `mcp_server_state` event and
//! the answers of the MCP server commands (docs/mcp.md, docs/protocol.md).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What every MCP tool's name starts with, as the model and the host see it
/// (`mcp__<server>__<tool>`): policies that treat MCP tools as their own class match on it.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

/// One server of the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    pub name: String,
    /// `starting`, `ready`, `failed` or `stopped`.
    pub state: String,
    /// With `ready`: how many tools it offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<usize>,
    /// With `failed`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `list_mcp_servers` (and the other MCP server commands): every server of the session.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct McpServers {
    pub servers: Vec<McpServerStatus>,
}

/// `add_mcp_server`: a server as an `mcp.json` entry (`command`, `args`, `env`, `cwd`, ...).
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct AddMcpServerParams {
    pub name: String,
    pub config: Value,
}

/// `remove_mcp_server` and `restart_mcp_server`.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct McpServerNameParams {
    pub name: String,
}
