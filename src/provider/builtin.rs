//! What gjc knows without configuration: the providers it can reach by name (API, base URL, key
//! variable, defaults for models it has no entry for) and the built-in models with their prices.

use std::collections::BTreeMap;

use super::catalog::{Api, Model, ModelCost};

/// A provider gjc reaches by name. Any model id the provider serves can be selected; ids without a
/// built-in entry get `context_window` and `max_tokens` (deliberately conservative: the provider
/// serves models of every size) and no reasoning.
pub struct NamedProvider {
    pub name: &'static str,
    pub api: Api,
    pub base_url: &'static str,
    /// Variables that may hold the key, first set wins; empty for local servers, which need none.
    pub key_vars: &'static [&'static str],
    /// A variable that replaces `base_url` (local servers often listen elsewhere).
    pub base_url_var: Option<&'static str>,
    /// Whether `get_available_models` asks the server for its models (`GET {baseUrl}/models`).
    pub discover: bool,
    pub context_window: u64,
    pub max_tokens: u64,
}

const HOSTED_WINDOW: u64 = 128_000;
const LOCAL_WINDOW: u64 = 32_768;
const DEFAULT_MAX_TOKENS: u64 = 8_192;

const fn hosted(
    name: &'static str,
    api: Api,
    base_url: &'static str,
    key_vars: &'static [&'static str],
) -> NamedProvider {
    NamedProvider {
        name,
        api,
        base_url,
        key_vars,
        base_url_var: None,
        discover: false,
        context_window: HOSTED_WINDOW,
        max_tokens: DEFAULT_MAX_TOKENS,
    }
}

/// An OpenAI-compatible server on this machine: no key, its usual loopback address, discovered.
const fn local(
    name: &'static str,
    base_url: &'static str,
    base_url_var: &'static str,
) -> NamedProvider {
    NamedProvider {
        name,
        api: Api::OpenAiCompletions,
        base_url,
        key_vars: &[],
        base_url_var: Some(base_url_var),
        discover: true,
        context_window: LOCAL_WINDOW,
        max_tokens: DEFAULT_MAX_TOKENS,
    }
}

/// Base URLs and key variables as each provider documents them for its OpenAI-compatible (or
/// native) endpoint.
pub const NAMED_PROVIDERS: &[NamedProvider] = &[
    hosted(
        "anthropic",
        Api::AnthropicMessages,
        ANTHROPIC,
        &["ANTHROPIC_API_KEY"],
    ),
    hosted("openai", Api::OpenAiResponses, OPENAI, &["OPENAI_API_KEY"]),
    hosted(
        "google",
        Api::Google,
        GOOGLE,
        &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    ),
    hosted(
        "deepseek",
        Api::OpenAiCompletions,
        "https://api.deepseek.com",
        &["DEEPSEEK_API_KEY"],
    ),
    hosted(
        "openrouter",
        Api::OpenAiCompletions,
        "https://openrouter.ai/api/v1",
        &["OPENROUTER_API_KEY"],
    ),
    hosted(
        "groq",
        Api::OpenAiCompletions,
        "https://api.groq.com/openai/v1",
        &["GROQ_API_KEY"],
    ),
    hosted(
        "xai",
        Api::OpenAiCompletions,
        "https://api.x.ai/v1",
        &["XAI_API_KEY"],
    ),
    hosted(
        "mistral",
        Api::OpenAiCompletions,
        "https://api.mistral.ai/v1",
        &["MISTRAL_API_KEY"],
    ),
    hosted(
        "together",
        Api::OpenAiCompletions,
        "https://api.together.ai/v1",
        &["TOGETHER_API_KEY"],
    ),
    hosted(
        "fireworks",
        Api::OpenAiCompletions,
        "https://api.fireworks.ai/inference/v1",
        &["FIREWORKS_API_KEY"],
    ),
    hosted(
        "cerebras",
        Api::OpenAiCompletions,
        "https://api.cerebras.ai/v1",
        &["CEREBRAS_API_KEY"],
    ),
    local("ollama", "http://127.0.0.1:11434/v1", "OLLAMA_BASE_URL"),
    local("lmstudio", "http://127.0.0.1:1234/v1", "LMSTUDIO_BASE_URL"),
    local("llamacpp", "http://127.0.0.1:8080/v1", "LLAMACPP_BASE_URL"),
    local("vllm", "http://127.0.0.1:8000/v1", "VLLM_BASE_URL"),
];

