//! Frames checked against the published schemas (`docs/schema/*.json`, the checked-in files a
//! host would use): every frame against frames.json, a response also against responses.json
//! (its `data` by `command`), an event frame's inner event against events.json (by `type`).
//! `schema::checked_in_schemas_are_current` keeps the files equal to what the types generate.

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::Value;

pub struct Schemas {
    frames: Validator,
    responses: Validator,
    /// One validator per event `type` (an alternative of events.json with its definitions), so
    /// an error names the field rather than "matches no alternative".
    events: HashMap<String, Validator>,
}

macro_rules! checked_in {
    ($name:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schema/", $name))
    };
}

/// The checked-in schemas, compiled once per test binary.
pub fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| Schemas {
        frames: compile("frames.json", checked_in!("frames.json")),
        responses: compile("responses.json", checked_in!("responses.json")),
        events: by_type(checked_in!("events.json")),
    })
}

fn by_type(text: &str) -> HashMap<String, Validator> {
    let events: Value = serde_json::from_str(text).expect("events.json is JSON");
    let alternatives = events["oneOf"].as_array().expect("events.json is a oneOf");
    alternatives
        .iter()
        .map(|alternative| {
            let kind = alternative["properties"]["type"]["const"]
                .as_str()
                .expect("every event alternative fixes its type");
            let mut schema = alternative.clone();
            schema["$schema"] = events["$schema"].clone();
            schema["$defs"] = events["$defs"].clone();
            (
                kind.to_string(),
                compile("events.json", &schema.to_string()),
            )
        })
        .collect()
}

fn compile(name: &str, text: &str) -> Validator {
    let schema: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name}: {e}"))
}

impl Schemas {
    /// The first rule of the schemas that `frame` breaks, naming the file and the place.
    pub fn check(&self, frame: &Value) -> Result<(), String> {
        validate(&self.frames, "frames.json", frame)?;
        match frame.get("type").and_then(Value::as_str) {
            Some("response") => validate(&self.responses, "responses.json", frame),
            Some("event") => match frame.pointer("/payload/event") {
                Some(event) => {
                    let kind = event
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    match self.events.get(kind) {
                        Some(validator) => validate(validator, "events.json", event),
                        None => Err(format!(
                            "breaks docs/schema/events.json: no event type {kind:?}"
                        )),
                    }
                }
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

fn validate(validator: &Validator, file: &str, instance: &Value) -> Result<(), String> {
    validator
        .validate(instance)
        .map_err(|e| format!("breaks docs/schema/{file} at {}: {e}", e.instance_path()))
}
