//! JSON Schema of the wire, generated from the protocol types with `schemars`, which reads the
//! same serde attributes the (de)serializers do, so a schema cannot say something the types do
//! not. The files in `docs/schema/` are this module's output (`gjc --print-schema=NAME`); a test
//! fails when they are stale, and the integration tests validate every frame gjc writes
//! against them.
//!
//! - `commands.json`: one inbound line: a command (the `Command` union by `type`) or a reply to
//!   a host callback.
//! - `responses.json`: a `response` frame, with `data` checked by `command`.
//! - `events.json`: an event frame's inner `payload.event` (`AgentEvent`, by `type`).
//! - `frames.json`: every outbound frame: `ready`, `response` (its `data` in responses.json),
//!   the event envelope (its `event` in events.json), and the host sub-protocol frames.
//!
//! Two shapes are written by hand rather than serialized from a type, and so are described
//! by hand here, in functions marked HAND-WRITTEN: the full `message_update` event
//! (`event::write_message_update`) and the compact `message_update` payload
//! (`transport/stdout.rs`), together with the event envelope around both.

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{json, Map, Value};

use super::command::Command;
use super::event::AgentEvent;
use super::host_reply::{HostToolResult, HostToolUpdate, HostUriResult, UiResponse};
use super::message::{AgentMessage, AssistantMessage, StreamEvent};
use super::outbound::{FlatFrame, Ready, Response, PROTOCOL_VERSION};
use super::reply;

/// The file names under `docs/schema/`, in a stable order.
pub const NAMES: [&str; 4] = ["commands", "responses", "events", "frames"];

const DRAFT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every schema file as `(name, schema)`, in [`NAMES`] order.
pub fn all() -> Vec<(&'static str, Value)> {
    NAMES
        .iter()
        .map(|name| {
            (
                *name,
                by_name(name).expect("every listed name has a schema"),
            )
        })
        .collect()
}

/// One schema file's value by its name (without `.json`).
pub fn by_name(name: &str) -> Option<Value> {
    Some(match name {
        "commands" => commands(),
        "responses" => responses(),
        "events" => events(),
        "frames" => frames(),
        _ => return None,
    })
}

/// The file text: pretty-printed with sorted keys and a final newline, so the output is the
/// same on every build whatever order a map kept its keys in.
pub fn render(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(&sorted(schema)).expect("a Value serializes");
    text.push('\n');
    text
}

/// Every file in one object keyed by file name (`commands.json`, ...): `gjc --print-schema`.
pub fn bundle() -> Value {
    Value::Object(
        all()
            .into_iter()
            .map(|(name, schema)| (format!("{name}.json"), schema))
            .collect(),
    )
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Inbound types are described as the decoder reads them (defaults make fields optional);
/// outbound ones as the writer writes them (a field is required unless it can be left out).
fn generator(inbound: bool) -> SchemaGenerator {
    let settings = SchemaSettings::draft2020_12();
    let settings = if inbound {
        settings.for_deserialize()
    } else {
        settings.for_serialize()
    };
    settings.into_generator()
}

/// A root schema: header, `oneOf` the given alternatives, and every definition they use.
fn root(
    mut gen: SchemaGenerator,
    title: &str,
    description: &str,
    body: Map<String, Value>,
) -> Value {
    let mut schema = Map::new();
    schema.insert("$schema".into(), DRAFT.into());
    schema.insert("title".into(), title.into());
    schema.insert("description".into(), description.into());
    schema.extend(body);
    schema.insert("$defs".into(), Value::Object(gen.take_definitions(true)));
    Value::Object(schema)
}

fn one_of(alternatives: Vec<Value>) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("oneOf".into(), Value::Array(alternatives));
    body
}

/// A `$ref` to `T`'s definition with `type` fixed to `tag` beside it.
fn tagged<T: JsonSchema>(gen: &mut SchemaGenerator, tag: &str) -> Value {
    let mut schema = gen.subschema_for::<T>().to_value();
    let object = schema
        .as_object_mut()
        .expect("a named type's schema is a $ref");
    object.insert("properties".into(), json!({ "type": { "const": tag } }));
    object.insert("required".into(), json!(["type"]));
    schema
}

