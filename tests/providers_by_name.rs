//! Providers by name: a key in the environment selects any model id of a hosted provider, local
//! servers need no key and are found at their (overridable) address, discovery lists a server's
//! models, and models.json problems reach the host instead of only stderr.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::fake_provider::Chunk;
use crate::support::fake_provider::{anthropic_text, openai_text};
use crate::support::gjc::GjcBuilder;
use crate::support::{gjc, FakeProvider, Reply, TIMEOUT};

/// Hosted providers, their key variable and the base URL each documents.
const HOSTED: &[(&str, &str, &str)] = &[
    (
        "anthropic",
        "ANTHROPIC_API_KEY",
        "https://api.anthropic.com/v1",
    ),
    ("openai", "OPENAI_API_KEY", "https://api.openai.com/v1"),
    (
        "google",
        "GEMINI_API_KEY",
        "https://generativelanguage.googleapis.com/v1beta",
    ),
    ("deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com"),
    (
        "openrouter",
        "OPENROUTER_API_KEY",
        "https://openrouter.ai/api/v1",
    ),
    ("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
    ("xai", "XAI_API_KEY", "https://api.x.ai/v1"),
    ("mistral", "MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
    ("together", "TOGETHER_API_KEY", "https://api.together.ai/v1"),
    (
        "fireworks",
        "FIREWORKS_API_KEY",
        "https://api.fireworks.ai/inference/v1",
    ),
    ("cerebras", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1"),
];

/// The local servers' variables, pointed at a closed loopback port so that no test depends on
/// what happens to listen on this machine.
const LOCAL_VARS: &[&str] = &[
    "OLLAMA_BASE_URL",
    "LMSTUDIO_BASE_URL",
    "LLAMACPP_BASE_URL",
    "VLLM_BASE_URL",
];
const CLOSED: &str = "http://127.0.0.1:9/v1";

fn write_models_json(dir: &Path, text: &str) {
    std::fs::write(dir.join("models.json"), text).unwrap();
}

/// gjc with an agent dir holding this models.json (the dir lives as long as the returned guard).
fn with_models_json(models: Value) -> (tempfile::TempDir, GjcBuilder) {
    let agent = tempfile::tempdir().unwrap();
    write_models_json(agent.path(), &models.to_string());
    let builder = gjc().env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap());
    (agent, builder)
}

/// gjc with one models.json provider, `name`, served by `server` with `"discover": true` and
/// `key` in `GATEWAY_TEST_KEY`; the local servers' addresses point at a closed port.
fn discovering(name: &str, server: &FakeProvider, key: &str) -> (tempfile::TempDir, GjcBuilder) {
    let (agent, builder) = with_models_json(
        json!({"providers": {name: {"baseUrl": format!("{}/v1", server.base_url),
            "api": "openai-completions", "apiKey": "GATEWAY_TEST_KEY", "discover": true}}}),
    );
    let mut builder = builder.env("GATEWAY_TEST_KEY", key);
    for var in LOCAL_VARS {
        builder = builder.env(var, CLOSED);
    }
    (agent, builder)
}

#[test]
fn each_named_provider_takes_any_model_id_with_a_key_in_the_environment() {
    let mut builder = gjc();
    for (_, var, _) in HOSTED {
        builder = builder.env(var, "test-key");
    }
    let mut g = builder.spawn();
    for (provider, _, base) in HOSTED {
        let id = "vendor/model-not-in-any-list";
        let m = g.ok(json!({"type": "set_model", "provider": provider, "modelId": id}));
        assert_eq!(m["provider"], *provider);
        assert_eq!(m["id"], id);
        assert_eq!(m["baseUrl"], *base, "{provider}");
        assert_eq!(m["reasoning"], false, "{provider}: not known to reason");
        assert!(m["contextWindow"].as_u64().unwrap() > 0);
        let state = g.ok(json!({"type": "get_state"}));
        assert_eq!(state["model"]["provider"], *provider);
        assert_eq!(state["model"]["id"], id);
        assert!(state.get("modelsError").is_none(), "{state}");
    }
    // A built-in entry still wins over the defaults.
    let m =
        g.ok(json!({"type": "set_model", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}));
    assert_eq!(m["reasoning"], true);
}

#[test]
fn a_named_provider_without_its_key_is_refused() {
    let mut g = gjc().env("OPENROUTER_API_KEY", "").spawn();
    let r = g.request(json!({"type": "set_model", "provider": "openrouter", "modelId": "a/b"}));
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "No API key for openrouter/a/b");
}

#[test]
fn the_command_line_names_a_provider_and_any_model() {
    let mut g = gjc()
        .env("GROQ_API_KEY", "test-key")
        .args(&["--provider", "groq", "--model", "some-new-model"])
        .spawn();
    let state = g.ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["provider"], "groq");
    assert_eq!(state["model"]["id"], "some-new-model");
    assert_eq!(state["model"]["baseUrl"], "https://api.groq.com/openai/v1");
}

