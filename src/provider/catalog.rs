//! The model registry: the providers gjc knows by name, their built-in models, the user's
//! `models.json` (`models_json.rs`), API keys from the environment, models synthesized for ids
//! without an entry, and thinking levels clamped to what a model supports.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::builtin::{builtin_models, NamedProvider, NAMED_PROVIDERS};
use super::discovery;

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
pub(super) enum KeySource {
    /// Environment variables, the first one set wins.
    Env(Vec<String>),
    Literal(String),
    /// Local servers and the scripted provider need no key.
    None,
}

/// What a provider's models share, and what a model id without an entry of its own gets.
#[derive(Debug, Clone)]
pub(super) struct ProviderDefaults {
    pub api: Api,
    pub base_url: String,
    pub key: KeySource,
    pub headers: BTreeMap<String, String>,
    pub compat: Option<Value>,
    /// Whether `get_available_models` asks the server for its models.
    pub discover: bool,
    pub context_window: u64,
    pub max_tokens: u64,
}

#[derive(Debug, Clone)]
pub struct Catalog {
    pub(super) models: Vec<Model>,
    pub(super) providers: BTreeMap<String, ProviderDefaults>,
    /// Why `models.json` was not applied, for `get_state` and `get_available_models`.
    models_error: Option<String>,
}

/// A models.json larger than this is refused (and reported like any broken one): it is a list of
/// providers and models, not data.
pub const MAX_MODELS_JSON_BYTES: u64 = 4 * 1024 * 1024;

/// The levels gjc itself applies.
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// Every level hosts may send: gjc's own plus `inherit` (no level of its own: off) and `max`
/// (the highest the model accepts).
pub const WIRE_THINKING_LEVELS: &[&str] = &[
    "inherit", "off", "minimal", "low", "medium", "high", "xhigh", "max",
];

impl Catalog {
    /// The built-in providers and models plus `<agent_dir>/models.json` when it exists. A broken
    /// models.json is skipped as a whole (the built-in providers still work) and its error kept
    /// for hosts to see.
    pub fn load(agent_dir: &Path) -> Catalog {
        let mut catalog = Catalog::builtin();
        let path = agent_dir.join("models.json");
        let read = crate::fs::bounded::read_to_string(
            &path,
            MAX_MODELS_JSON_BYTES,
            crate::fs::bounded::Links::Follow,
        );
        let failure = match read {
            Ok(text) => catalog.merge_models_json(&text).err(),
            Err(e) if e.is_not_found() => None,
            Err(e) => Some(format!("cannot read it: {e}")),
        };
        if let Some(e) = failure {
            let message = format!("{}: {e}", path.display());
            log::error!("ignoring {message}");
            catalog.models_error = Some(message);
        }
        catalog
    }

    pub fn builtin() -> Catalog {
        let mut providers = BTreeMap::new();
        for p in NAMED_PROVIDERS {
            providers.insert(p.name.to_string(), named_defaults(p));
        }
        providers.insert(
            "scripted".into(),
            ProviderDefaults {
                api: Api::Scripted,
                base_url: String::new(),
                key: KeySource::None,
                headers: BTreeMap::new(),
                compat: None,
                discover: false,
                context_window: 200_000,
                max_tokens: 32_000,
            },
        );
        let mut models = builtin_models();
        for m in &mut models {
            if let Some(p) = providers.get(&m.provider) {
                m.base_url.clone_from(&p.base_url);
            }
        }
        Catalog {
            models,
            providers,
            models_error: None,
        }
    }

    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// Why models.json was skipped, when it was.
    pub fn models_error(&self) -> Option<&str> {
        self.models_error.as_deref()
    }

