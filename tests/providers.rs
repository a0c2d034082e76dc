//! Recorded provider streams (tests/fixtures/providers, see its README): decoded whole and split
//! at every byte offset, served over loopback HTTP whole and one byte per chunk, and checked
//! against the expected message. Then what the next request sends back: signatures, reasoning
//! items and thought signatures, byte-exact.

use std::io::{BufReader, Read};

use ::gjc::protocol::message::{AssistantMessage, Content, StopReason};
use ::gjc::provider::catalog::Catalog;
use ::gjc::provider::{http, ProviderRequest};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::support::{gjc, Chunk, FakeProvider, Reply, TIMEOUT};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/providers/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if !name.ends_with(".jsonl") {
        return raw;
    }
    // One data payload per line; Responses events also get their `event:` line.
    let mut out = String::new();
    for line in String::from_utf8(raw)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let v: Value = serde_json::from_str(line).unwrap();
        out.push_str(&format!(
            "event: {}\ndata: {line}\n\n",
            v["type"].as_str().unwrap()
        ));
    }
    out.into_bytes()
}

fn sha(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn request(provider: &str) -> ProviderRequest {
    let mut catalog = Catalog::builtin();
    catalog
        .merge_models_json(&json!({"providers": {
            "anthropic-x": {"baseUrl": "http://127.0.0.1:1", "api": "anthropic-messages", "models": [{"id": "m", "reasoning": true}]},
            "openai-x": {"baseUrl": "http://127.0.0.1:1", "api": "openai-completions", "models": [{"id": "m", "reasoning": true}]},
            "responses-x": {"baseUrl": "http://127.0.0.1:1", "api": "openai-responses", "models": [{"id": "m", "reasoning": true}]},
            "google-x": {"baseUrl": "http://127.0.0.1:1", "api": "google-generative-ai", "models": [{"id": "m", "reasoning": true}]}
        }})
        .to_string())
        .unwrap();
    ProviderRequest {
        model: catalog.find(provider, "m").unwrap().clone(),
        api_key: None,
        system_prompt: String::new(),
        messages: Vec::new(),
        history: None,
        tools: Vec::new().into(),
        thinking: "off",
        session_id: "s".into(),
        scripted: None,
        limits: Default::default(),
    }
}

struct Case {
    file: &'static str,
    provider: &'static str,
    check: fn(&AssistantMessage),
}

fn block<'a>(m: &'a AssistantMessage, kind: &str) -> Vec<&'a Content> {
    m.content
        .iter()
        .filter(|c| {
            matches!(
                (kind, c),
                ("text", Content::Text { .. })
                    | ("thinking", Content::Thinking { .. })
                    | ("call", Content::ToolCall(_))
            )
        })
        .collect()
}

fn text_of(c: &Content) -> &str {
    match c {
        Content::Text { text, .. } => text,
        Content::Thinking { thinking, .. } => thinking,
        _ => "",
    }
}

