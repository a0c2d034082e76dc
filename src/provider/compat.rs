//! The `compat` settings of models.json: the request quirks of OpenAI-compatible servers that gjc
//! adjusts to. Only the keys below are honoured, and only for `openai-completions`; any other key
//! (or a key for another API) is an error when models.json is loaded, never silently ignored.

use serde_json::{Map, Value};

use super::catalog::{Api, Model};

/// The keys gjc honours for `openai-completions`, with the values each accepts.
const CHAT_KEYS: &[(&str, Kind)] = &[
    ("supportsDeveloperRole", Kind::Bool),
    ("supportsReasoningEffort", Kind::Bool),
    ("supportsStore", Kind::Bool),
    ("supportsUsageInStreaming", Kind::Bool),
    (
        "maxTokensField",
        Kind::OneOf(&["max_tokens", "max_completion_tokens"]),
    ),
];

#[derive(Clone, Copy)]
enum Kind {
    Bool,
    OneOf(&'static [&'static str]),
}

/// Checks a `compat` object against what gjc honours for `api`.
pub fn validate(api: Api, compat: &Value) -> Result<(), String> {
    let Some(object) = compat.as_object() else {
        return Err("compat must be an object".into());
    };
    for (key, value) in object {
        if api != Api::OpenAiCompletions {
            return Err(format!(
                "compat.{key} is not supported for api {} (gjc honours compat only for openai-completions)",
                api.as_str()
            ));
        }
        let Some((_, kind)) = CHAT_KEYS.iter().find(|(k, _)| k == key) else {
            return Err(format!(
                "compat.{key} is not supported (gjc honours {})",
                CHAT_KEYS
                    .iter()
                    .map(|(k, _)| *k)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        check_value(key, *kind, value)?;
    }
    Ok(())
}

fn check_value(key: &str, kind: Kind, value: &Value) -> Result<(), String> {
    match kind {
        Kind::Bool if value.is_boolean() => Ok(()),
        Kind::Bool => Err(format!("compat.{key} must be true or false")),
        Kind::OneOf(allowed) if value.as_str().is_some_and(|v| allowed.contains(&v)) => Ok(()),
        Kind::OneOf(allowed) => Err(format!(
            "compat.{key} must be one of {}",
            allowed.join(", ")
        )),
    }
}

/// A model's own `compat` keys over its provider's.
pub fn merged(base: Option<&Value>, own: Value) -> Value {
    let mut out: Map<String, Value> = base.and_then(Value::as_object).cloned().unwrap_or_default();
    if let Value::Object(own) = own {
        out.extend(own);
    }
    Value::Object(out)
}

/// How an `openai-completions` request is shaped for a model. Without `compat`, OpenAI itself
/// gets its own conventions and every other server the most widely understood ones.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatCompat {
    /// `developer` instead of `system` for the system prompt of reasoning models.
    pub developer_role: bool,
    pub reasoning_effort: bool,
    /// `store: false` is sent.
    pub store: bool,
    /// `stream_options.include_usage` is sent.
    pub usage_in_streaming: bool,
    pub max_tokens_field: &'static str,
}

impl ChatCompat {
    pub fn of(model: &Model) -> ChatCompat {
        let is_openai = model.provider == "openai";
        let flag = |key: &str, default: bool| {
            model
                .compat
                .as_ref()
                .and_then(|c| c.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        let max_tokens_field = match model
            .compat
            .as_ref()
            .and_then(|c| c.get("maxTokensField"))
            .and_then(Value::as_str)
        {
            Some("max_tokens") => "max_tokens",
            Some(_) => "max_completion_tokens",
            None if is_openai => "max_completion_tokens",
            None => "max_tokens",
        };
        ChatCompat {
            developer_role: flag("supportsDeveloperRole", is_openai),
            reasoning_effort: flag("supportsReasoningEffort", true),
            store: flag("supportsStore", is_openai),
            usage_in_streaming: flag("supportsUsageInStreaming", true),
            max_tokens_field,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_keys_pass_and_others_are_named() {
        let ok = json!({"supportsDeveloperRole": false, "maxTokensField": "max_tokens"});
        assert!(validate(Api::OpenAiCompletions, &ok).is_ok());
        let e = validate(Api::OpenAiCompletions, &json!({"thinkingFormat": "qwen"})).unwrap_err();
        assert!(e.contains("compat.thinkingFormat is not supported"), "{e}");
        let e = validate(Api::OpenAiCompletions, &json!({"supportsStore": "no"})).unwrap_err();
        assert!(e.contains("true or false"), "{e}");
        let e = validate(Api::OpenAiCompletions, &json!({"maxTokensField": "n"})).unwrap_err();
        assert!(
            e.contains("one of max_tokens, max_completion_tokens"),
            "{e}"
        );
        let e = validate(Api::AnthropicMessages, &json!({"supportsStore": true})).unwrap_err();
        assert!(e.contains("api anthropic-messages"), "{e}");
        assert!(validate(Api::OpenAiCompletions, &json!([])).is_err());
    }

    #[test]
    fn model_keys_override_provider_keys() {
        let m = merged(
            Some(&json!({"supportsStore": true, "supportsDeveloperRole": false})),
            json!({"supportsStore": false}),
        );
        assert_eq!(
            m,
            json!({"supportsStore": false, "supportsDeveloperRole": false})
        );
    }
}
