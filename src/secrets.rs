//! API keys kept away from what the model can see. Shell commands do not inherit the variables
//! that hold a provider key (unless `--pass-secrets-to-tools`), and every known key value is
//! replaced by `[redacted]` in command and tool output before it is stored or sent: a model that
//! runs `printenv`, or reads `models.json`, would otherwise put keys into the session file, the
//! export and the next request.
//!
//! The set is fixed at start-up from the catalog (the catalog is loaded once), so it is kept in a
//! write-once global that the bash thread and the tool workers read without locking.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::Value;

use crate::protocol::message::{Content, ToolOutput};
use crate::provider::catalog::Catalog;

/// What replaces a key in output.
pub const REDACTED: &str = "[redacted]";

/// Shorter values are not scrubbed: replacing every `abc` in output would garble it and protect
/// nothing.
const MIN_SECRET_LEN: usize = 8;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Secrets {
    /// Variables removed from every command's environment.
    hidden_env: Vec<String>,
    /// Key values to scrub, longest first (a key that contains another is replaced whole).
    values: Vec<String>,
}

static INSTALLED: OnceLock<Secrets> = OnceLock::new();

impl Secrets {
    /// The keys `catalog` can use. With `pass_to_tools`, commands keep their environment, and
    /// output is still scrubbed.
    pub fn from_catalog(catalog: &Catalog, pass_to_tools: bool) -> Secrets {
        let (vars, values) = catalog.credentials();
        Secrets::new(vars, values, std::env::vars_os(), pass_to_tools)
    }

    fn new(
        key_vars: Vec<String>,
        values: Vec<String>,
        environment: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
        pass_to_tools: bool,
    ) -> Secrets {
        let mut values: Vec<String> = values
            .into_iter()
            .flat_map(|v| [v.trim().to_string(), v])
            .filter(|v| v.len() >= MIN_SECRET_LEN)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        let mut hidden_env = Vec::new();
        if !pass_to_tools {
            hidden_env = key_vars;
            // A key copied into any other variable (a models.json key that is also exported
            // under the name a script expects) goes too.
            for (name, value) in environment {
                let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
                    continue;
                };
                let value = value.trim();
                if !value.is_empty() && values.iter().any(|k| k == value) {
                    hidden_env.push(name.to_string());
                }
            }
            hidden_env.sort();
            hidden_env.dedup();
        }
        Secrets { hidden_env, values }
    }

    /// Makes this the process-wide set; the first call wins (it is made once, at start-up).
    pub fn install(self) {
        let _ = INSTALLED.set(self);
    }

    pub fn hidden_env(&self) -> &[String] {
        &self.hidden_env
    }

    /// `text` with every key replaced; borrowed when there is nothing to replace.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for key in &self.values {
            if out.contains(key.as_str()) {
                out = Cow::Owned(out.replace(key.as_str(), REDACTED));
            }
        }
        out
    }

    fn scrub_in_place(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.scrub(text) {
            *text = clean;
        }
    }

    fn scrub_value(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.scrub_in_place(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.scrub_value(v)),
            _ => {}
        }
    }
}

/// The installed set (empty before start-up installs one, as in unit tests).
pub fn installed() -> &'static Secrets {
    static EMPTY: Secrets = Secrets {
        hidden_env: Vec::new(),
        values: Vec::new(),
    };
    INSTALLED.get().unwrap_or(&EMPTY)
}

/// Scrubs a tool result's text and details before it leaves the tool worker.
pub fn scrub_output(output: &mut ToolOutput) {
    let secrets = installed();
    if secrets.values.is_empty() {
        return;
    }
    for block in &mut output.content {
        if let Content::Text { text, .. } = block {
            secrets.scrub_in_place(text);
        }
    }
    if let Some(details) = &mut output.details {
        secrets.scrub_value(details);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env(pairs: &[(&str, &str)]) -> impl Iterator<Item = (OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn key_variables_and_copies_of_keys_are_hidden_unless_passed() {
        let vars = vec!["OPENAI_API_KEY".to_string()];
        let values = vec!["literal-models-json-key".to_string()];
        let environment = [
            ("COPY", " literal-models-json-key\n"),
            ("PATH", "/usr/bin"),
            ("SHORT", ""),
        ];
        let s = Secrets::new(vars.clone(), values.clone(), env(&environment), false);
        assert_eq!(s.hidden_env(), ["COPY", "OPENAI_API_KEY"]);
        let passed = Secrets::new(vars, values, env(&environment), true);
        assert!(passed.hidden_env().is_empty());
        assert_eq!(passed.scrub("k=literal-models-json-key"), "k=[redacted]");
    }

    #[test]
    fn scrubbing_replaces_whole_keys_and_leaves_short_values() {
        let s = Secrets::new(
            Vec::new(),
            vec!["abcdefgh".into(), "abcdefgh-longer".into(), "short".into()],
            env(&[]),
            false,
        );
        assert_eq!(
            s.scrub("abcdefgh-longer abcdefgh short"),
            "[redacted] [redacted] short"
        );
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
        let mut details = serde_json::json!({"a": ["x abcdefgh"], "n": 1});
        s.scrub_value(&mut details);
        assert_eq!(details, serde_json::json!({"a": ["x [redacted]"], "n": 1}));
    }
}
