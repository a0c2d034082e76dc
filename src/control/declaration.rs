//! `negotiate_unattended`'s declaration, validated in the reference's order with its codes and
//! messages: shape first (actor, scopes, allowlist, known names), then the budget, then whether
//! the provider can report what the budget measures.

use serde_json::{Map, Value};

use super::classify::ActionClass;
use super::scope::Scope;

/// The four budget metrics, in validation order.
pub const BUDGET_FIELDS: [&str; 4] = [
    "max_tokens",
    "max_tool_calls",
    "max_wall_time_ms",
    "max_cost_usd",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub max_tokens: f64,
    pub max_tool_calls: f64,
    pub max_wall_time_ms: f64,
    pub max_cost_usd: f64,
    /// The four fields as the host wrote them, echoed back unchanged.
    pub as_sent: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    pub actor: String,
    pub budget: Budget,
    /// De-duplicated, in declared order, `prompt` appended when absent.
    pub scopes: Vec<Scope>,
    /// De-duplicated, in declared order, `command.prompt` appended when absent.
    pub action_allowlist: Vec<ActionClass>,
}

/// A refused declaration: `code: message` on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn refuse(code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

const INVALID: &str = "invalid_unattended_declaration";
const INCOMPLETE: &str = "incomplete_budget";

/// Validates a declaration. `usage_capable`: whether the startup model reports token usage and
/// cost while streaming.
pub fn validate(declaration: Option<&Value>, usage_capable: bool) -> Result<Declaration, Refusal> {
    let Some(Value::Object(d)) = declaration else {
        return Err(refuse(INVALID, "declaration is required"));
    };
    let actor = match d.get("actor") {
        Some(Value::String(a)) if !a.trim().is_empty() => a.clone(),
        _ => return Err(refuse(INVALID, "declaration.actor is required")),
    };
    let scopes = string_array(d, "scopes")?;
    let allowlist = string_array(d, "action_allowlist")?;
    let scopes = known(&scopes, Scope::parse, Scope::Prompt, "scopes", "scope(s)")?;
    let action_allowlist = known(
        &allowlist,
        ActionClass::parse,
        ActionClass::CommandPrompt,
        "action_allowlist",
        "action class(es)",
    )?;
    let budget = budget(d.get("budget"))?;
    if !usage_capable {
        return Err(refuse(
            "unsupported_budget_metric",
            "unattended mode requires an explicit provider token/cost accounting capability",
        ));
    }
    Ok(Declaration {
        actor,
        budget,
        scopes,
        action_allowlist,
    })
}

fn string_array(d: &Map<String, Value>, field: &str) -> Result<Vec<String>, Refusal> {
    let refusal = || refuse(INVALID, format!("declaration.{field} must be string[]"));
    let Some(Value::Array(items)) = d.get(field) else {
        return Err(refusal());
    };
    items
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(refusal))
        .collect()
}

/// Parses every name, refusing the unknown ones together; de-duplicates in order and appends the
/// mandatory `floor`.
fn known<T: PartialEq + Copy>(
    names: &[String],
    parse: impl Fn(&str) -> Option<T>,
    floor: T,
    field: &str,
    what: &str,
) -> Result<Vec<T>, Refusal> {
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| parse(n).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(refuse(
            INVALID,
            format!(
                "declaration.{field} contains unknown {what}: {}",
                unknown.join(", ")
            ),
        ));
    }
    let mut out: Vec<T> = Vec::new();
    for v in names.iter().filter_map(|n| parse(n)) {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if !out.contains(&floor) {
        out.push(floor);
    }
    Ok(out)
}

