//! The JSON Schema subset gates use: a shape check when a gate is built (anything outside the
//! subset is refused, with size and depth limits), and answer validation that lists every
//! violation as `{path, keyword, message, expected?}` with paths rooted at `#`.

use serde_json::{Map, Value};

use super::canonical::canonical;
pub use crate::protocol::gate::Violation;

pub const MAX_SCHEMA_BYTES: usize = 65_536;
pub const MAX_DEPTH: usize = 16;
pub const MAX_ENUM: usize = 512;
pub const MAX_PROPERTIES: usize = 256;
pub const MAX_ANSWER_BYTES: usize = 262_144;
/// Compiled size limit of a `pattern` (the regex crate's own limit is 10 MiB).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

const TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// Checks that `schema` stays inside the subset; the message names the rule and where.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    let bytes = canonical(schema).len();
    if bytes > MAX_SCHEMA_BYTES {
        return Err(format!("schema exceeds {MAX_SCHEMA_BYTES} bytes"));
    }
    check_node(schema, "#", 0)
}

fn check_node(node: &Value, path: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "schema nesting exceeds depth {MAX_DEPTH} at {path}"
        ));
    }
    let Some(map) = node.as_object() else {
        return Err(format!("schema node at {path} must be an object"));
    };
    for (key, value) in map {
        check_keyword(key, value, path, depth)?;
    }
    Ok(())
}

fn check_keyword(key: &str, value: &Value, path: &str, depth: usize) -> Result<(), String> {
    let non_negative_int = |v: &Value| v.as_f64().is_some_and(|n| n >= 0.0 && n.fract() == 0.0);
    match key {
        "type" => match value.as_str() {
            Some(t) if TYPES.contains(&t) => Ok(()),
            Some(t) => Err(format!("unsupported type \"{t}\" at {path}")),
            None => Err(format!("unsupported type \"{}\" at {path}", display(value))),
        },
        "enum" => match value.as_array() {
            None => Err(format!("enum at {path} must be an array")),
            Some(a) if a.len() > MAX_ENUM => {
                Err(format!("enum at {path} exceeds {MAX_ENUM} values"))
            }
            Some(_) => Ok(()),
        },
        "const" => Ok(()),
        "title" | "description" if !value.is_string() => {
            Err(format!("{key} at {path} must be a string"))
        }
        "title" | "description" => Ok(()),
        "pattern" => match value.as_str() {
            None => Err(format!("pattern at {path} must be a string")),
            Some(p) => compile(p)
                .map(drop)
                .map_err(|e| format!("pattern at {path} must be a valid regular expression: {e}")),
        },
        "minLength" | "maxLength" | "minItems" | "maxItems" if !non_negative_int(value) => {
            Err(format!("{key} at {path} must be a non-negative integer"))
        }
        "minLength" | "maxLength" | "minItems" | "maxItems" => Ok(()),
        "uniqueItems" if !value.is_boolean() => {
            Err(format!("uniqueItems at {path} must be a boolean"))
        }
        "uniqueItems" => Ok(()),
        "minimum" | "maximum" if !value.as_f64().is_some_and(f64::is_finite) => {
            Err(format!("{key} at {path} must be a finite number"))
        }
        "minimum" | "maximum" => Ok(()),
        "required" => match value.as_array() {
            Some(a) if a.iter().all(Value::is_string) => Ok(()),
            _ => Err(format!("required at {path} must be an array of strings")),
        },
        "properties" => match value.as_object() {
            None => Err(format!("properties at {path} must be an object")),
            Some(p) if p.len() > MAX_PROPERTIES => {
                Err(format!("properties at {path} exceed {MAX_PROPERTIES}"))
            }
            Some(p) => p.iter().try_for_each(|(k, sub)| {
                check_node(sub, &format!("{path}/properties/{k}"), depth + 1)
            }),
        },
        "additionalProperties" => match value {
            Value::Bool(_) => Ok(()),
            Value::Object(_) => {
                check_node(value, &format!("{path}/additionalProperties"), depth + 1)
            }
            _ => Err(format!(
                "additionalProperties at {path} must be a boolean or schema object"
            )),
        },
        "items" => check_node(value, &format!("{path}/items"), depth + 1),
        "oneOf" | "anyOf" => match value.as_array() {
            None => Err(format!("{key} at {path} must be an array")),
            Some(branches) => branches
                .iter()
                .enumerate()
                .try_for_each(|(i, b)| check_node(b, &format!("{path}/{key}/{i}"), depth + 1)),
        },
        other => Err(format!("unsupported keyword \"{other}\" at {path}")),
    }
}

