//! `models.json` in pi's format: `{"providers": {NAME: {baseUrl?, api?, apiKey?, headers?,
//! compat?, discover?, models?: [...]}}}`. A provider gjc knows by name inherits what the entry
//! leaves out; a new provider needs `api` and `baseUrl`. The file is applied whole or not at all.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::catalog::{
    normalize_base_url, Api, Catalog, KeySource, Model, ModelCost, ProviderDefaults,
};
use super::compat;
use super::discovery;

/// Window and output limit of a models.json model that names neither.
const DEFAULT_WINDOW: u64 = 128_000;
const DEFAULT_MAX_TOKENS: u64 = 16_384;

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
    headers: Option<BTreeMap<String, String>>,
    compat: Option<Value>,
    discover: Option<bool>,
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
    compat: Option<Value>,
}

impl Catalog {
    /// Merges a models.json text. Models of the same provider and id replace existing ones; a
    /// provider's `baseUrl` and `headers` also apply to its built-in models. On error nothing
    /// is changed.
    pub fn merge_models_json(&mut self, text: &str) -> Result<(), String> {
        let file: ModelsFile =
            serde_json::from_str(text).map_err(|e| format!("invalid models.json: {e}"))?;
        let mut next = self.clone();
        for (name, entry) in file.providers {
            next.apply_provider(&name, entry)
                .map_err(|e| format!("provider {name}: {e}"))?;
        }
        *self = next;
        Ok(())
    }

    fn apply_provider(&mut self, name: &str, entry: ProviderEntry) -> Result<(), String> {
        if name.trim().is_empty() {
            return Err("a provider needs a name".into());
        }
        let known = self.providers.get(name).cloned();
        if known.as_ref().is_some_and(|k| k.api == Api::Scripted)
            || entry.api == Some(Api::Scripted)
        {
            return Err("the scripted provider cannot be configured in models.json".into());
        }
        let defaults = provider_defaults(known.as_ref(), &entry)?;
        let mut models = Vec::with_capacity(entry.models.len());
        for m in entry.models {
            models.push(model_from(name, &defaults, m)?);
        }
        // Built-in models of a known provider follow its new base URL and headers.
        for m in self.models.iter_mut().filter(|m| m.provider == name) {
            if m.api == defaults.api {
                m.base_url.clone_from(&defaults.base_url);
                m.headers.clone_from(&defaults.headers);
                if defaults.compat.is_some() {
                    m.compat.clone_from(&defaults.compat);
                }
            }
        }
        for model in models {
            self.models
                .retain(|x| !(x.provider == model.provider && x.id == model.id));
            self.models.push(model);
        }
        self.providers.insert(name.to_string(), defaults);
        Ok(())
    }
}

/// The provider's defaults: the entry's fields over those of the provider gjc already knows.
fn provider_defaults(
    known: Option<&ProviderDefaults>,
    entry: &ProviderEntry,
) -> Result<ProviderDefaults, String> {
    let api = entry
        .api
        .or(known.map(|k| k.api))
        .ok_or("api is required")?;
    let base_url = match (&entry.base_url, known) {
        (Some(url), _) => normalize_base_url(api, url)?,
        (None, Some(k)) if k.api == api => k.base_url.clone(),
        _ => return Err("baseUrl is required".into()),
    };
    if entry.discover == Some(true) && !discovery::speaks_models_list(api) {
        return Err(format!(
            "discover needs an OpenAI-compatible api, not {}",
            api.as_str()
        ));
    }
    if let Some(c) = &entry.compat {
        compat::validate(api, c)?;
    }
    let key = match &entry.api_key {
        Some(k) if is_env_name(k) => KeySource::Env(vec![k.clone()]),
        Some(k) => KeySource::Literal(k.clone()),
        None => known.map_or(KeySource::None, |k| k.key.clone()),
    };
    Ok(ProviderDefaults {
        api,
        base_url,
        key,
        headers: entry
            .headers
            .clone()
            .or(known.map(|k| k.headers.clone()))
            .unwrap_or_default(),
        compat: entry
            .compat
            .clone()
            .or(known.and_then(|k| k.compat.clone())),
        discover: entry.discover.unwrap_or(known.is_some_and(|k| k.discover)),
        context_window: known.map_or(DEFAULT_WINDOW, |k| k.context_window),
        max_tokens: known.map_or(DEFAULT_MAX_TOKENS, |k| k.max_tokens),
    })
}

fn model_from(provider: &str, p: &ProviderDefaults, m: ModelEntry) -> Result<Model, String> {
    if m.id.trim().is_empty() {
        return Err("a model needs a non-empty id".into());
    }
    let compat = match (&p.compat, m.compat) {
        (base, None) => base.clone(),
        (base, Some(own)) => {
            compat::validate(p.api, &own).map_err(|e| format!("model {}: {e}", m.id))?;
            Some(compat::merged(base.as_ref(), own))
        }
    };
    Ok(Model {
        name: m.name.unwrap_or_else(|| m.id.clone()),
        id: m.id,
        api: p.api,
        provider: provider.to_string(),
        base_url: p.base_url.clone(),
        reasoning: m.reasoning.unwrap_or(false),
        input: m.input.unwrap_or_else(|| vec!["text".into()]),
        cost: m.cost.unwrap_or_default(),
        context_window: m.context_window.unwrap_or(p.context_window),
        max_tokens: m.max_tokens.unwrap_or(p.max_tokens),
        xhigh: false,
        headers: p.headers.clone(),
        compat,
    })
}

/// `apiKey` names an environment variable when it looks like one (`MY_KEY`), else it is the key.
fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}
