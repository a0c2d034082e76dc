//! `ask` questions as gates: the gate a question becomes (its schema accepts one or more of the
//! labels, a free-text answer, or a request for clarification) and the decoding of an accepted
//! answer into the same result a UI dialog gives.

use serde_json::{json, Map, Value};

use crate::gates::GateSpec;
use crate::protocol::gate::GateOption;

pub const OTHER_OPTION: &str = "Other (type your own)";

/// A question's labels: its options, `Yes`/`No` for a confirmation, none for free text.
pub fn labels(q: &Value) -> Vec<String> {
    if q["confirm"].as_bool() == Some(true) {
        return vec!["Yes".into(), "No".into()];
    }
    q["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["label"].as_str().map(str::to_string))
        .collect()
}

pub fn is_multi(q: &Value) -> bool {
    q["multi"].as_bool() == Some(true)
}

/// The gate for question number `index` of an `ask` call.
pub fn question_gate(q: &Value, index: usize) -> GateSpec {
    let labels = labels(q);
    let multi = is_multi(q);
    let question = q["question"].as_str().unwrap_or("");
    let recommended = q["recommended"].as_u64().map(|r| r as usize);
    let options = labels
        .iter()
        .enumerate()
        .map(|(i, l)| GateOption {
            value: json!(l),
            label: l.clone(),
            description: (Some(i) == recommended).then(|| "recommended".into()),
        })
        .collect();
    let wanted = &q["workflowGate"];
    let mut context = Map::new();
    context.insert("title".into(), json!(question));
    context.insert("prompt".into(), json!(question));
    context.insert(
        "stage_state".into(),
        json!({"question_id": q.get("id").cloned().unwrap_or(json!(format!("q{}", index + 1))),
               "multi": multi, "options": labels, "other_option": OTHER_OPTION,
               "clarification_action": "clarify"}),
    );
    GateSpec {
        stage: wanted["stage"].as_str().unwrap_or("deep-interview").into(),
        kind: wanted["kind"].as_str().unwrap_or("question").into(),
        schema: question_schema(&labels, multi),
        options: Some(options),
        context,
    }
}

/// The question schema: pick labels, or `other` with `custom` text, or `clarify`.
pub fn question_schema(labels: &[String], multi: bool) -> Value {
    let text = || json!({"type": "string", "minLength": 1, "pattern": "\\S"});
    let selected = |extra: Value| {
        let mut s = json!({"type": "array", "items": {"type": "string", "enum": labels}, "uniqueItems": true});
        if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
            s.extend(extra.clone());
        }
        s
    };
    let pick = if multi {
        json!({"minItems": 1})
    } else {
        json!({"minItems": 1, "maxItems": 1})
    };
    let with_other = if multi {
        json!({})
    } else {
        json!({"maxItems": 0})
    };
    json!({"type": "object",
        "properties": {
            "selected": selected(json!({})),
            "other": {"type": "boolean", "description": "set true to provide a free-text answer in `custom`"},
            "custom": {"type": "string", "minLength": 1, "pattern": "\\S", "description": "free-text answer; required when `other` is true"},
            "action": {"type": "string", "enum": ["answer", "clarify"], "description": "set to `clarify` to ask about the choices without answering the round"},
            "question": {"type": "string", "minLength": 1, "pattern": "\\S", "description": "clarification question; required when action is `clarify`"}},
        "additionalProperties": false,
        "anyOf": [
            {"type": "object", "properties": {"selected": selected(pick), "other": {"const": false}, "action": {"const": "answer"}},
             "required": ["selected"], "additionalProperties": false},
            {"type": "object", "properties": {"selected": selected(with_other), "other": {"const": true}, "custom": text(), "action": {"const": "answer"}},
             "required": ["selected", "other", "custom"], "additionalProperties": false},
            {"type": "object", "properties": {"action": {"const": "clarify"}, "question": text()},
             "required": ["action", "question"], "additionalProperties": false}]})
}

/// An accepted answer, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub selected: Vec<String>,
    pub custom: Option<String>,
    pub clarification: Option<String>,
}

/// Why an accepted answer does not answer the question. The text is `code: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerError {
    /// Neither `{selected, other?, custom?}` nor `{action: "clarify", question}`.
    Shape,
    MissingClarification,
    /// A selected label that is none of the options.
    UnknownOption(String),
    Duplicate,
    Empty,
    MultiNotAllowed,
    MissingCustom,
}

impl AnswerError {
    /// The machine-readable code the text starts with.
    pub fn code(&self) -> &'static str {
        match self {
            AnswerError::Shape => "invalid_answer_shape",
            AnswerError::MissingClarification => "missing_clarification",
            AnswerError::UnknownOption(_) => "unknown_option",
            AnswerError::Duplicate => "duplicate_selection",
            AnswerError::Empty => "empty_selection",
            AnswerError::MultiNotAllowed => "multi_not_allowed",
            AnswerError::MissingCustom => "missing_custom",
        }
    }
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.code())?;
        match self {
            AnswerError::Shape => f.write_str(
                "the answer must be {selected, other?, custom?} or {action:\"clarify\", question}",
            ),
            AnswerError::MissingClarification => f.write_str("the clarification question is empty"),
            AnswerError::UnknownOption(o) => write!(f, "{o:?} is not one of the options"),
            AnswerError::Duplicate => f.write_str("an option was selected twice"),
            AnswerError::Empty => f.write_str("nothing was selected"),
            AnswerError::MultiNotAllowed => f.write_str("this question takes one answer"),
            AnswerError::MissingCustom => f.write_str("`other` needs a `custom` text"),
        }
    }
}