fn only_call(m: &AssistantMessage) -> &::gjc::protocol::message::ToolCall {
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{:?}", m.content);
    calls[0]
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            file: "anthropic-thinking-text.sse",
            provider: "anthropic-x",
            check: |m| {
                let t = block(m, "thinking");
                assert_eq!(
                    (text_of(t[0]).len(), sha(text_of(t[0])).as_str()),
                    (
                        202,
                        "18c2c6e0236da2b1a3064d5b63229aaafd9d7f0ada42d6737020cb2837ee1380"
                    )
                );
                let Content::Thinking {
                    thinking_signature: Some(sig),
                    ..
                } = t[0]
                else {
                    panic!("no signature")
                };
                assert_eq!(
                    (sig.len(), sha(sig).as_str()),
                    (
                        504,
                        "e2385f7486c5cf36abe909081fa9588d8a62e43339f699537f99e9b8a60e57a2"
                    )
                );
                let x = block(m, "text");
                assert_eq!(
                    (text_of(x[0]).len(), sha(text_of(x[0])).as_str()),
                    (
                        1021,
                        "1b0c432c3a48cc2829d6ff2b6e2c0f62881416d4583337d6f8a8a9a48ad73dfc"
                    )
                );
                assert_eq!(m.stop_reason, StopReason::Stop);
                assert_eq!(
                    (
                        m.usage.input,
                        m.usage.cache_read,
                        m.usage.cache_write,
                        m.usage.output
                    ),
                    (43, 0, 0, 282)
                );
            },
        },
        Case {
            file: "anthropic-tool-use.sse",
            provider: "anthropic-x",
            check: |m| {
                assert_eq!(m.text(), "I'll check the current weather in Paris for you.");
                let c = only_call(m);
                assert_eq!(
                    (c.id.as_str(), c.name.as_str()),
                    ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather")
                );
                assert_eq!(c.arguments, json!({"location": "Paris"}));
                assert_eq!(m.stop_reason, StopReason::ToolUse);
                assert_eq!((m.usage.input, m.usage.output), (377, 65));
            },
        },
        Case {
            file: "openai-chat-tool-call-usage.sse",
            provider: "openai-x",
            check: |m| {
                assert_eq!(m.text(), "");
                let c = only_call(m);
                assert_eq!(
                    (c.id.as_str(), c.name.as_str()),
                    ("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital")
                );
                assert_eq!(c.arguments, json!({"country": "UK"}));
                assert_eq!(m.stop_reason, StopReason::ToolUse);
                assert_eq!(
                    (m.usage.input, m.usage.output, m.usage.cache_read),
                    (53, 15, 0)
                );
            },
        },
        Case {
            file: "deepseek-reasoning-content.sse",
            provider: "openai-x",
            check: |m| {
                let t = block(m, "thinking");
                assert_eq!(
                    (text_of(t[0]).len(), sha(text_of(t[0])).as_str()),
                    (
                        882,
                        "d29146ea4f40dfde7b6155babd3d948397e1b174950e603ef18518f0ff85585a"
                    )
                );
                assert_eq!(m.text(), "Hello there! 😊 How can I help you today?");
                assert_eq!(
                    sha(&m.text()),
                    "cf0e60278f7fbdc36fdaf5630f08ec831d6d051d936563171e86258ad95ae574"
                );
                assert_eq!(m.stop_reason, StopReason::Stop);
                assert_eq!(
                    (m.usage.input, m.usage.output, m.usage.reasoning_tokens),
                    (6, 212, Some(198))
                );
            },
        },
        Case {
            file: "openai-responses-reasoning-function-call.sse",
            provider: "responses-x",
            check: |m| {
                let t = block(m, "thinking");
                let Content::Thinking {
                    thinking_signature: Some(item),
                    item_id,
                    ..
                } = t[0]
                else {
                    panic!("no reasoning item")
                };
                assert_eq!(
                    item_id.as_deref(),
                    Some("rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405")
                );
                let item: Value = serde_json::from_str(item).unwrap();
                let enc = item["encrypted_content"].as_str().unwrap();
                assert_eq!(
                    (enc.len(), sha(enc).as_str()),
                    (
                        3896,
                        "7ca4dc4d7bc83156ac67305e5cb76ae9dc95e4f85bc46178e748eed5da4bcc50"
                    )
                );
                let c = only_call(m);
                assert_eq!(c.id, "call_CWXgs68YprAjp6t0371hiPOI|fc_0050471a34b36ae60068c97bf19d9c819590eaf42c0edc1042");
                assert_eq!(
                    (c.name.as_str(), &c.arguments),
                    ("final_result", &json!({"result": 6666}))
                );
                assert_eq!(m.stop_reason, StopReason::ToolUse);
                assert_eq!(
                    (m.usage.input, m.usage.output, m.usage.reasoning_tokens),
                    (53, 469, Some(448))
                );
            },
        },
        Case {
            file: "openai-responses-summary-function-call.jsonl",
            provider: "responses-x",
            check: |m| {
                let t = block(m, "thinking");
                assert_eq!(
                    (text_of(t[0]).len(), sha(text_of(t[0])).as_str()),
                    (
                        163,
                        "e8c4cd892aeccd1f8e73cda6a54a4a99b2a196820ce3b796f249d2aabb14a695"
                    )
                );
                let Content::Thinking {
                    thinking_signature: Some(item),
                    ..
                } = t[0]
                else {
                    panic!()
                };
                let item: Value = serde_json::from_str(item).unwrap();
                let enc = item["encrypted_content"].as_str().unwrap();
                assert_eq!(
                    (enc.len(), sha(enc).as_str()),
                    (
                        1060,
                        "b82eda9fcb40aaf58c56db5016e1511855f6bb6c1fb00a4f07ba2c43d0ad468d"
                    )
                );
                let c = only_call(m);
                assert_eq!(c.id, "call_AB6AaRZ1FYZB2RwS6A5vbdqn|fc_01830d662ab3856501693c32151234819091cfca267e98cc5f");
                assert_eq!(c.arguments, json!({"a": 12, "b": 7, "op": "add"}));
                assert_eq!(m.stop_reason, StopReason::ToolUse);
                assert_eq!((m.usage.input, m.usage.output), (134, 28));
            },
        },
        Case {
            file: "gemini-function-call-thought-signature.sse",
            provider: "google-x",
            check: |m| {
                let c = only_call(m);
                assert_eq!((c.name.as_str(), &c.arguments), ("get_country", &json!({})));
                assert!(!c.id.is_empty(), "an id is synthesized");
                let sig = c.thought_signature.as_deref().unwrap();
                assert_eq!(
                    (sig.len(), sha(sig).as_str()),
                    (
                        1408,
                        "5d9ba8d754fc1f7dfcc0c08f3e3f89c6f9f3e7c6dba55d7c387cc5d367ea67ce"
                    )
                );
                assert_eq!(m.text(), "");
                assert_eq!(m.stop_reason, StopReason::ToolUse);
                assert_eq!((m.usage.input, m.usage.output), (29, 212));
                assert_eq!(m.response_id.as_deref(), Some("QUVVadTSNJ6_qtsPvN7J8Q0"));
            },
        },
        Case {
            file: "gemini-thinking-text.sse",
            provider: "google-x",
            check: |m| {
                let t = block(m, "thinking");
                assert_eq!(
                    (text_of(t[0]).len(), sha(text_of(t[0])).as_str()),
                    (
                        1575,
                        "1bf501f690cde7d3a87b3ba1a0dd9061cccb49abc397f46fbfec08abfa507dd6"
                    )
                );
                let x = block(m, "text");
                assert_eq!(
                    (text_of(x[0]).len(), sha(text_of(x[0])).as_str()),
                    (
                        1938,
                        "8c4308d5109d741f711e414af671ed9e2f61492c45fb0d3e99e5c81007336546"
                    )
                );
                let Content::Text {
                    text_signature: Some(sig),
                    ..
                } = x[0]
                else {
                    panic!("no signature on the text")
                };
                assert_eq!(
                    (sig.len(), sha(sig).as_str()),
                    (
                        6152,
                        "e99c40ab9d8666d57555075f273dd5a101220c44e4a76d338564d2799d934766"
                    )
                );
                assert_eq!(m.stop_reason, StopReason::Stop);
                assert_eq!((m.usage.input, m.usage.output), (34, 1256));
                assert_eq!(m.response_id.as_deref(), Some("beHBaJfEMIi-qtsP3769-Q8"));
            },
        },
    ]
}

