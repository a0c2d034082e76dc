use std::io::Read;

use serde_json::{json, Value};

use super::*;
use crate::provider::wire::{replay_history, WireApi};
use crate::provider::ProviderRequest;

const APIS: [Api; 4] = [
    Api::AnthropicMessages,
    Api::OpenAiCompletions,
    Api::OpenAiResponses,
    Api::Google,
];

/// The wire API of one of [`APIS`].
fn wire_of(api: Api) -> &'static dyn WireApi {
    api.wire().expect("an API spoken over HTTP")
}

fn model(api: Api, id: &str) -> Model {
    test_model(api, id)
}

fn message(v: Value) -> AgentMessage {
    serde_json::from_value(v).unwrap()
}

fn assistant(api: Api, id: &str, stop: &str, content: Value) -> AgentMessage {
    message(
        json!({"role": "assistant", "content": content, "api": api.as_str(), "provider": "p",
        "model": id, "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}},
        "stopReason": stop, "timestamp": 1}),
    )
}

fn result(id: &str, text: &str, error: bool) -> AgentMessage {
    message(
        json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
        "content": [{"type": "text", "text": text}], "isError": error, "timestamp": 1}),
    )
}

/// A conversation that exercises every rule of the history: merged roles, signed and foreign
/// thinking, a failed turn, a result for no call, calls left open (closed by the next message and
/// at the end), images, a user shell command and a compaction summary.
fn conversation(api: Api) -> Vec<AgentMessage> {
    let signed = if api == Api::OpenAiResponses {
        r#"{"type":"reasoning","id":"rs_1","summary":[]}"#
    } else {
        "sig-1"
    };
    vec![
        message(
            json!({"role": "compactionSummary", "summary": "earlier work", "tokensBefore": 10, "timestamp": 1}),
        ),
        message(
            json!({"role": "user", "content": [{"type": "text", "text": "hi \u{2028} \"there\""}], "timestamp": 1}),
        ),
        message(
            json!({"role": "user", "content": [{"type": "text", "text": "look"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"}], "timestamp": 1}),
        ),
        assistant(
            api,
            "m",
            "toolUse",
            json!([{"type": "thinking", "thinking": "plan", "thinkingSignature": signed},
            {"type": "text", "text": "reading", "textSignature": "msg_1"},
            {"type": "toolCall", "id": "c1|fc_1", "name": "read", "arguments": {"path": "a"}},
            {"type": "toolCall", "id": "c2|fc_2", "name": "read", "arguments": {"path": "b"}}]),
        ),
        result("c1|fc_1", "file a", false),
        result("zz", "a result for no call", false),
        result("c2|fc_2", "", true),
        assistant(api, "m", "error", json!([{"type": "text", "text": "half"}])),
        assistant(
            api,
            "other",
            "toolUse",
            json!([{"type": "thinking", "thinking": "foreign", "thinkingSignature": "sig-x"},
            {"type": "toolCall", "id": "c3", "name": "read", "arguments": {}}]),
        ),
        // c3 has no result: the next message closes it with a synthetic one.
        message(
            json!({"role": "bashExecution", "command": "ls", "output": "a b", "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": 1}),
        ),
        assistant(api, "m", "stop", json!([])),
        assistant(
            api,
            "m",
            "toolUse",
            json!([{"type": "toolCall", "id": "c4", "name": "read", "arguments": {}}]),
        ),
        // c4 is still open at the end.
    ]
}

fn request(model: &Model, messages: &[AgentMessage], history: Option<History>) -> ProviderRequest {
    ProviderRequest {
        model: model.clone(),
        api_key: Some("k".into()),
        system_prompt: "system".into(),
        messages: messages.to_vec(),
        history,
        tools: vec![crate::provider::ToolSpec {
            name: "read".into(),
            description: "read a file".into(),
            parameters: json!({"type": "object"}),
        }]
        .into(),
        thinking: "high",
        session_id: "s".into(),
        scripted: None,
        limits: Default::default(),
    }
}

fn body(req: &ProviderRequest) -> Vec<u8> {
    let call = wire_of(req.model.api).request(req);
    let len = call.body.len();
    let whole = call.body.to_vec();
    // Read in small steps, so that reads end inside segments and span several.
    let mut reader = call.body.into_reader();
    let (mut read, mut buf) = (Vec::new(), [0u8; 7]);
    loop {
        match reader.read(&mut buf).unwrap() {
            0 => break,
            n => read.extend_from_slice(&buf[..n]),
        }
    }
    assert_eq!(read, whole);
    assert_eq!(read.len(), len, "the declared length is the length written");
    read
}

fn history_key(api: Api) -> &'static str {
    match api {
        Api::OpenAiResponses => "input",
        Api::Google => "contents",
        _ => "messages",
    }
}

/// The history the way it was built before pieces were kept: one JSON tree of every message,
/// merged and marked in place.
fn reference_history(model: &Model, messages: &[AgentMessage]) -> Vec<Value> {
    let wire = wire_of(model.api);
    let layout = wire.layout();
    let mut out: Vec<Value> = Vec::new();
    for m in replay_history(messages) {
        let (role, items) = wire.encode_message(&m, model);
        match layout {
            Layout::Flat => out.extend(items),
            Layout::Merged { field, .. } if !items.is_empty() => {
                match out.last_mut().filter(|last| last["role"] == role) {
                    Some(last) => last[field].as_array_mut().unwrap().extend(items),
                    None => out.push(json!({"role": role, field: items})),
                }
            }
            Layout::Merged { .. } => {}
        }
    }
    if let Layout::Merged {
        field,
        mark_last: true,
    } = layout
    {
        if let Some(block) = out
            .last_mut()
            .and_then(|m| m[field].as_array_mut())
            .and_then(|c| c.last_mut())
        {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    out
}

/// The body serde_json writes for the same request as one tree.
fn reference_body(req: &ProviderRequest, assembled: &[u8]) -> Vec<u8> {
    let key = history_key(req.model.api);
    let mut tree: Value = serde_json::from_slice(assembled).unwrap();
    let mut array = reference_history(&req.model, &req.messages);
    if req.model.api == Api::OpenAiCompletions {
        let system = tree[key][0].clone();
        assert_eq!(system["content"], "system");
        array.insert(0, system);
    }
    tree[key] = Value::Array(array);
    serde_json::to_vec(&tree).unwrap()
}

#[test]
fn assembled_bodies_are_the_same_json_as_one_tree_for_every_api() {
    for api in APIS {
        let model = model(api, "m");
        let messages = conversation(api);
        for n in 0..=messages.len() {
            let req = request(&model, &messages[..n], None);
            let fresh = body(&req);
            // The same JSON value as the tree. Key order may differ: serde_json keeps insertion
            // order in this build (`preserve_order`, enabled by the ACP schema crate), and the
            // assembled body writes each piece's keys as that piece was encoded.
            let parsed: Value = serde_json::from_slice(&fresh).unwrap();
            let reference: Value = serde_json::from_slice(&reference_body(&req, &fresh)).unwrap();
            assert_eq!(parsed, reference, "{api:?} with {n} messages");
        }
    }
}

#[test]
fn a_growing_context_reuses_its_pieces_and_matches_a_fresh_encoding() {
    for api in APIS {
        let model = model(api, "m");
        let messages = conversation(api);
        let mut cache = HistoryCache::default();
        let mut previous: Option<History> = None;
        for n in 0..=messages.len() {
            let history = cache.encode(&model, &messages[..n]);
            assert_held_once(api, &cache, &history);
            let cached = body(&request(&model, &messages[..n], Some(history.clone())));
            let fresh = body(&request(&model, &messages[..n], None));
            assert_eq!(cached, fresh, "{api:?} with {n} messages");
            if let Some(before) = previous.filter(|p| p.piece_count() > 0) {
                assert!(
                    history.shares_piece(&before, 0),
                    "{api:?}: the first message was encoded again"
                );
            }
            previous = Some(history);
        }
    }
}

#[test]
fn a_model_switch_encodes_again_and_a_thinking_change_does_not() {
    for api in APIS {
        let (m, other) = (model(api, "m"), model(api, "other"));
        let messages = conversation(api);
        let mut cache = HistoryCache::default();
        let first = cache.encode(&m, &messages);
        // Same messages, other model: the signed thinking of "m" is no longer replayed as such.
        let switched = cache.encode(&other, &messages);
        assert!(!switched.shares_piece(&first, 0));
        let fresh_other = body(&request(&other, &messages, None));
        assert_eq!(
            body(&request(&other, &messages, Some(switched))),
            fresh_other
        );
        assert_ne!(body(&request(&m, &messages, None)), fresh_other);
        // And back.
        let back = cache.encode(&m, &messages);
        assert_eq!(
            body(&request(&m, &messages, Some(back.clone()))),
            body(&request(&m, &messages, None))
        );
        // The thinking level is part of the request's top level only: the pieces stay.
        let again = cache.encode(&m, &messages);
        assert!(again.shares_piece(&back, 0));
        let mut low = request(&m, &messages, Some(again));
        low.thinking = "low";
        let mut low_fresh = request(&m, &messages, None);
        low_fresh.thinking = "low";
        assert_eq!(body(&low), body(&low_fresh));
        assert_ne!(body(&low), body(&request(&m, &messages, None)), "{api:?}");
    }
}

#[test]
fn a_shorter_context_is_encoded_from_scratch() {
    let model = model(Api::AnthropicMessages, "m");
    let messages = conversation(Api::AnthropicMessages);
    let mut cache = HistoryCache::default();
    cache.encode(&model, &messages);
    let shorter = &messages[3..5];
    let history = cache.encode(&model, shorter);
    assert_eq!(cache.kept(), replay_history(shorter).len() - 1);
    assert_eq!(
        body(&request(&model, shorter, Some(history))),
        body(&request(&model, shorter, None))
    );
}

#[test]
fn appending_extends_the_kept_list_in_place_unless_a_request_still_holds_it() {
    let model = model(Api::OpenAiCompletions, "m");
    let messages = conversation(Api::OpenAiCompletions);
    let mut cache = HistoryCache::default();
    let list = |c: &HistoryCache| Arc::as_ptr(&c.pieces);

    // The request of the last turn is gone: the next turn appends to the same list.
    drop(cache.encode(&model, &messages[..2]));
    let (before, kept) = (list(&cache), cache.kept());
    drop(cache.encode(&model, &messages[..4]));
    assert!(cache.kept() > kept, "nothing was appended");
    assert_eq!(list(&cache), before, "the kept list was copied");

    // A request still in flight keeps the list it was given, unchanged.
    let held = cache.encode(&model, &messages[..4]);
    let held_items = held.items().len();
    let grown = cache.encode(&model, &messages);
    assert!(!Arc::ptr_eq(&held.kept, &grown.kept));
    assert_eq!(held.items().len(), held_items);
    assert!(grown.shares_piece(&held, 0));
    assert_eq!(
        body(&request(&model, &messages, Some(grown))),
        body(&request(&model, &messages, None))
    );
}

#[test]
fn a_flat_history_longer_than_a_chunk_reads_as_one_tree_while_requests_hold_its_chunks() {
    let big = "x".repeat(20_000);
    let mut messages = Vec::new();
    for i in 0..12 {
        messages.push(message(
            json!({"role": "user", "content": [{"type": "text", "text": format!("{i} {big}")}], "timestamp": i}),
        ));
    }
    for api in [Api::OpenAiCompletions, Api::OpenAiResponses] {
        let model = model(api, "m");
        let mut cache = HistoryCache::default();
        let mut held = Vec::new();
        for n in 1..=messages.len() {
            // Each request is kept while the next ones grow the last chunk.
            let history = cache.encode(&model, &messages[..n]);
            held.push((n, history.clone()));
            let req = request(&model, &messages[..n], Some(history));
            let cached = body(&req);
            let parsed: Value = serde_json::from_slice(&cached).unwrap();
            let reference: Value = serde_json::from_slice(&reference_body(&req, &cached)).unwrap();
            assert_eq!(parsed, reference, "{api:?} with {n} messages");
        }
        assert!(cache.flat.chunks.len() > 2, "the text spans several chunks");
        for (n, history) in held {
            let req = request(&model, &messages[..n], Some(history));
            assert_eq!(body(&req), body(&request(&model, &messages[..n], None)));
        }
    }
}

/// A flat layout's kept items are held once, as the flat text the bodies are written from; the
/// pieces keep only their place. Merged layouts keep the items in the pieces and no text.
fn assert_held_once(api: Api, cache: &HistoryCache, history: &History) {
    let in_pieces: usize = cache.pieces.iter().map(|p| p.items.len()).sum();
    let text: usize = cache.flat.chunks.iter().map(|c| c.len()).sum();
    let closing: usize = history.closing.iter().map(|p| p.items.len()).sum();
    let items = history.items();
    let kept = &items[..items.len() - closing];
    if matches!(wire_of(api).layout(), Layout::Flat) {
        assert_eq!(in_pieces, 0, "{api:?}");
        // Each kept item is in the text once, after its comma.
        assert_eq!(
            text,
            kept.iter().map(|i| i.len() + 1).sum::<usize>(),
            "{api:?}"
        );
    } else {
        assert_eq!((text, in_pieces), (0, kept.len()), "{api:?}");
    }
}

#[test]
fn every_http_api_has_a_wire_and_the_scripted_provider_none() {
    for api in APIS {
        assert!(api.wire().is_some(), "{api:?}");
    }
    assert!(Api::Scripted.wire().is_none());
    // Nothing is encoded for the scripted provider, and a body of it is refused, not decoded.
    let scripted = model(Api::Scripted, "s");
    let messages = [AgentMessage::User(
        crate::protocol::message::UserMessage::new("hi", &[]),
    )];
    assert!(History::fresh(&scripted, &messages).items().is_empty());
    let req = request(&scripted, &messages, None);
    let err = crate::provider::http::decode_body(&req, &b"data: {}\n\n"[..]).unwrap_err();
    assert!(err.message.contains("scripted"), "{}", err.message);
}