fn commands() -> Value {
    let mut gen = generator(true);
    let alternatives = vec![
        gen.subschema_for::<Command>().to_value(),
        tagged::<UiResponse>(&mut gen, "extension_ui_response"),
        tagged::<HostToolUpdate>(&mut gen, "host_tool_update"),
        tagged::<HostToolResult>(&mut gen, "host_tool_result"),
        tagged::<HostUriResult>(&mut gen, "host_uri_result"),
    ];
    let mut body = one_of(alternatives);
    // Beside every command, not part of any params type: `decode.rs` reads it first.
    body.insert(
        "properties".into(),
        json!({ "id": { "description": "Any JSON value; echoed as the response's `id`." } }),
    );
    body.insert("required".into(), json!(["type"]));
    root(
        gen,
        "gjc inbound line",
        "One line a host writes to gjc's stdin: a command (by `type`, with an optional `id` \
         echoed in its response) or a reply to a host callback (routed by `id`, never answered). \
         Unknown fields are ignored; absent and null optional fields mean the same.",
        body,
    )
}

/// What a command's successful response carries as `data`.
enum Payload {
    /// No `data`: the command answers with success alone (or always fails in this build).
    None,
    /// `data` is always there, with this schema.
    Always(Schema),
    /// `data` may be left out; when there, it has this schema.
    Maybe(Schema),
}

/// `get_messages` copies messages out of the session file (`Data::Assembled`) instead of
/// serializing a type; this describes what that text is.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct MessageList {
    messages: Vec<AgentMessage>,
}

/// One row per command whose success carries `data`; every other command has none. A new
/// command with a payload and no row here fails the frame checks of the integration tests.
fn payload(gen: &mut SchemaGenerator, command: &str) -> Payload {
    use reply::*;
    let schema = match command {
        "new_session" | "switch_session" => gen.subschema_for::<Cancelled>(),
        "get_state" => gen.subschema_for::<SessionState>(),
        "set_todos" => gen.subschema_for::<TodoPhases<'static>>(),
        "set_host_tools" => gen.subschema_for::<ToolNames>(),
        "set_host_uri_schemes" => gen.subschema_for::<Schemes>(),
        "set_capabilities" => gen.subschema_for::<Capabilities>(),
        "set_sandbox" => gen.subschema_for::<crate::protocol::sandbox::SandboxState>(),
        "set_model" => gen.subschema_for::<ModelInfo>(),
        "cycle_model" => gen.subschema_for::<CycledModel>(),
        "get_available_models" => gen.subschema_for::<Models>(),
        "compact" => gen.subschema_for::<CompactionResult>(),
        "bash" => gen.subschema_for::<BashResult>(),
        "get_session_stats" => gen.subschema_for::<SessionStats>(),
        "export_html" => gen.subschema_for::<Exported>(),
        "branch" => gen.subschema_for::<BranchResult>(),
        "get_branch_messages" => gen.subschema_for::<BranchMessages>(),
        "get_last_assistant_text" => gen.subschema_for::<LastAssistantText>(),
        "get_messages" => gen.subschema_for::<MessageList>(),
        "list_sessions" => gen.subschema_for::<Sessions>(),
        "get_login_providers" => gen.subschema_for::<LoginProviders>(),
        "workflow_gate_response" => gen.subschema_for::<super::gate::GateResolution>(),
        "get_pending_workflow_gates" => gen.subschema_for::<super::gate::PendingGates>(),
        "negotiate_unattended" => gen.subschema_for::<UnattendedAccepted>(),
        "trust_project" => gen.subschema_for::<ProjectTrust>(),
        "list_mcp_servers" | "add_mcp_server" | "remove_mcp_server" | "restart_mcp_server" => {
            gen.subschema_for::<crate::protocol::mcp::McpServers>()
        }
        "checkpoint_for_handoff" => gen.subschema_for::<CheckpointReceipt>(),
        "handoff" => gen.subschema_for::<HandoffResult>(),
        // No payload for a model without thinking levels.
        "cycle_thinking_level" => return Payload::Maybe(gen.subschema_for::<ThinkingLevel>()),
        _ => return Payload::None,
    };
    Payload::Always(schema)
}

/// `if` a successful response to `command`, `then` its `data` rule.
fn data_rule(gen: &mut SchemaGenerator, command: &str) -> Value {
    let then = match payload(gen, command) {
        Payload::None => json!({ "not": { "required": ["data"] } }),
        Payload::Always(schema) => {
            json!({ "properties": { "data": schema }, "required": ["data"] })
        }
        Payload::Maybe(schema) => json!({ "properties": { "data": schema } }),
    };
    json!({
        "if": {
            "properties": { "command": { "const": command }, "success": { "const": true } },
            "required": ["command", "success"]
        },
        "then": then
    })
}

