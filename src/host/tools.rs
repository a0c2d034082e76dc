//! Host tools, as the broker sees them: definitions validated at `set_host_tools`, and what the
//! broker's events and the host's answers mean to a call (the tool itself is
//! `tools/host_tool.rs`).

use serde_json::Value;

use super::HostEvent;
use crate::protocol::command::HostToolDefinition;
use crate::protocol::host_reply::HostReply;
use crate::protocol::message::ToolOutput;

/// Why a host tool set was refused; `index` is the definition's place in `tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostToolError {
    /// Not 1-64 letters, digits, `_` or `-` (the name as sent).
    BadName {
        index: usize,
        name: String,
    },
    /// The name of a built-in tool (or `ask`).
    Clash {
        index: usize,
        name: String,
    },
    Duplicate {
        index: usize,
        name: String,
    },
    /// `parameters` is not a schema of an object.
    NotObject {
        name: String,
    },
    /// The schema does not compile (the validator's message).
    Schema {
        name: String,
        message: String,
    },
}

impl std::fmt::Display for HostToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostToolError::BadName { index, name } => write!(
                f,
                "tools[{index}]: invalid tool name {name:?} (1-64 letters, digits, _ or -)"
            ),
            HostToolError::Clash { index, name } => write!(
                f,
                "tools[{index}]: host tool {name} clashes with a built-in tool"
            ),
            HostToolError::Duplicate { index, name } => {
                write!(f, "tools[{index}]: duplicate host tool name {name}")
            }
            HostToolError::NotObject { name } => write!(
                f,
                "host tool {name}: parameters must be a JSON Schema object with type \"object\""
            ),
            HostToolError::Schema { name, message } => {
                write!(f, "host tool {name}: invalid parameters schema: {message}")
            }
        }
    }
}

impl std::error::Error for HostToolError {}

/// Validates a host tool set: names unique, not a built-in (nor `ask`), schemas that compile.
pub fn validate(
    defs: &[HostToolDefinition],
    builtin: &[&str],
) -> Result<Vec<(HostToolDefinition, jsonschema::Validator)>, HostToolError> {
    let mut out: Vec<(HostToolDefinition, jsonschema::Validator)> = Vec::new();
    for (i, d) in defs.iter().enumerate() {
        let name = d.name.trim().to_string();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(HostToolError::BadName {
                index: i,
                name: d.name.clone(),
            });
        }
        if builtin.contains(&name.as_str()) || name == "ask" {
            return Err(HostToolError::Clash { index: i, name });
        }
        if out.iter().any(|(o, _)| o.name == name) {
            return Err(HostToolError::Duplicate { index: i, name });
        }
        if !d.parameters.is_object()
            || d.parameters
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t != "object")
        {
            return Err(HostToolError::NotObject { name });
        }
        let schema = |e: &dyn std::fmt::Display| HostToolError::Schema {
            name: name.clone(),
            message: e.to_string(),
        };
        if let Err(e) = jsonschema::meta::validate(&d.parameters) {
            return Err(schema(&e));
        }
        let validator = jsonschema::validator_for(&d.parameters).map_err(|e| schema(&e))?;
        out.push((HostToolDefinition { name, ..d.clone() }, validator));
    }
    Ok(out)
}

/// What a broker event means to a host tool call.
pub enum Step {
    Update(ToolOutput),
    /// The call's output: the host's result, or the reason none will come.
    Done(ToolOutput),
    Other,
}

pub fn step(event: HostEvent) -> Step {
    match event {
        HostEvent::ToolUpdate { partial, .. } => Step::Update(partial),
        HostEvent::ToolResult {
            mut result,
            is_error,
            ..
        } => {
            result.is_error |= is_error;
            Step::Done(result)
        }
        HostEvent::Rejected { reason, .. } => Step::Done(ToolOutput::error(reason)),
        _ => Step::Other,
    }
}

/// What a host tool answer means to the call it names.
pub fn answer(reply: HostReply) -> Step {
    match reply {
        HostReply::ToolUpdate(u) => Step::Update(u.partial_result),
        HostReply::ToolResult(r) => step(HostEvent::ToolResult {
            id: r.id,
            result: r.result,
            is_error: r.is_error,
        }),
        HostReply::UriResult(_) | HostReply::UiResponse(_) => Step::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(name: &str, parameters: Value) -> HostToolDefinition {
        HostToolDefinition {
            name: name.into(),
            label: None,
            description: String::new(),
            parameters,
        }
    }

    /// Each refusal names the definition it is about, and the set is refused whole.
    #[test]
    fn a_bad_tool_set_is_refused_for_what_it_is() {
        let object = json!({"type": "object"});
        let check = |defs: &[HostToolDefinition]| validate(defs, &["read"]).err();
        assert_eq!(
            check(&[def("a b", object.clone())]),
            Some(HostToolError::BadName {
                index: 0,
                name: "a b".into()
            })
        );
        assert_eq!(
            check(&[def("ok", object.clone()), def("read", object.clone())]),
            Some(HostToolError::Clash {
                index: 1,
                name: "read".into()
            })
        );
        let twice = check(&[def("x", object.clone()), def(" x ", object.clone())]).unwrap();
        assert_eq!(twice.to_string(), "tools[1]: duplicate host tool name x");
        assert!(matches!(
            check(&[def("x", json!({"type": "string"}))]),
            Some(HostToolError::NotObject { .. })
        ));
        let bad = check(&[def("x", json!({"type": "object", "minProperties": "two"}))]).unwrap();
        assert!(
            matches!(&bad, HostToolError::Schema { name, .. } if name == "x"),
            "{bad:?}"
        );
        assert!(bad
            .to_string()
            .starts_with("host tool x: invalid parameters schema: "));
        assert_eq!(validate(&[def("x", object)], &["read"]).unwrap().len(), 1);
    }
}