/// Gemini sends no call ids; the synthesized ones hold a timestamp.
fn without_synthetic_ids(m: &AssistantMessage) -> Vec<Content> {
    m.content
        .iter()
        .map(|c| match c {
            Content::ToolCall(call) if m.api == "google-generative-ai" => {
                Content::ToolCall(::gjc::protocol::message::ToolCall {
                    id: String::new(),
                    ..call.clone()
                })
            }
            other => other.clone(),
        })
        .collect()
}

/// Hands out the body in two reads split at `at`, so every line and UTF-8 boundary gets cut.
struct Split<'a> {
    parts: [&'a [u8]; 2],
}

impl Read for Split<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let part = if self.parts[0].is_empty() {
            &mut self.parts[1]
        } else {
            &mut self.parts[0]
        };
        let n = part.len().min(buf.len());
        buf[..n].copy_from_slice(&part[..n]);
        *part = &part[n..];
        Ok(n)
    }
}

fn sse_events(reader: impl std::io::BufRead) -> Vec<::gjc::provider::sse::SseEvent> {
    let mut sse = ::gjc::provider::sse::SseReader::new(reader);
    std::iter::from_fn(|| sse.next_event().unwrap()).collect()
}

/// The decoders see whole events only, so a body split anywhere must yield the same events as
/// the whole body; the whole body must decode to the expected message.
#[test]
fn every_fixture_decodes_whole_and_split_at_every_byte_offset() {
    for case in cases() {
        let body = fixture(case.file);
        let req = request(case.provider);
        let whole = http::decode_body(&req, BufReader::new(&body[..]))
            .unwrap_or_else(|e| panic!("{}: {}", case.file, e.message));
        (case.check)(&whole);
        let expected = sse_events(BufReader::new(&body[..]));
        for at in 0..=body.len() {
            let reader = BufReader::with_capacity(
                body.len().max(1),
                Split {
                    parts: [&body[..at], &body[at..]],
                },
            );
            assert!(
                sse_events(reader) == expected,
                "{} split at {at}",
                case.file
            );
        }
        // A few splits decoded end to end as well, including inside multi-byte characters.
        let utf8_inner = body
            .iter()
            .position(|b| *b >= 0x80 && *b < 0xc0)
            .unwrap_or(body.len() / 2);
        for at in [1, utf8_inner, body.len() / 3, body.len() - 1] {
            let reader = BufReader::with_capacity(
                body.len(),
                Split {
                    parts: [&body[..at], &body[at..]],
                },
            );
            let m = http::decode_body(&req, reader)
                .unwrap_or_else(|e| panic!("{} split at {at}: {}", case.file, e.message));
            assert_eq!(
                without_synthetic_ids(&m),
                without_synthetic_ids(&whole),
                "{} split at {at}",
                case.file
            );
        }
    }
}

