//! The names MCP tools reach the model under: `mcp__<server>__<tool>`, every other character
//! than `[A-Za-z0-9_-]` made `_`, at most 64 characters (the limit of the OpenAI and Anthropic
//! APIs), unique in the session. A name that had to be shortened or that collides ends in `_`
//! and 8 hex digits of a hash of the full name, so it stays the same from one listing to the next.

use sha2::{Digest, Sha256};

pub use crate::protocol::mcp::MCP_TOOL_PREFIX as PREFIX;
const MAX_LEN: usize = 64;

fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn hashed(full: &str, base: &str) -> String {
    let digest = Sha256::digest(full.as_bytes());
    let tag: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let keep = MAX_LEN - tag.len() - 1;
    let mut cut = base.to_string();
    cut.truncate(keep);
    format!("{cut}_{tag}")
}

/// The model-facing name of `tool` of `server`, not one of `taken`.
pub fn model_name(server: &str, tool: &str, taken: &[String]) -> String {
    let full = format!("{PREFIX}{server}__{tool}");
    let base = format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool));
    if base.len() <= MAX_LEN && !taken.contains(&base) {
        return base;
    }
    let mut name = hashed(&full, &base);
    let mut salt = 0u32;
    while taken.contains(&name) {
        salt += 1;
        name = hashed(&format!("{full}#{salt}"), &base);
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_bounded_and_unique() {
        assert_eq!(
            model_name("everything", "get-sum", &[]),
            "mcp__everything__get-sum"
        );
        assert_eq!(model_name("a.b", "x.y z", &[]), "mcp__a_b__x_y_z");
        let long = model_name("s", &"t".repeat(100), &[]);
        assert_eq!(long.len(), 64);
        assert_eq!(long, model_name("s", &"t".repeat(100), &[]));
        let taken = vec!["mcp__a_b__x".to_string()];
        let other = model_name("a.b", "x", &taken);
        assert!(other != taken[0] && other.len() <= 64, "{other}");
        assert!(other
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
