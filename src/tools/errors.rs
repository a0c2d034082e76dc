//! Why a tool set could not be built or a call's arguments were refused. The text is what the
//! user (a bad `--tools`) or the model (a tool result) reads.

use std::fmt;

/// A `--tools` name that is no built-in tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    pub name: String,
    /// The built-in tools, in their order.
    pub known: Vec<String>,
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown tool {:?}; built-in tools: {}",
            self.name,
            self.known.join(", ")
        )
    }
}

impl std::error::Error for RegistryError {}

/// Why a call's arguments were refused before the tool ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationError {
    /// No tool of that name is in the set.
    UnknownTool(String),
    /// The arguments break the tool's schema: every violation, `path: message` where the
    /// violation is below the top level.
    Invalid {
        tool: String,
        violations: Vec<String>,
    },
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidationError::UnknownTool(name) => write!(f, "Tool {name} not found"),
            ValidationError::Invalid { tool, violations } => write!(
                f,
                "Invalid arguments for tool {tool}:\n{}",
                violations.join("\n")
            ),
        }
    }
}

impl std::error::Error for ValidationError {}