fn responses() -> Value {
    let mut gen = generator(false);
    let envelope = gen.subschema_for::<Response>().to_value();
    let rules: Vec<Value> = Command::NAMES
        .iter()
        .map(|command| data_rule(&mut gen, command))
        .collect();
    let mut body = Map::new();
    body.insert("allOf".into(), Value::Array(rules));
    body.extend(envelope.as_object().cloned().unwrap_or_default());
    root(
        gen,
        "gjc response",
        "A `response` frame. A success carries `data` as its command defines (no `data` for \
         commands without a payload); a failure carries `error`, a string, optionally prefixed \
         with a machine-readable code (`code: message`). `command` echoes the request's `type` \
         (`parse` for a line that is not a command).",
        body,
    )
}

fn events() -> Value {
    let mut gen = generator(false);
    let mut event = gen.root_schema_for::<AgentEvent>().to_value();
    replace_message_update(&mut event, message_update(&mut gen));
    let alternatives = event
        .get_mut("oneOf")
        .map(Value::take)
        .expect("AgentEvent is a tagged union");
    root(
        gen,
        "gjc event",
        "The inner event of an event frame (`payload.event`), by `type`. Event frames and their \
         envelope are in frames.json.",
        one_of(alternatives.as_array().cloned().unwrap_or_default()),
    )
}

/// Swaps the derived `message_update` alternative (the delta alone, as the type holds it) for
/// the shape the writer actually produces.
fn replace_message_update(event: &mut Value, written: Value) {
    let alternatives = event
        .get_mut("oneOf")
        .and_then(Value::as_array_mut)
        .expect("AgentEvent is a tagged union");
    let slot = alternatives
        .iter_mut()
        .find(|a| a.pointer("/properties/type/const") == Some(&json!("message_update")))
        .expect("AgentEvent has message_update");
    *slot = written;
}

/// HAND-WRITTEN: `event::write_message_update`. The partial message is the assistant message
/// as far as it has streamed, with its `role`; it appears as `message` and again as
/// `assistantMessageEvent.partial`.
fn message_update(gen: &mut SchemaGenerator) -> Value {
    let partial = partial_message(gen);
    let delta = gen.subschema_for::<StreamEvent>().to_value();
    json!({
        "description": "One streamed delta of the assistant message, with the message so far.",
        "type": "object",
        "properties": {
            "type": { "const": "message_update" },
            "message": partial,
            "assistantMessageEvent": {
                "allOf": [delta],
                "properties": { "partial": partial },
                "required": ["partial"]
            }
        },
        "required": ["type", "message", "assistantMessageEvent"]
    })
}

/// HAND-WRITTEN: the snapshot `transport/stdout.rs` serializes (`MessageRef::Assistant`).
fn partial_message(gen: &mut SchemaGenerator) -> Value {
    json!({
        "allOf": [gen.subschema_for::<AssistantMessage>().to_value()],
        "properties": { "role": { "const": "assistant" } },
        "required": ["role"]
    })
}

fn frames() -> Value {
    let mut gen = generator(false);
    let mut alternatives = vec![
        gen.subschema_for::<Ready>().to_value(),
        gen.subschema_for::<Response>().to_value(),
        event_envelope(&mut gen),
    ];
    let flat = gen.root_schema_for::<FlatFrame>().to_value();
    if let Some(Value::Array(variants)) = flat.get("oneOf") {
        alternatives.extend(variants.iter().cloned());
    }
    root(
        gen,
        "gjc outbound frame",
        "One line gjc writes to stdout. A response's `data` is in responses.json, an event \
         frame's `payload.event` in events.json.",
        one_of(alternatives),
    )
}

