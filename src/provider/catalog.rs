//! The model registry: built-in models of each provider, the user's `models.json`, API keys from
//! the environment, and thinking levels clamped to what a model supports.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The wire APIs gjc speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Api {
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "google-generative-ai")]
    Google,
    /// The deterministic replay provider (`--provider scripted --script FILE`).
    #[serde(rename = "scripted")]
    Scripted,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenAiCompletions => "openai-completions",
            Api::OpenAiResponses => "openai-responses",
            Api::Google => "google-generative-ai",
            Api::Scripted => "scripted",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

/// A model as hosts see it (`get_state.model`, `get_available_models`). Headers and keys are
/// never echoed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub id: String,
    pub name: String,
    pub api: Api,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    pub input: Vec<String>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    /// Whether the model accepts the `xhigh` thinking level.
    #[serde(skip)]
    pub xhigh: bool,
    #[serde(skip)]
    pub headers: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compat: Option<Value>,
}

impl Model {
    /// The model as hosts see it.
    pub fn info(&self) -> crate::protocol::reply::ModelInfo {
        use crate::protocol::reply::{ModelCostInfo, ModelInfo, ThinkingRange};
        ModelInfo {
            id: self.id.clone(),
            name: self.name.clone(),
            api: self.api.as_str(),
            provider: self.provider.clone(),
            base_url: self.base_url.clone(),
            reasoning: self.reasoning,
            input: self.input.clone(),
            cost: ModelCostInfo {
                input: self.cost.input,
                output: self.cost.output,
                cache_read: self.cost.cache_read,
                cache_write: self.cost.cache_write,
            },
            context_window: self.context_window,
            max_tokens: self.max_tokens,
            thinking: self.reasoning.then_some(ThinkingRange {
                min_level: "minimal",
                max_level: if self.xhigh { "xhigh" } else { "high" },
                mode: "effort",
            }),
            compat: self.compat.clone(),
        }
    }
}

/// Where a provider's API key comes from.
#[derive(Debug, Clone, PartialEq)]
enum KeySource {
    /// An environment variable name.
    Env(String),
    Literal(String),
    /// Local servers and the scripted provider need no key.
    None,
}

#[derive(Debug, Clone)]
pub struct Catalog {
    models: Vec<Model>,
    keys: BTreeMap<String, KeySource>,
}

/// The levels gjc itself applies.
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// Every level hosts may send: gjc's own plus `inherit` (no level of its own: off) and `max`
/// (the highest the model accepts).
pub const WIRE_THINKING_LEVELS: &[&str] = &[
    "inherit", "off", "minimal", "low", "medium", "high", "xhigh", "max",
];

impl Catalog {
    /// The built-in models plus `<agent_dir>/models.json` when it exists. A broken models.json is
    /// reported and skipped: the built-in models still work.
    pub fn load(agent_dir: &Path) -> Catalog {
        let mut catalog = Catalog::builtin();
        let path = agent_dir.join("models.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                if let Err(e) = catalog.merge_models_json(&text) {
                    log::error!("ignoring {}: {e}", path.display());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::error!("cannot read {}: {e}", path.display()),
        }
        catalog
    }