#[test]
fn a_local_server_answers_without_a_key() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_text(&["hi"])));
    let mut g = gjc()
        .env("OLLAMA_BASE_URL", &format!("{}/v1", fake.base_url))
        .spawn();
    let m = g.ok(json!({"type": "set_model", "provider": "ollama", "modelId": "qwen3:8b"}));
    assert_eq!(m["baseUrl"], format!("{}/v1", fake.base_url));
    g.ok(json!({"type": "prompt", "message": "hello"}));
    g.run_events();
    let answer = g.messages().pop().unwrap();
    assert_eq!(answer["content"][0]["text"], "hi");
    let request = fake.request(TIMEOUT);
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.body["model"], "qwen3:8b");
    assert!(request.header("authorization").is_none(), "no key is sent");
}

#[test]
fn discovery_lists_the_models_of_local_and_configured_servers() {
    let ollama = FakeProvider::start();
    let gateway = FakeProvider::start();
    let list = |ids: &[&str]| {
        let data: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "object": "model"}))
            .collect();
        Reply::status(200, &json!({"object": "list", "data": data}).to_string())
    };
    ollama.push(list(&["qwen3:8b", "llama3.2"]));
    gateway.push(list(&["team/coder"]));
    let (_agent, builder) = discovering("gateway", &gateway, "gw-secret");
    let mut g = builder
        .env("OLLAMA_BASE_URL", &format!("{}/v1", ollama.base_url))
        .spawn();
    let listed = |g: &mut crate::support::Gjc| -> Vec<String> {
        let d = g.ok(json!({"type": "get_available_models"}));
        d["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{}/{}",
                    m["provider"].as_str().unwrap(),
                    m["id"].as_str().unwrap()
                )
            })
            .collect()
    };
    let first = listed(&mut g);
    for expected in ["ollama/qwen3:8b", "ollama/llama3.2", "gateway/team/coder"] {
        assert!(
            first.iter().any(|m| m == expected),
            "{expected} in {first:?}"
        );
    }
    let asked = ollama.request(TIMEOUT);
    assert_eq!(
        (asked.method.as_str(), asked.path.as_str()),
        ("GET", "/v1/models")
    );
    let asked = gateway.request(TIMEOUT);
    assert_eq!(asked.path, "/v1/models");
    assert_eq!(asked.header("authorization"), Some("Bearer gw-secret"));
    // The answers are kept: the second call asks nobody and lists the same models.
    assert_eq!(listed(&mut g), first);
    assert!(ollama.try_request().is_none() && gateway.try_request().is_none());
    // A listed model is selectable like any other id.
    let m = g.ok(json!({"type": "set_model", "provider": "ollama", "modelId": "llama3.2"}));
    assert_eq!(m["baseUrl"], format!("{}/v1", ollama.base_url));
}