/// HAND-WRITTEN: the envelope `transport/stdout.rs` writes around every event, and the compact
/// `message_update` payload (opt-in: the delta and its block index, no snapshot).
fn event_envelope(gen: &mut SchemaGenerator) -> Value {
    let delta = gen.subschema_for::<StreamEvent>().to_value();
    json!({
        "description": "An agent event. `seq` counts event frames from 1, in the order written.",
        "type": "object",
        "properties": {
            "type": { "const": "event" },
            "protocol_version": { "const": PROTOCOL_VERSION },
            "session_id": { "type": "string" },
            "seq": { "type": "integer", "minimum": 1 },
            "frame_id": { "type": "string" },
            "payload": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {
                            "event_type": { "type": "string" },
                            "event": {
                                "type": "object",
                                "description": "events.json; its `type` equals `event_type`."
                            }
                        },
                        "required": ["event_type", "event"]
                    },
                    {
                        "description": "A compact message_update (`compact_message_update`).",
                        "type": "object",
                        "properties": {
                            "event_type": { "const": "message_update" },
                            "compact": { "const": true },
                            "message_id": { "type": "null" },
                            "content_index": { "type": ["integer", "null"], "minimum": 0 },
                            "assistantMessageEvent": delta
                        },
                        "required": [
                            "event_type", "compact", "message_id", "content_index",
                            "assistantMessageEvent"
                        ]
                    }
                ]
            }
        },
        "required": ["type", "protocol_version", "session_id", "seq", "frame_id", "payload"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::Content;

    fn validator(name: &str) -> jsonschema::Validator {
        jsonschema::validator_for(&by_name(name).unwrap()).expect("a valid schema")
    }

    fn assert_valid(v: &jsonschema::Validator, instance: &Value) {
        if let Err(e) = v.validate(instance) {
            panic!("{e} at {}\n  in {instance}", e.instance_path());
        }
    }

    #[test]
    fn every_file_compiles_and_renders_deterministically() {
        for (name, schema) in all() {
            jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(render(&schema), render(&by_name(name).unwrap()), "{name}");
        }
    }

    #[test]
    fn every_command_is_an_alternative_of_the_command_union() {
        let commands = validator("commands");
        for name in Command::NAMES {
            let mut line = json!({ "type": name, "id": "r1" });
            // Fill the required fields the way the decoder needs them, from the decoder's errors.
            fill_required(name, &mut line);
            assert_valid(&commands, &line);
        }
        assert!(!commands.is_valid(&json!({ "type": "prompt" })));
        assert!(!commands.is_valid(&json!({ "type": "set_model", "provider": "a" })));
        assert!(!commands.is_valid(&json!({ "type": "no_such_command" })));
    }

    /// Adds strings for the fields the decoder says are missing until it accepts the line, then
    /// checks the schema agrees with the decoder about that line.
    fn fill_required(name: &str, line: &mut Value) {
        for _ in 0..8 {
            match Command::decode(name, line.clone()).expect("a known command") {
                Ok(_) => return,
                Err(e) => {
                    let field = e.split('`').nth(1).unwrap_or_else(|| panic!("{name}: {e}"));
                    let value = match field {
                        "enabled" | "confirmed" => json!(true),
                        "phases" | "tools" | "schemes" => json!([]),
                        "authority" => json!({"incarnationDigest": "0".repeat(64),
                            "epochRevision": 1, "leaseId": 1, "deploymentGeneration": 1}),
                        "lane" => json!("main"),
                        _ => json!("x"),
                    };
                    line[field] = value;
                }
            }
        }
        panic!("{name}: still not decodable: {line}");
    }

    #[test]
    fn hand_written_message_update_matches_the_writer() {
        let events = validator("events");
        let mut message = AssistantMessage::empty("api", "p", "m");
        let deltas = [
            StreamEvent::TextStart { content_index: 0 },
            StreamEvent::TextDelta {
                content_index: 0,
                delta: "hi".into(),
            },
            StreamEvent::TextEnd {
                content_index: 0,
                block: Content::text("hi"),
            },
        ];
        for delta in deltas {
            message.apply(&delta);
            let snapshot =
                serde_json::to_vec(&super::super::message::MessageRef::Assistant(&message))
                    .unwrap();
            let mut out = Vec::new();
            super::super::event::write_message_update(&mut out, &snapshot, &delta).unwrap();
            assert_valid(&events, &serde_json::from_slice(&out).unwrap());
        }
        let without_partial = json!({"type": "message_update", "message": {"role": "assistant"},
            "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x"}});
        assert!(!events.is_valid(&without_partial));
    }

    #[test]
    fn responses_are_checked_by_command() {
        let responses = validator("responses");
        let ok = |command: &str, data: Value| json!({"id": "r", "type": "response", "command": command, "success": true, "data": data});
        assert_valid(&responses, &ok("export_html", json!({"path": "/x"})));
        assert_valid(&responses, &ok("get_last_assistant_text", json!({})));
        assert!(!responses.is_valid(&ok("export_html", json!({"path": 1}))));
        assert!(!responses.is_valid(&ok("prompt", json!({"unexpected": true}))));
        let done = json!({"type": "response", "command": "prompt", "success": true});
        assert_valid(&responses, &done);
        let failed =
            json!({"type": "response", "command": "parse", "success": false, "error": "bad"});
        assert_valid(&responses, &failed);
    }
}