    pub fn builtin() -> Catalog {
        let mut c = Catalog {
            models: Vec::new(),
            keys: BTreeMap::new(),
        };
        for (provider, env) in [
            ("anthropic", "ANTHROPIC_API_KEY"),
            ("openai", "OPENAI_API_KEY"),
            ("google", "GEMINI_API_KEY"),
            ("deepseek", "DEEPSEEK_API_KEY"),
            ("groq", "GROQ_API_KEY"),
            ("openrouter", "OPENROUTER_API_KEY"),
            ("xai", "XAI_API_KEY"),
            ("mistral", "MISTRAL_API_KEY"),
        ] {
            c.keys.insert(provider.into(), KeySource::Env(env.into()));
        }
        c.keys.insert("scripted".into(), KeySource::None);
        c.models = builtin_models();
        c
    }

    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// Every provider with a key rule, and whether its key is present now.
    pub fn providers(&self) -> Vec<(String, bool)> {
        self.keys
            .keys()
            .map(|p| (p.clone(), self.api_key(p).is_ok()))
            .collect()
    }

    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        self.models
            .iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    pub fn first_of(&self, provider: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.provider == provider)
    }

    /// The key for a provider: `None` when one is needed but not set.
    pub fn api_key(&self, provider: &str) -> Result<Option<String>, String> {
        match self.keys.get(provider) {
            Some(KeySource::None) => Ok(None),
            Some(KeySource::Literal(k)) => Ok(Some(k.clone())),
            Some(KeySource::Env(var)) => match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_string())),
                _ if provider == "google" => std::env::var("GOOGLE_API_KEY")
                    .ok()
                    .filter(|v| !v.trim().is_empty())
                    .map(Some)
                    .ok_or(format!(
                        "No API key for {provider}: set {var} (or GOOGLE_API_KEY)"
                    )),
                _ => Err(format!("No API key for {provider}: set {var}")),
            },
            None => Err(format!(
                "No API key for {provider}: add apiKey to models.json"
            )),
        }
    }

    /// The environment variables that may hold an API key, and every key value set now (from
    /// those variables or literal in models.json): what commands and tool output must not show.
    pub fn credentials(&self) -> (Vec<String>, Vec<String>) {
        let mut vars = vec!["GOOGLE_API_KEY".to_string()];
        let mut values = Vec::new();
        for source in self.keys.values() {
            match source {
                KeySource::Env(var) => vars.push(var.clone()),
                KeySource::Literal(key) => values.push(key.clone()),
                KeySource::None => {}
            }
        }
        values.extend(vars.iter().filter_map(|v| std::env::var(v).ok()));
        (vars, values)
    }

    pub fn has_key(&self, provider: &str) -> bool {
        self.api_key(provider).is_ok()
    }

    /// Models whose credentials resolve, for `get_available_models` and `cycle_model`.
    pub fn available(&self) -> Vec<&Model> {
        self.models
            .iter()
            .filter(|m| self.has_key(&m.provider))
            .collect()
    }

    /// Merges a pi-format `models.json`: `{"providers": {NAME: {baseUrl, api, apiKey, headers?,
    /// compat?, models: [...]}}}`. Models of the same provider and id replace built-in ones.
    pub fn merge_models_json(&mut self, text: &str) -> Result<(), String> {
        let file: ModelsFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (name, p) in file.providers {
            let api = p.api.ok_or(format!("provider {name}: api is required"))?;
            let base_url = p
                .base_url
                .ok_or(format!("provider {name}: baseUrl is required"))?;
            let key = match p.api_key {
                Some(k) if is_env_name(&k) => KeySource::Env(k),
                Some(k) => KeySource::Literal(k),
                None => KeySource::None,
            };
            self.keys.insert(name.clone(), key);
            for m in p.models {
                let model = Model {
                    name: m.name.unwrap_or_else(|| m.id.clone()),
                    id: m.id,
                    api,
                    provider: name.clone(),
                    base_url: base_url.trim_end_matches('/').to_string(),
                    reasoning: m.reasoning.unwrap_or(false),
                    input: m.input.unwrap_or_else(|| vec!["text".into()]),
                    cost: m.cost.unwrap_or_default(),
                    context_window: m.context_window.unwrap_or(128_000),
                    max_tokens: m.max_tokens.unwrap_or(16_384),
                    xhigh: false,
                    headers: p.headers.clone(),
                    compat: p.compat.clone(),
                };
                self.models
                    .retain(|x| !(x.provider == model.provider && x.id == model.id));
                self.models.push(model);
            }
        }
        Ok(())
    }
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[derive(Deserialize)]
struct ModelsFile {
    #[serde(default)]
    providers: BTreeMap<String, ProviderEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderEntry {
    base_url: Option<String>,
    api: Option<Api>,
    api_key: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    compat: Option<Value>,
    #[serde(default)]
    models: Vec<ModelEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelEntry {
    id: String,
    name: Option<String>,
    reasoning: Option<bool>,
    input: Option<Vec<String>>,
    context_window: Option<u64>,
    max_tokens: Option<u64>,
    cost: Option<ModelCost>,
}

/// Thinking level after clamping to a model: `off` for models without reasoning, `high` for
/// `xhigh` on models without it.
pub fn clamp_thinking(level: &str, model: Option<&Model>) -> &'static str {
    let Some(model) = model else {
        return canonical(level);
    };
    if !model.reasoning {
        return "off";
    }
    match canonical(level) {
        "xhigh" if !model.xhigh => "high",
        other => other,
    }
}

fn canonical(level: &str) -> &'static str {
    if level == "max" {
        return "xhigh";
    }
    THINKING_LEVELS
        .iter()
        .find(|l| **l == level)
        .copied()
        .unwrap_or("off")
}