    /// Every provider with a key rule, and whether its key is present now.
    pub fn providers(&self) -> Vec<(String, bool)> {
        self.providers
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

    /// A model by provider and id: its entry when there is one, else a model built from the
    /// provider's defaults, since a provider serves far more models than any list names.
    pub fn resolve(&self, provider: &str, id: &str) -> Result<Model, CatalogError> {
        if let Some(m) = self.find(provider, id) {
            return Ok(m.clone());
        }
        self.synthesize(provider, id)
            .ok_or_else(|| CatalogError::ModelNotFound {
                provider: provider.to_string(),
                id: id.to_string(),
            })
    }

    /// The model `--provider P` alone selects: the provider's first model.
    pub fn default_of(&self, provider: &str) -> Result<Model, CatalogError> {
        match (
            self.first_of(provider),
            self.providers.contains_key(provider),
        ) {
            (Some(m), _) => Ok(m.clone()),
            (None, true) => Err(CatalogError::NoDefault(provider.to_string())),
            (None, false) => Err(CatalogError::UnknownProvider {
                provider: provider.to_string(),
                known: self.providers.keys().cloned().collect(),
            }),
        }
    }

    /// A model of a known provider that has no entry: the provider's API, base URL, headers and
    /// compat, a conservative window and output limit, text only, no reasoning, no price.
    fn synthesize(&self, provider: &str, id: &str) -> Option<Model> {
        let p = self.providers.get(provider)?;
        if p.api == Api::Scripted || id.trim().is_empty() {
            return None;
        }
        Some(Model {
            id: id.to_string(),
            name: id.to_string(),
            api: p.api,
            provider: provider.to_string(),
            base_url: p.base_url.clone(),
            reasoning: false,
            input: vec!["text".into()],
            cost: ModelCost::default(),
            context_window: p.context_window,
            max_tokens: p.max_tokens,
            xhigh: false,
            headers: p.headers.clone(),
            compat: p.compat.clone(),
        })
    }

    /// The key for a provider: `None` when none is needed, an error when one is needed but not
    /// set.
    pub fn api_key(&self, provider: &str) -> Result<Option<String>, KeyError> {
        match self.providers.get(provider).map(|p| &p.key) {
            Some(KeySource::None) => Ok(None),
            Some(KeySource::Literal(k)) => Ok(Some(k.clone())),
            Some(KeySource::Env(vars)) => vars
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|k| !k.trim().is_empty()))
                .map(|k| Some(k.trim().to_string()))
                .ok_or_else(|| KeyError::Unset {
                    provider: provider.to_string(),
                    vars: vars.clone(),
                }),
            None => Err(KeyError::NotConfigured(provider.to_string())),
        }
    }

    /// The environment variables that may hold an API key, and every key value set now (from
    /// those variables or literal in models.json): what commands and tool output must not show.
    pub fn credentials(&self) -> (Vec<String>, Vec<String>) {
        let mut vars = Vec::new();
        let mut values = Vec::new();
        for p in self.providers.values() {
            match &p.key {
                KeySource::Env(v) => vars.extend(v.iter().cloned()),
                KeySource::Literal(key) => values.push(key.clone()),
                KeySource::None => {}
            }
        }
        vars.sort();
        vars.dedup();
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

    /// The servers `get_available_models` asks, by provider: local servers, and providers with
    /// `"discover": true` in models.json, when their key resolves.
    pub fn discovery_targets(&self) -> Vec<(String, discovery::Target)> {
        self.providers
            .iter()
            .filter(|(_, p)| p.discover && discovery::speaks_models_list(p.api))
            .filter_map(|(name, p)| {
                let key = self.api_key(name).ok()?;
                Some((
                    name.clone(),
                    discovery::Target::new(&p.base_url, key, &p.headers),
                ))
            })
            .collect()
    }

    /// The available models plus those `listed` (each target's model ids, in the targets'
    /// order) that the catalog does not have yet.
    pub fn available_with(
        &self,
        targets: &[(String, discovery::Target)],
        listed: Vec<Vec<String>>,
    ) -> Vec<Model> {
        let mut out: Vec<Model> = self.available().into_iter().cloned().collect();
        for ((provider, _), ids) in targets.iter().zip(listed) {
            for id in ids {
                if self.find(provider, &id).is_none() {
                    out.extend(self.synthesize(provider, &id));
                }
            }
        }
        out
    }
}

/// A named provider's defaults, its base URL replaced by its variable when that is set to a
/// usable URL.
fn named_defaults(p: &NamedProvider) -> ProviderDefaults {
    let base_url = p
        .base_url_var
        .and_then(|var| {
            let value = std::env::var(var).ok()?;
            match normalize_base_url(p.api, &value) {
                Ok(url) => Some(url),
                Err(e) => {
                    log::warn!("ignoring {var}: {e}");
                    None
                }
            }
        })
        .unwrap_or_else(|| p.base_url.to_string());
    ProviderDefaults {
        api: p.api,
        base_url,
        key: if p.key_vars.is_empty() {
            KeySource::None
        } else {
            KeySource::Env(p.key_vars.iter().map(|v| v.to_string()).collect())
        },
        headers: BTreeMap::new(),
        compat: None,
        discover: p.discover,
        context_window: p.context_window,
        max_tokens: p.max_tokens,
    }
}

/// Why the catalog has no model for a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogError {
    /// No entry, and none can be made (an unknown provider, the scripted one, an empty id).
    ModelNotFound { provider: String, id: String },
    /// A known provider without a built-in model: the model must be named.
    NoDefault(String),
    /// A provider nobody configured; `known` lists the ones there are.
    UnknownProvider {
        provider: String,
        known: Vec<String>,
    },
}

impl std::fmt::Display for CatalogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogError::ModelNotFound { provider, id } => {
                write!(f, "Model not found: {provider}/{id}")
            }
            CatalogError::NoDefault(p) => {
                write!(
                    f,
                    "provider {p:?} has no built-in model: name one with --model"
                )
            }
            CatalogError::UnknownProvider { provider, known } => write!(
                f,
                "unknown provider {provider:?} (known: {})",
                known.join(", ")
            ),
        }
    }
}

impl std::error::Error for CatalogError {}

/// Why a provider has no API key when it needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// None of the variables that may hold it is set (or each is blank).
    Unset { provider: String, vars: Vec<String> },
    /// A provider models.json names without saying where its key comes from.
    NotConfigured(String),
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Unset { provider, vars } => match vars.as_slice() {
                [] => write!(f, "No API key for {provider}"),
                [only] => write!(f, "No API key for {provider}: set {only}"),
                [first, rest @ ..] => write!(
                    f,
                    "No API key for {provider}: set {first} (or {})",
                    rest.join(", ")
                ),
            },
            KeyError::NotConfigured(provider) => {
                write!(f, "No API key for {provider}: add apiKey to models.json")
            }
        }
    }
}

impl std::error::Error for KeyError {}

/// A base URL as gjc calls it: an `http(s)` URL without a trailing slash. For
/// `anthropic-messages` the configured URL is the API root (`https://api.anthropic.com`, as pi
/// writes it) and `/v1` is added; a URL that already ends in `/v1` is taken as it is.
pub fn normalize_base_url(api: Api, url: &str) -> Result<String, String> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "baseUrl {url:?} must start with http:// or https://"
        ));
    }
    if api == Api::AnthropicMessages && !url.ends_with("/v1") {
        return Ok(format!("{url}/v1"));
    }
    Ok(url.to_string())
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
#[path = "catalog_tests.rs"]
mod tests;