fn budget(value: Option<&Value>) -> Result<Budget, Refusal> {
    let Some(Value::Object(b)) = value else {
        return Err(refuse(
            INCOMPLETE,
            "budget declaration is required for unattended mode",
        ));
    };
    let mut limits = [0.0; 4];
    let mut as_sent = Map::new();
    for (i, field) in BUDGET_FIELDS.iter().enumerate() {
        let n = b.get(*field).and_then(Value::as_f64);
        match n {
            Some(n) if n.is_finite() && n > 0.0 => limits[i] = n,
            _ => {
                return Err(refuse(
                    INCOMPLETE,
                    format!("budget.{field} must be a positive finite number"),
                ))
            }
        }
        as_sent.insert(field.to_string(), b[*field].clone());
    }
    Ok(Budget {
        max_tokens: limits[0],
        max_tool_calls: limits[1],
        max_wall_time_ms: limits[2],
        max_cost_usd: limits[3],
        as_sent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full() -> Value {
        json!({
            "actor": "ci/bot",
            "budget": {"max_tokens": 1000, "max_tool_calls": 5, "max_wall_time_ms": 60000, "max_cost_usd": 0.5},
            "scopes": ["control", "bash", "control"],
            "action_allowlist": ["bash.readonly", "command.control"]
        })
    }

    fn refusal(mut edit: impl FnMut(&mut Value), usage: bool) -> Refusal {
        let mut d = full();
        edit(&mut d);
        validate(Some(&d), usage).unwrap_err()
    }

    #[test]
    fn accepts_and_appends_the_prompt_floor() {
        let d = validate(Some(&full()), true).unwrap();
        assert_eq!(d.actor, "ci/bot");
        let scopes: Vec<&str> = d.scopes.iter().map(|s| s.as_str()).collect();
        assert_eq!(scopes, ["control", "bash", "prompt"]);
        let allow: Vec<&str> = d.action_allowlist.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            allow,
            ["bash.readonly", "command.control", "command.prompt"]
        );
        assert_eq!(d.budget.max_cost_usd, 0.5);
        assert_eq!(d.budget.as_sent["max_tokens"], json!(1000));
    }

    #[test]
    fn refusals_in_order() {
        let r = validate(None, true).unwrap_err();
        assert_eq!(
            (r.code, r.message.as_str()),
            (INVALID, "declaration is required")
        );
        let r = validate(Some(&json!([1])), true).unwrap_err();
        assert_eq!(r.message, "declaration is required");
        let r = refusal(|d| d["actor"] = json!("  "), true);
        assert_eq!(r.message, "declaration.actor is required");
        // Shape comes before the budget: a missing budget and a bad scope list report the scopes.
        let r = refusal(
            |d| {
                d["scopes"] = json!("bash");
                d.as_object_mut().unwrap().remove("budget");
            },
            true,
        );
        assert_eq!(r.message, "declaration.scopes must be string[]");
        let r = refusal(|d| d["action_allowlist"] = json!([1]), true);
        assert_eq!(r.message, "declaration.action_allowlist must be string[]");
        let r = refusal(|d| d["scopes"] = json!(["bash", "nope", "x"]), true);
        assert_eq!(
            r.message,
            "declaration.scopes contains unknown scope(s): nope, x"
        );
        let r = refusal(|d| d["action_allowlist"] = json!(["bash.everything"]), true);
        assert_eq!(
            r.message,
            "declaration.action_allowlist contains unknown action class(es): bash.everything"
        );
        let r = refusal(|d| d["budget"] = json!(null), true);
        assert_eq!(
            (r.code, r.message.as_str()),
            (
                INCOMPLETE,
                "budget declaration is required for unattended mode"
            )
        );
        let r = refusal(|d| d["budget"]["max_tool_calls"] = json!(0), true);
        assert_eq!(
            r.message,
            "budget.max_tool_calls must be a positive finite number"
        );
        let r = refusal(
            |d| {
                d["budget"]["max_cost_usd"] = json!("1");
                d["budget"]["max_tokens"] = json!(-1);
            },
            true,
        );
        assert_eq!(
            r.message,
            "budget.max_tokens must be a positive finite number"
        );
        let r = refusal(|_| {}, false);
        assert_eq!(r.code, "unsupported_budget_metric");
        // The capability is checked last: a bad budget is reported first.
        let r = refusal(|d| d["budget"]["max_wall_time_ms"] = json!(null), false);
        assert_eq!(r.code, INCOMPLETE);
    }
}