/// The levels `cycle_thinking_level` walks through for a model.
pub fn thinking_cycle(model: &Model) -> Vec<&'static str> {
    if !model.reasoning {
        return vec![];
    }
    let mut levels = vec!["off", "minimal", "low", "medium", "high"];
    if model.xhigh {
        levels.push("xhigh");
    }
    levels
}

struct Builtin {
    provider: &'static str,
    api: Api,
    base: &'static str,
    id: &'static str,
    name: &'static str,
    reasoning: bool,
    xhigh: bool,
    image: bool,
    cost: [f64; 4],
    window: u64,
    max: u64,
}

const ANTHROPIC: &str = "https://api.anthropic.com/v1";
const OPENAI: &str = "https://api.openai.com/v1";
const GOOGLE: &str = "https://generativelanguage.googleapis.com/v1beta";

fn builtin_models() -> Vec<Model> {
    use Api::*;
    let table = [
        Builtin {
            provider: "anthropic",
            api: AnthropicMessages,
            base: ANTHROPIC,
            id: "claude-sonnet-4-5",
            name: "Claude Sonnet 4.5",
            reasoning: true,
            xhigh: false,
            image: true,
            cost: [3.0, 15.0, 0.3, 3.75],
            window: 200_000,
            max: 64_000,
        },
        Builtin {
            provider: "anthropic",
            api: AnthropicMessages,
            base: ANTHROPIC,
            id: "claude-haiku-4-5",
            name: "Claude Haiku 4.5",
            reasoning: true,
            xhigh: false,
            image: true,
            cost: [1.0, 5.0, 0.1, 1.25],
            window: 200_000,
            max: 64_000,
        },
        Builtin {
            provider: "anthropic",
            api: AnthropicMessages,
            base: ANTHROPIC,
            id: "claude-opus-4-1",
            name: "Claude Opus 4.1",
            reasoning: true,
            xhigh: false,
            image: true,
            cost: [15.0, 75.0, 1.5, 18.75],
            window: 200_000,
            max: 32_000,
        },
        Builtin {
            provider: "openai",
            api: OpenAiResponses,
            base: OPENAI,
            id: "gpt-5",
            name: "GPT-5",
            reasoning: true,
            xhigh: false,
            image: true,
            cost: [1.25, 10.0, 0.125, 0.0],
            window: 400_000,
            max: 128_000,
        },
        Builtin {
            provider: "openai",
            api: OpenAiResponses,
            base: OPENAI,
            id: "gpt-5-mini",
            name: "GPT-5 mini",
            reasoning: true,
            xhigh: false,
            image: true,
            cost: [0.25, 2.0, 0.025, 0.0],
            window: 400_000,
            max: 128_000,
        },
        Builtin {
            provider: "openai",
            api: OpenAiCompletions,
            base: OPENAI,
            id: "gpt-4.1",
            name: "GPT-4.1",
            reasoning: false,
            xhigh: false,
            image: true,
            cost: [2.0, 8.0, 0.5, 0.0],
            window: 1_047_576,
            max: 32_768,
        },
        Builtin {
            provider: "google",
            api: Google,
            base: GOOGLE,
            id: "gemini-2.5-pro",
            name: "Gemini 2.5 Pro",
            reasoning: true,
            xhigh: false,
            image: true,
            cost: [1.25, 10.0, 0.31, 0.0],
            window: 1_048_576,
            max: 65_536,
        },
        Builtin {
            provider: "google",
            api: Google,
            base: GOOGLE,
            id: "gemini-2.5-flash",
            name: "Gemini 2.5 Flash",
            reasoning: true,
            xhigh: false,
            image: true,
            cost: [0.3, 2.5, 0.075, 0.0],
            window: 1_048_576,
            max: 65_536,
        },
        Builtin {
            provider: "deepseek",
            api: OpenAiCompletions,
            base: "https://api.deepseek.com",
            id: "deepseek-reasoner",
            name: "DeepSeek Reasoner",
            reasoning: true,
            xhigh: false,
            image: false,
            cost: [0.28, 0.42, 0.028, 0.0],
            window: 128_000,
            max: 64_000,
        },
        Builtin {
            provider: "scripted",
            api: Scripted,
            base: "",
            id: "scripted",
            name: "Scripted replay",
            reasoning: true,
            xhigh: true,
            image: true,
            cost: [0.0, 0.0, 0.0, 0.0],
            window: 200_000,
            max: 32_000,
        },
    ];
    table
        .into_iter()
        .map(|b| Model {
            id: b.id.into(),
            name: b.name.into(),
            api: b.api,
            provider: b.provider.into(),
            base_url: b.base.into(),
            reasoning: b.reasoning,
            input: if b.image {
                vec!["text".into(), "image".into()]
            } else {
                vec!["text".into()]
            },
            cost: ModelCost {
                input: b.cost[0],
                output: b.cost[1],
                cache_read: b.cost[2],
                cache_write: b.cost[3],
            },
            context_window: b.window,
            max_tokens: b.max,
            xhigh: b.xhigh,
            headers: BTreeMap::new(),
            compat: None,
        })
        .collect()
}