/// How JavaScript's template literal shows a non-string `type` (`["a","b"]` → `a,b`).
fn display(value: &Value) -> String {
    match value {
        Value::Array(items) => items.iter().map(display).collect::<Vec<_>>().join(","),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Patterns are compiled with the regex crate: JavaScript syntax it lacks (look-around,
/// back-references) is refused at construction rather than misread.
fn compile(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
}

/// Validates `answer`; an empty list means valid.
pub fn validate(schema: &Value, answer: &Value) -> Vec<Violation> {
    if canonical(answer).len() > MAX_ANSWER_BYTES {
        return vec![Violation {
            path: "#".into(),
            keyword: "maxAnswerBytes".into(),
            message: "answer too large".into(),
            expected: None,
        }];
    }
    let mut errors = Vec::new();
    validate_node(schema, answer, "#", &mut errors);
    errors
}

fn violation(path: &str, keyword: &str, message: String, expected: Option<Value>) -> Violation {
    Violation {
        path: path.into(),
        keyword: keyword.into(),
        message,
        expected,
    }
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.as_f64().is_some_and(f64::is_finite),
        // JavaScript cannot tell 1.0 from 1: both are integers.
        "integer" => v
            .as_f64()
            .is_some_and(|n| n.is_finite() && n.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn validate_node(schema: &Value, value: &Value, path: &str, errors: &mut Vec<Violation>) {
    let Some(s) = schema.as_object() else { return };
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        if !type_matches(t, value) {
            let e = violation(path, "type", format!("expected {t}"), Some(Value::from(t)));
            errors.push(e);
            return;
        }
    }
    if let Some(c) = s.get("const") {
        if canonical(c) != canonical(value) {
            let msg = "value does not equal const".to_string();
            errors.push(violation(path, "const", msg, Some(c.clone())));
        }
    }
    if let Some(Value::Array(members)) = s.get("enum") {
        let v = canonical(value);
        if !members.iter().any(|m| canonical(m) == v) {
            let e = violation(
                path,
                "enum",
                "value not in enum".into(),
                s.get("enum").cloned(),
            );
            errors.push(e);
        }
    }
    match value {
        Value::String(text) => string_rules(s, text, path, errors),
        Value::Number(n) => number_rules(s, n.as_f64().unwrap_or(f64::NAN), path, errors),
        Value::Object(map) => object_rules(s, map, path, errors),
        Value::Array(items) => array_rules(s, items, path, errors),
        _ => {}
    }
    for combiner in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = s.get(combiner) {
            let passing = branches
                .iter()
                .filter(|b| {
                    let mut scratch = Vec::new();
                    validate_node(b, value, path, &mut scratch);
                    scratch.is_empty()
                })
                .count();
            let ok = if combiner == "oneOf" {
                passing == 1
            } else {
                passing >= 1
            };
            if !ok {
                let msg = format!("value did not satisfy {combiner}");
                errors.push(violation(path, combiner, msg, None));
            }
        }
    }
}

/// Lengths count Unicode code points (a character outside the BMP is one character).
fn string_rules(s: &Map<String, Value>, text: &str, path: &str, errors: &mut Vec<Violation>) {
    let len = text.chars().count() as f64;
    let mut check = |kw, broken: fn(f64, f64) -> bool, words: &str| {
        bound(s, kw, len, broken, words, "", path, errors)
    };
    check("minLength", |v, n| v < n, "shorter than");
    check("maxLength", |v, n| v > n, "longer than");
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        // Unanchored search, as JavaScript's `RegExp#test`.
        if !compile(p).is_ok_and(|re| re.is_match(text)) {
            let e = violation(
                path,
                "pattern",
                format!("does not match pattern {p}"),
                Some(Value::from(p)),
            );
            errors.push(e);
        }
    }
}

fn num(n: f64) -> String {
    super::canonical::js_number(n)
}

fn number_rules(s: &Map<String, Value>, n: f64, path: &str, errors: &mut Vec<Violation>) {
    bound(s, "minimum", n, |v, m| v < m, "less than", "", path, errors);
    bound(
        s,
        "maximum",
        n,
        |v, m| v > m,
        "greater than",
        "",
        path,
        errors,
    );
}

/// A numeric limit keyword: when `broken(actual, limit)`, one violation saying
/// `<words> <limit><suffix>`, with the limit as `expected`.
#[allow(clippy::too_many_arguments)]
fn bound(
    s: &Map<String, Value>,
    keyword: &str,
    actual: f64,
    broken: fn(f64, f64) -> bool,
    words: &str,
    suffix: &str,
    path: &str,
    errors: &mut Vec<Violation>,
) {
    let Some(limit) = s.get(keyword) else { return };
    if limit.as_f64().is_some_and(|n| broken(actual, n)) {
        let n = limit.as_f64().unwrap_or_default();
        let message = format!("{words} {}{suffix}", num(n));
        errors.push(violation(path, keyword, message, Some(limit.clone())));
    }
}

fn object_rules(
    s: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<Violation>,
) {
    for name in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = name.as_str() {
            if !map.contains_key(name) {
                let p = format!("{path}/{name}");
                errors.push(violation(
                    &p,
                    "required",
                    "missing required property".into(),
                    None,
                ));
            }
        }
    }
    let properties = s.get("properties").and_then(Value::as_object);
    for (key, v) in map {
        let p = format!("{path}/{key}");
        match (
            properties.and_then(|props| props.get(key)),
            s.get("additionalProperties"),
        ) {
            (Some(sub), _) => validate_node(sub, v, &p, errors),
            (None, Some(Value::Bool(false))) => errors.push(violation(
                &p,
                "additionalProperties",
                "unexpected property".into(),
                None,
            )),
            (None, Some(extra @ Value::Object(_))) => validate_node(extra, v, &p, errors),
            _ => {}
        }
    }
}

fn array_rules(s: &Map<String, Value>, items: &[Value], path: &str, errors: &mut Vec<Violation>) {
    let count = items.len() as f64;
    bound(
        s,
        "minItems",
        count,
        |v, n| v < n,
        "fewer than",
        " items",
        path,
        errors,
    );
    bound(
        s,
        "maxItems",
        count,
        |v, n| v > n,
        "more than",
        " items",
        path,
        errors,
    );
    if s.get("uniqueItems") == Some(&Value::Bool(true)) {
        let mut seen = std::collections::HashSet::new();
        if !items.iter().all(|i| seen.insert(canonical(i))) {
            let msg = "array items must be unique".to_string();
            errors.push(violation(path, "uniqueItems", msg, None));
        }
    }
    if let Some(sub) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate_node(sub, item, &format!("{path}/{i}"), errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shape_check_refuses_what_is_outside_the_subset() {
        let cases = [
            (json!({"$ref": "#"}), "unsupported keyword \"$ref\" at #"),
            (
                json!({"type": ["string", "null"]}),
                "unsupported type \"string,null\" at #",
            ),
            (json!({"type": "date"}), "unsupported type \"date\" at #"),
            (
                json!({"properties": {"a": 3}}),
                "schema node at #/properties/a must be an object",
            ),
            (
                json!({"items": [{}]}),
                "schema node at #/items must be an object",
            ),
            (
                json!({"anyOf": [{"not": {}}]}),
                "unsupported keyword \"not\" at #/anyOf/0",
            ),
            (
                json!({"minLength": -1}),
                "minLength at # must be a non-negative integer",
            ),
            (
                json!({"minItems": 1.5}),
                "minItems at # must be a non-negative integer",
            ),
            (
                json!({"uniqueItems": 1}),
                "uniqueItems at # must be a boolean",
            ),
            (
                json!({"maximum": "9"}),
                "maximum at # must be a finite number",
            ),
            (
                json!({"required": [1]}),
                "required at # must be an array of strings",
            ),
            (json!({"enum": {}}), "enum at # must be an array"),
            (json!({"title": 1}), "title at # must be a string"),
            (json!({"pattern": 1}), "pattern at # must be a string"),
            (
                json!({"additionalProperties": 1}),
                "additionalProperties at # must be a boolean or schema object",
            ),
            (json!({"oneOf": {}}), "oneOf at # must be an array"),
            (json!(null), "schema node at # must be an object"),
        ];
        for (schema, message) in cases {
            assert_eq!(check_schema(&schema).unwrap_err(), message, "{schema}");
        }
        let big: Vec<Value> = (0..513).map(Value::from).collect();
        assert_eq!(
            check_schema(&json!({"enum": big})).unwrap_err(),
            "enum at # exceeds 512 values"
        );
        let props: Map<String, Value> = (0..257).map(|i| (format!("p{i}"), json!({}))).collect();
        assert_eq!(
            check_schema(&json!({"properties": props})).unwrap_err(),
            "properties at # exceed 256"
        );
        assert!(check_schema(&json!({"pattern": "("}))
            .unwrap_err()
            .starts_with("pattern at # must be a valid regular expression: "));
        let mut deep = json!({});
        for _ in 0..17 {
            deep = json!({"items": deep});
        }
        assert!(check_schema(&deep)
            .unwrap_err()
            .starts_with("schema nesting exceeds depth 16 at #/items"));
        let huge = json!({"description": "x".repeat(MAX_SCHEMA_BYTES)});
        assert_eq!(
            check_schema(&huge).unwrap_err(),
            "schema exceeds 65536 bytes"
        );
    }

    #[test]
    fn answers_are_validated_with_paths_and_expectations() {
        let schema = json!({"type": "object", "properties": {
            "selected": {"type": "array", "items": {"type": "string", "enum": ["A", "B"]}, "uniqueItems": true, "maxItems": 1},
            "n": {"type": "integer", "minimum": 1},
            "s": {"type": "string", "minLength": 2, "pattern": "^x"}},
            "required": ["selected"], "additionalProperties": false});
        assert!(validate(&schema, &json!({"selected": ["A"], "n": 1.0})).is_empty());
        let errors = validate(
            &schema,
            &json!({"selected": ["C", "C"], "n": 0, "s": "y", "z": 1}),
        );
        let summary: Vec<(String, String)> = errors
            .iter()
            .map(|e| (e.path.clone(), e.keyword.clone()))
            .collect();
        // In the schema's property order, as JavaScript walks an object (serde_json keeps object
        // order in this build: `preserve_order` is on through the ACP schema crate).
        let want = [
            ("#/selected", "maxItems"),
            ("#/selected", "uniqueItems"),
            ("#/selected/0", "enum"),
            ("#/selected/1", "enum"),
            ("#/n", "minimum"),
            ("#/s", "minLength"),
            ("#/s", "pattern"),
            ("#/z", "additionalProperties"),
        ];
        assert_eq!(summary, want.map(|(p, k)| (p.to_string(), k.to_string())));
        let e = &validate(&json!({"type": "boolean"}), &json!("yes"))[0];
        assert_eq!(
            serde_json::to_value(e).unwrap(),
            json!({"path": "#", "keyword": "type", "message": "expected boolean", "expected": "boolean"})
        );
        let missing = &validate(&schema, &json!({}))[0];
        assert_eq!(
            (missing.path.as_str(), missing.expected.is_none()),
            ("#/selected", true)
        );
    }

    #[test]
    fn combiners_and_the_answer_cap() {
        let one = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
        assert_eq!(validate(&one, &json!(1))[0].keyword, "oneOf");
        assert!(validate(&one, &json!(1.5)).is_empty());
        let any = json!({"type": "number", "anyOf": [{"maximum": 0}, {"minimum": 10}]});
        assert!(validate(&any, &json!(11)).is_empty());
        assert_eq!(
            validate(&any, &json!(5))[0].message,
            "value did not satisfy anyOf"
        );
        let big = json!("x".repeat(MAX_ANSWER_BYTES));
        assert_eq!(validate(&json!({}), &big)[0].keyword, "maxAnswerBytes");
    }
}