#[test]
fn a_slow_server_being_asked_for_its_models_holds_up_no_other_command() {
    let slow = FakeProvider::start();
    let (release, held) = crossbeam_channel::bounded::<()>(0);
    let list = json!({"object": "list", "data": [{"id": "late-model", "object": "model"}]});
    let mut reply = Reply::status(200, &list.to_string());
    reply.chunks.insert(0, Chunk::Gate(held));
    slow.push(reply);
    let (_agent, builder) = discovering("slow", &slow, "k");
    let mut g = builder.spawn();
    g.client
        .send(&json!({"id": "models", "type": "get_available_models"}))
        .unwrap();
    g.client
        .send(&json!({"id": "again", "type": "get_available_models"}))
        .unwrap();
    assert_eq!(slow.request(TIMEOUT).path, "/v1/models");
    // The server has the request and holds its answer; the session still serves commands.
    let state = g.request(json!({"id": "state", "type": "get_state"}));
    assert_eq!(state["success"], true, "{state}");
    g.ok(json!({"type": "abort"}));
    release.send(()).unwrap();
    // Both waiting requests get the one discovery's list.
    for id in ["models", "again"] {
        let r = g
            .client
            .wait_for(|f| f["type"] == "response" && f["id"] == id, TIMEOUT)
            .unwrap();
        assert_eq!(r["success"], true, "{r}");
        let models = r["data"]["models"].as_array().unwrap();
        assert!(models.iter().any(|m| m["id"] == "late-model"), "{r}");
    }
    assert!(slow.try_request().is_none(), "the server was asked once");
}

#[test]
fn a_broken_models_json_is_reported_to_the_host() {
    let agent = tempfile::tempdir().unwrap();
    write_models_json(agent.path(), r#"{"providers": {"local": {"baseUrl": "#);
    let mut g = gjc()
        .env("GJC_CODING_AGENT_DIR", agent.path().to_str().unwrap())
        .env("ANTHROPIC_API_KEY", "test-key")
        .spawn();
    let state = g.ok(json!({"type": "get_state"}));
    let error = state["modelsError"]
        .as_str()
        .expect("modelsError in get_state");
    assert!(
        error.contains("models.json") && error.contains("invalid"),
        "{error}"
    );
    let d = g.ok(json!({"type": "get_available_models"}));
    assert_eq!(d["modelsError"], error);
    // The built-in providers still work.
    g.ok(json!({"type": "set_model", "provider": "anthropic", "modelId": "claude-haiku-4-5"}));
}

#[test]
fn an_unknown_compat_key_rejects_the_file() {
    let (_agent, builder) = with_models_json(
        json!({"providers": {"local": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions",
            "compat": {"supportsDeveloperRole": false, "thinkingFormat": "qwen"}, "models": [{"id": "m"}]}}}),
    );
    let mut g = builder.spawn();
    let state = g.ok(json!({"type": "get_state"}));
    let error = state["modelsError"].as_str().unwrap();
    assert!(
        error.contains("provider local: compat.thinkingFormat is not supported"),
        "{error}"
    );
    let r = g.request(json!({"type": "set_model", "provider": "local", "modelId": "m"}));
    assert_eq!(
        r["error"], "Model not found: local/m",
        "the file is not applied"
    );
}

#[test]
fn compat_keys_shape_the_request() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(openai_text(&["ok"])));
    let (_agent, builder) = with_models_json(
        json!({"providers": {"local": {"baseUrl": format!("{}/v1", fake.base_url), "api": "openai-completions",
            "compat": {"maxTokensField": "max_completion_tokens", "supportsUsageInStreaming": false},
            "models": [{"id": "m", "maxTokens": 1000}]}}}),
    );
    let mut g = builder
        .args(&["--provider", "local", "--model", "m"])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "hello"}));
    g.run_events();
    let body = fake.request(TIMEOUT).body;
    assert_eq!(body["max_completion_tokens"], 1000);
    assert!(body.get("max_tokens").is_none(), "{body}");
    assert!(body.get("stream_options").is_none(), "{body}");
}

#[test]
fn an_anthropic_proxy_is_configured_by_its_api_root() {
    let fake = FakeProvider::start();
    fake.push(Reply::sse(anthropic_text(None, "proxied")));
    // pi's convention: the root, without `/v1`.
    let (_agent, builder) = with_models_json(
        json!({"providers": {"anthropic": {"baseUrl": fake.base_url, "apiKey": "proxy-key"}}}),
    );
    let mut g = builder
        .args(&["--provider", "anthropic", "--model", "claude-sonnet-4-5"])
        .spawn();
    g.ok(json!({"type": "prompt", "message": "hello"}));
    g.run_events();
    let request = fake.request(TIMEOUT);
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("proxy-key"));
}