/// Prices a usage record with a model's per-million costs.
pub fn price(usage: &mut crate::protocol::message::Usage, cost: &ModelCost) {
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    usage.cost.input = per(usage.input, cost.input);
    usage.cost.output = per(usage.output, cost.output);
    usage.cost.cache_read = per(usage.cache_read, cost.cache_read);
    usage.cost.cache_write = per(usage.cache_write, cost.cache_write);
    usage.cost.total =
        usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_json_adds_local_servers() {
        let mut c = Catalog::builtin();
        c.merge_models_json(
            r#"{"providers":{"local":{"baseUrl":"http://127.0.0.1:9/v1/","api":"openai-completions","apiKey":"sk-literal",
                "models":[{"id":"qwen","reasoning":true,"contextWindow":32000}]}}}"#,
        )
        .unwrap();
        let m = c.find("local", "qwen").unwrap();
        assert_eq!(m.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(m.context_window, 32000);
        assert_eq!(c.api_key("local").unwrap().as_deref(), Some("sk-literal"));
        assert!(c
            .merge_models_json(r#"{"providers":{"x":{"baseUrl":"u","models":[]}}}"#)
            .is_err());
    }

    #[test]
    fn thinking_is_clamped() {
        let c = Catalog::builtin();
        let gpt41 = c.find("openai", "gpt-4.1").unwrap();
        assert_eq!(clamp_thinking("high", Some(gpt41)), "off");
        let sonnet = c.find("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(clamp_thinking("xhigh", Some(sonnet)), "high");
        assert_eq!(clamp_thinking("medium", Some(sonnet)), "medium");
    }

    #[test]
    fn cost_per_million() {
        let mut u = crate::protocol::message::Usage {
            input: 1_000_000,
            output: 500_000,
            ..Default::default()
        };
        price(
            &mut u,
            &ModelCost {
                input: 3.0,
                output: 15.0,
                cache_read: 0.0,
                cache_write: 0.0,
            },
        );
        assert!((u.cost.total - 10.5).abs() < 1e-9);
    }
}