fn provider_args(provider: &str) -> [&'static str; 4] {
    let p = match provider {
        "anthropic-x" => "fake-anthropic",
        "openai-x" => "fake-openai",
        "responses-x" => "fake-responses",
        _ => "fake-google",
    };
    ["--provider", p, "--model", "m"]
}

/// The assistant message gjc reports for a fixture served over HTTP in `chunks`.
fn served(
    case: &Case,
    chunks: Vec<Chunk>,
) -> (
    AssistantMessage,
    Option<crate::support::fake_provider::Request>,
) {
    let fake = FakeProvider::start();
    fake.push(Reply::sse_chunks(chunks));
    // A tool-calling fixture makes gjc send a second request; end the run there.
    fake.push(Reply::status(400, r#"{"error":{"message":"end of test"}}"#));
    let mut g = gjc()
        .provider(&fake.base_url)
        .args(&provider_args(case.provider))
        .spawn();
    g.ok(json!({"type": "prompt", "message": "hi"}));
    g.run_events();
    let messages = g.messages();
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant message")
        .clone();
    fake.request(TIMEOUT);
    // The run has ended, so a second request (tool-calling fixtures) has already arrived.
    (
        serde_json::from_value(assistant).unwrap(),
        fake.try_request(),
    )
}

#[test]
fn fixtures_served_over_http_whole_and_byte_by_byte() {
    for case in cases() {
        let body = fixture(case.file);
        let (m, _) = served(&case, vec![Chunk::Bytes(body.clone())]);
        (case.check)(&m);
        if body.len() <= 20_000 {
            let (m, _) = served(&case, body.iter().map(|b| Chunk::Bytes(vec![*b])).collect());
            (case.check)(&m);
        }
    }
}

fn replay(file: &str, provider: &str) -> Value {
    let case = cases()
        .into_iter()
        .find(|c| c.file == file && c.provider == provider)
        .unwrap();
    let (_, next) = served(&case, vec![Chunk::Bytes(fixture(file))]);
    next.expect("a second request").body
}

#[test]
fn responses_reasoning_item_is_replayed_byte_exact() {
    let body = replay(
        "openai-responses-reasoning-function-call.sse",
        "responses-x",
    );
    let input = body["input"].as_array().unwrap();
    let reasoning = input
        .iter()
        .find(|i| i["type"] == "reasoning")
        .expect("reasoning item replayed");
    let enc = reasoning["encrypted_content"].as_str().unwrap();
    assert_eq!(
        sha(enc),
        "7ca4dc4d7bc83156ac67305e5cb76ae9dc95e4f85bc46178e748eed5da4bcc50"
    );
    let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!(call["call_id"], "call_CWXgs68YprAjp6t0371hiPOI");
    assert_eq!(
        call["id"],
        "fc_0050471a34b36ae60068c97bf19d9c819590eaf42c0edc1042"
    );
    let output = input
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(output["call_id"], "call_CWXgs68YprAjp6t0371hiPOI");
    assert_eq!(output["output"], "Tool final_result not found");
}

#[test]
fn gemini_thought_signature_is_replayed_on_its_part() {
    let body = replay("gemini-function-call-thought-signature.sse", "google-x");
    let model = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["role"] == "model")
        .unwrap();
    let part = model["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .unwrap();
    assert_eq!(
        sha(part["thoughtSignature"].as_str().unwrap()),
        "5d9ba8d754fc1f7dfcc0c08f3e3f89c6f9f3e7c6dba55d7c387cc5d367ea67ce"
    );
    let response = &body["contents"][2]["parts"][0]["functionResponse"];
    assert_eq!(response["name"], "get_country");
    assert!(response["response"]["error"].is_string());
}

#[test]
fn anthropic_tool_use_round_trip() {
    let body = replay("anthropic-tool-use.sse", "anthropic-x");
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(
        msgs[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_01NRLabsLyVHZPKxbKvkfSMn", "name": "get_weather", "input": {"location": "Paris"}})
    );
    let result = &msgs[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01NRLabsLyVHZPKxbKvkfSMn");
    assert_eq!(result["is_error"], true);
}

#[test]
fn deepseek_reasoning_content_is_sent_back() {
    let case = Case {
        file: "openai-chat-tool-call-usage.sse",
        provider: "openai-x",
        check: |_| {},
    };
    let (_, next) = served(&case, vec![Chunk::Bytes(fixture(case.file))]);
    let body = next.expect("a second request").body;
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(
        msgs[2]["tool_calls"][0]["function"]["arguments"],
        "{\"country\":\"UK\"}"
    );
    assert_eq!(
        msgs[2]["reasoning_content"], "",
        "reasoning models get their (empty) reasoning back"
    );
    assert_eq!(msgs[3]["role"], "tool");
}