struct Builtin {
    provider: &'static str,
    api: Api,
    id: &'static str,
    name: &'static str,
    reasoning: bool,
    xhigh: bool,
    image: bool,
    cost: [f64; 4],
    window: u64,
    max: u64,
}

/// One built-in model; `flags` are `[reasoning, xhigh, image input]`, `cost` dollars per million
/// tokens `[input, output, cache read, cache write]`.
#[allow(clippy::too_many_arguments)]
const fn row(
    provider: &'static str,
    api: Api,
    id: &'static str,
    name: &'static str,
    flags: [bool; 3],
    cost: [f64; 4],
    window: u64,
    max: u64,
) -> Builtin {
    Builtin {
        provider,
        api,
        id,
        name,
        reasoning: flags[0],
        xhigh: flags[1],
        image: flags[2],
        cost,
        window,
        max,
    }
}

const ANTHROPIC: &str = "https://api.anthropic.com/v1";
const OPENAI: &str = "https://api.openai.com/v1";
const GOOGLE: &str = "https://generativelanguage.googleapis.com/v1beta";

pub fn builtin_models() -> Vec<Model> {
    use Api::*;
    #[rustfmt::skip]
    let table = [
        row("anthropic", AnthropicMessages, "claude-sonnet-4-5", "Claude Sonnet 4.5", [true, false, true], [3.0, 15.0, 0.3, 3.75], 200_000, 64_000),
        row("anthropic", AnthropicMessages, "claude-haiku-4-5", "Claude Haiku 4.5", [true, false, true], [1.0, 5.0, 0.1, 1.25], 200_000, 64_000),
        row("anthropic", AnthropicMessages, "claude-opus-4-1", "Claude Opus 4.1", [true, false, true], [15.0, 75.0, 1.5, 18.75], 200_000, 32_000),
        row("openai", OpenAiResponses, "gpt-5", "GPT-5", [true, false, true], [1.25, 10.0, 0.125, 0.0], 400_000, 128_000),
        row("openai", OpenAiResponses, "gpt-5-mini", "GPT-5 mini", [true, false, true], [0.25, 2.0, 0.025, 0.0], 400_000, 128_000),
        row("openai", OpenAiCompletions, "gpt-4.1", "GPT-4.1", [false, false, true], [2.0, 8.0, 0.5, 0.0], 1_047_576, 32_768),
        row("google", Google, "gemini-2.5-pro", "Gemini 2.5 Pro", [true, false, true], [1.25, 10.0, 0.31, 0.0], 1_048_576, 65_536),
        row("google", Google, "gemini-2.5-flash", "Gemini 2.5 Flash", [true, false, true], [0.3, 2.5, 0.075, 0.0], 1_048_576, 65_536),
        row("deepseek", OpenAiCompletions, "deepseek-reasoner", "DeepSeek Reasoner", [true, false, false], [0.28, 0.42, 0.028, 0.0], 128_000, 64_000),
        row("scripted", Scripted, "scripted", "Scripted replay", [true, true, true], [0.0, 0.0, 0.0, 0.0], 200_000, 32_000),
    ];
    table
        .into_iter()
        .map(|b| Model {
            id: b.id.into(),
            name: b.name.into(),
            api: b.api,
            provider: b.provider.into(),
            // The provider's base URL, filled in by `Catalog::builtin`.
            base_url: String::new(),
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