impl std::error::Error for AnswerError {}

/// Decodes an accepted answer; the error fails the `ask` call, not the gate.
pub fn decode(answer: &Value, labels: &[String], multi: bool) -> Result<Decoded, AnswerError> {
    let shape = || AnswerError::Shape;
    let obj = answer.as_object().ok_or_else(shape)?;
    if obj.get("action").and_then(Value::as_str) == Some("clarify") {
        if ["selected", "other", "custom"]
            .iter()
            .any(|k| obj.contains_key(*k))
        {
            return Err(shape());
        }
        let q = obj
            .get("question")
            .and_then(Value::as_str)
            .ok_or_else(shape)?;
        if q.trim().is_empty() {
            return Err(AnswerError::MissingClarification);
        }
        return Ok(Decoded {
            selected: vec![],
            custom: None,
            clarification: Some(q.into()),
        });
    }
    if !matches!(obj.get("action"), None | Some(Value::Null))
        && obj.get("action") != Some(&json!("answer"))
    {
        return Err(shape());
    }
    let selected: Vec<String> = match obj.get("selected") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(shape))
            .collect::<Result<_, _>>()?,
        _ => return Err(shape()),
    };
    let other = match obj.get("other") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(shape()),
    };
    let custom = match obj.get("custom") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(shape()),
    };
    if let Some(unknown) = selected.iter().find(|s| !labels.contains(s)) {
        return Err(AnswerError::UnknownOption(unknown.clone()));
    }
    let mut seen = std::collections::HashSet::new();
    if !selected.iter().all(|s| seen.insert(s)) {
        return Err(AnswerError::Duplicate);
    }
    if selected.is_empty() && !other {
        return Err(AnswerError::Empty);
    }
    if !multi && selected.len() + usize::from(other) > 1 {
        return Err(AnswerError::MultiNotAllowed);
    }
    if other && custom.as_deref().is_none_or(|c| c.trim().is_empty()) {
        return Err(AnswerError::MissingCustom);
    }
    Ok(Decoded {
        selected,
        custom: other.then_some(custom).flatten(),
        clarification: None,
    })
}

/// A UI dialog's answer in the gate's answer form (what the gate is settled with).
pub fn from_dialog(value: &Value, labels: &[String]) -> Value {
    match value {
        Value::Bool(b) => json!({"selected": [if *b { "Yes" } else { "No" }]}),
        Value::Array(items) => json!({"selected": items}),
        Value::String(s) if labels.contains(s) => json!({"selected": [s]}),
        Value::String(s) => json!({"selected": [], "other": true, "custom": s}),
        other => json!({"selected": [], "other": true, "custom": other.to_string()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::schema::{check_schema, validate};

    #[test]
    fn question_gate_accepts_the_documented_answers() {
        let q = json!({"id": "db", "question": "Which?", "options": [{"label": "A"}, {"label": "B"}], "recommended": 1});
        let spec = question_gate(&q, 0);
        assert_eq!(
            (spec.stage.as_str(), spec.kind.as_str()),
            ("deep-interview", "question")
        );
        assert_eq!(
            spec.options.as_ref().unwrap()[1].description.as_deref(),
            Some("recommended")
        );
        check_schema(&spec.schema).unwrap();
        let labels = labels(&q);
        for ok in [
            json!({"selected": ["A"]}),
            json!({"selected": [], "other": true, "custom": "C"}),
            json!({"action": "clarify", "question": "what is B?"}),
        ] {
            assert!(validate(&spec.schema, &ok).is_empty(), "{ok}");
            decode(&ok, &labels, false).unwrap();
        }
        for bad in [
            json!({"selected": ["A", "B"]}),
            json!({"decision": "approve"}),
            json!({"selected": ["A"], "other": true, "custom": "x"}),
            json!({"selected": ["Z"]}),
        ] {
            assert!(!validate(&spec.schema, &bad).is_empty(), "{bad}");
        }
        let e = decode(&json!({"selected": []}), &labels, false).unwrap_err();
        assert_eq!(e, AnswerError::Empty);
        assert_eq!(e.to_string(), "empty_selection: nothing was selected");
        let e = decode(&json!({"selected": ["Z"]}), &labels, false).unwrap_err();
        assert_eq!(e, AnswerError::UnknownOption("Z".into()));
        assert_eq!(
            e.to_string(),
            "unknown_option: \"Z\" is not one of the options"
        );
        let two = json!({"selected": ["A", "B"]});
        assert_eq!(
            decode(&two, &labels, false),
            Err(AnswerError::MultiNotAllowed)
        );
        assert_eq!(
            decode(
                &json!({"action": "clarify", "question": " "}),
                &labels,
                false
            ),
            Err(AnswerError::MissingClarification)
        );
        assert_eq!(
            decode(&json!([1]), &labels, false).unwrap_err().to_string(),
            "invalid_answer_shape: the answer must be {selected, other?, custom?} or {action:\"clarify\", question}"
        );
        assert_eq!(
            from_dialog(&json!("B"), &labels),
            json!({"selected": ["B"]})
        );
        assert_eq!(
            from_dialog(&json!(true), &labels),
            json!({"selected": ["Yes"]})
        );
    }
}
