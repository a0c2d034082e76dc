//! Tests of the catalog: models.json, named providers, keys, base URLs, thinking levels.

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

/// Runs `f` with `vars` set (or removed) in this process's environment; the tests that touch
/// the environment take this lock so they never see each other's values.
fn with_env<T>(vars: &[(&str, Option<&str>)], f: impl FnOnce() -> T) -> T {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let saved: Vec<_> = vars
        .iter()
        .map(|(k, _)| (*k, std::env::var(k).ok()))
        .collect();
    for (k, v) in vars {
        match v {
            Some(v) => std::env::set_var(k, v),
            None => std::env::remove_var(k),
        }
    }
    let out = f();
    for (k, v) in saved {
        match v {
            Some(v) => std::env::set_var(k, v),
            None => std::env::remove_var(k),
        }
    }
    out
}

#[test]
fn named_providers_take_any_model_id() {
    with_env(&[("GROQ_API_KEY", Some("gsk-test"))], || {
        let c = Catalog::builtin();
        let m = c.resolve("groq", "some-new-model").unwrap();
        assert_eq!(m.base_url, "https://api.groq.com/openai/v1");
        assert_eq!(m.api, Api::OpenAiCompletions);
        assert!(!m.reasoning);
        assert_eq!((m.context_window, m.max_tokens), (128_000, 8_192));
        assert_eq!(c.api_key("groq").unwrap().as_deref(), Some("gsk-test"));
        // A built-in entry wins over synthesis.
        assert!(
            c.resolve("anthropic", "claude-sonnet-4-5")
                .unwrap()
                .reasoning
        );
        assert_eq!(
            c.resolve("nope", "x").unwrap_err().to_string(),
            "Model not found: nope/x"
        );
        assert!(matches!(
            c.resolve("scripted", "other"),
            Err(CatalogError::ModelNotFound { provider, .. }) if provider == "scripted"
        ));
        let none = c.default_of("openrouter").unwrap_err();
        assert_eq!(none, CatalogError::NoDefault("openrouter".into()));
        assert!(none.to_string().contains("--model"));
        let unknown = c.default_of("nope").unwrap_err();
        assert!(
            matches!(&unknown, CatalogError::UnknownProvider { known, .. } if known.iter().any(|k| k == "openrouter")),
            "{unknown:?}"
        );
        assert!(unknown
            .to_string()
            .starts_with("unknown provider \"nope\" (known: "));
    });
}

#[test]
fn local_servers_need_no_key_and_follow_their_variable() {
    with_env(
        &[
            ("OLLAMA_BASE_URL", Some("http://10.0.0.5:11434/v1/")),
            ("VLLM_BASE_URL", Some("not a url")),
        ],
        || {
            let c = Catalog::builtin();
            assert_eq!(c.api_key("ollama").unwrap(), None);
            assert_eq!(
                c.resolve("ollama", "qwen3:8b").unwrap().base_url,
                "http://10.0.0.5:11434/v1"
            );
            assert_eq!(
                c.resolve("vllm", "m").unwrap().base_url,
                "http://127.0.0.1:8000/v1"
            );
            assert_eq!(
                c.resolve("lmstudio", "m").unwrap().base_url,
                "http://127.0.0.1:1234/v1"
            );
        },
    );
}

#[test]
fn anthropic_base_urls_with_and_without_v1() {
    for url in ["https://proxy.example", "https://proxy.example/v1/"] {
        let mut c = Catalog::builtin();
        c.merge_models_json(&format!(
            r#"{{"providers":{{"anthropic":{{"baseUrl":"{url}"}}}}}}"#
        ))
        .unwrap();
        let m = c.resolve("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(m.base_url, "https://proxy.example/v1");
        assert_eq!(c.resolve("anthropic", "x").unwrap().base_url, m.base_url);
    }
}

#[test]
fn a_broken_models_json_changes_nothing() {
    let mut c = Catalog::builtin();
    let before = c.models().len();
    let e = c
        .merge_models_json(
            r#"{"providers":{"a":{"baseUrl":"http://127.0.0.1:1","api":"openai-completions","models":[{"id":"m"}]},
                "b":{"baseUrl":"http://127.0.0.1:1","api":"openai-completions","compat":{"thinkingFormat":"qwen"}}}}"#,
        )
        .unwrap_err();
    assert!(e.starts_with("provider b: compat.thinkingFormat"), "{e}");
    assert_eq!(c.models().len(), before);
    assert!(c.find("a", "m").is_none());

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("models.json"), "{not json").unwrap();
    let c = Catalog::load(dir.path());
    assert!(c.models_error().unwrap().contains("invalid models.json"));
    assert!(c.find("anthropic", "claude-sonnet-4-5").is_some());
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

#[test]
fn a_missing_key_says_which_provider_and_where_it_would_come_from() {
    let c = Catalog::builtin();
    let unknown = c.api_key("no-such-provider").unwrap_err();
    assert_eq!(unknown, KeyError::NotConfigured("no-such-provider".into()));
    assert_eq!(
        unknown.to_string(),
        "No API key for no-such-provider: add apiKey to models.json"
    );
    let unset = |vars: &[&str]| KeyError::Unset {
        provider: "p".into(),
        vars: vars.iter().map(|v| v.to_string()).collect(),
    };
    assert_eq!(unset(&[]).to_string(), "No API key for p");
    assert_eq!(unset(&["A"]).to_string(), "No API key for p: set A");
    assert_eq!(
        unset(&["A", "B", "C"]).to_string(),
        "No API key for p: set A (or B, C)"
    );
}
