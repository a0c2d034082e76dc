//! `ask`: the model puts questions to the user through extension UI dialogs (`select`,
//! `confirm`, `input`, `editor`) and, when one is open, the question's workflow gate; the first
//! answer wins. A timeout never becomes an answer: the result says the question timed out.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{Tool, ToolContext};
use crate::host::ui::{dialog, show, Answer};
use crate::host::HostHandle;
use crate::protocol::message::ToolOutput;

/// `ask`: the model asks the user questions, with options (single or multiple choice) or free
/// text, through `select` / `input` dialogs.
pub struct Ask;

impl Tool for Ask {
    fn name(&self) -> &str {
        "ask"
    }

    fn description(&self) -> String {
        "Ask the user one or more questions when you need a decision or information only they have. Give options when the answers are known; the user may answer in their own words when allowOther is true or no options are given.".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "question": {"type": "string", "minLength": 1},
                            "options": {"type": "array", "items": {"type": "object", "properties": {"label": {"type": "string"}, "description": {"type": "string"}}, "required": ["label"]}},
                            "multi": {"type": "boolean", "description": "Allow several options"},
                            "allowOther": {"type": "boolean", "description": "Allow a free-text answer besides the options"},
                            "confirm": {"type": "boolean", "description": "A yes/no question"},
                            "multiline": {"type": "boolean", "description": "A long free-text answer (an editor)"},
                            "prefill": {"type": "string", "description": "Initial text for a multiline answer"},
                            "recommended": {"type": "integer", "minimum": 0, "description": "Index of the recommended option"},
                            "workflowGate": {"type": "object", "properties": {"stage": {"type": "string"}, "kind": {"type": "string"}}, "description": "The workflow gate this question opens (default: deep-interview question)"},
                            "timeoutSeconds": {"type": "number", "exclusiveMinimum": 0, "description": "Give up waiting after this long; the question then has no answer and the result says it timed out"}
                        },
                        "required": ["question"]
                    }
                }
            },
            "required": ["questions"],
            "additionalProperties": false
        })
    }

    fn execute(&self, args: &Value, ctx: &ToolContext) -> ToolOutput {
        let Some(host) = &ctx.host else {
            return ToolOutput::error("ask needs a host that answers UI requests");
        };
        let mut text = String::new();
        let mut answers = Vec::new();
        for (i, q) in args["questions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let question = q["question"].as_str().unwrap_or("");
            let labels: Vec<Value> = q["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| o.get("label").cloned())
                .collect();
            let mut fields = Map::new();
            fields.insert("title".into(), json!(question));
            let method = if q["confirm"].as_bool() == Some(true) {
                fields.insert("message".into(), json!(question));
                "confirm"
            } else if labels.is_empty() && q["multiline"].as_bool() == Some(true) {
                fields.insert("prefill".into(), json!(q["prefill"].as_str().unwrap_or("")));
                "editor"
            } else if labels.is_empty() {
                fields.insert("placeholder".into(), json!("Type your answer"));
                "input"
            } else {
                fields.insert("options".into(), Value::Array(labels.clone()));
                fields.insert(
                    "allowMultiple".into(),
                    json!(q["multi"].as_bool().unwrap_or(false)),
                );
                fields.insert(
                    "allowOther".into(),
                    json!(q["allowOther"].as_bool().unwrap_or(false)),
                );
                "select"
            };
            let timeout = q["timeoutSeconds"]
                .as_f64()
                .map(|s| Duration::from_secs_f64(s.min(86_400.0)));
            // A timed-out question stays unanswered, recommended option or not: the model must
            // never mistake a default for the user's choice.
            let answer = match ask_one(host, ctx, q, i, method, fields, timeout) {
                Ok(a) => a,
                Err(e) => return ToolOutput::error(e),
            };
            if ctx.is_cancelled() {
                return ToolOutput::error("The question was cancelled");
            }
            let (shown, value) = match &answer {
                Answer::Value(Value::Array(items)) => (
                    items
                        .iter()
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string())
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                    json!(items),
                ),
                Answer::Value(v) => (
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string()),
                    v.clone(),
                ),
                Answer::Confirmed(c) => (c.to_string(), json!(c)),
                Answer::Clarify(q) => (
                    format!("(no answer yet: the user asks for clarification: {q})"),
                    json!({"clarificationQuestion": q}),
                ),
                Answer::Cancelled { timed_out: true } => (
                    "(no answer: the question timed out before the user chose anything)".into(),
                    Value::Null,
                ),
                Answer::Cancelled { .. } => (
                    "(no answer: the user dismissed the question)".into(),
                    Value::Null,
                ),
            };
            text.push_str(&format!("{question}\nAnswer: {shown}\n\n"));
            let mut entry = json!({"id": q.get("id").cloned().unwrap_or(json!(format!("q{}", i + 1))), "question": question, "answer": value});
            if answer == (Answer::Cancelled { timed_out: true }) {
                entry["timedOut"] = json!(true);
            }
            answers.push(entry);
        }
        ToolOutput::text(text.trim_end().to_string()).with_details(json!({"answers": answers}))
    }
}

/// One question: its workflow gate is opened first (persisted, frame written), then, unless the
/// session is unattended, the UI dialog. The first answer wins; the other is withdrawn (the
/// dialog gets a `cancel`, the gate is settled with the dialog's answer or withdrawn).
fn ask_one(
    host: &HostHandle,
    ctx: &ToolContext,
    q: &Value,
    index: usize,
    method: &'static str,
    fields: Map<String, Value>,
    timeout: Option<Duration>,
) -> Result<Answer, String> {
    use super::workflow_gate as tool;
    use crate::gates::{GateRequest, OpenWhat};
    use crate::workflow::ask;
    let spec = ask::question_gate(q, index);
    // No broker reachable (outside a session): the dialog alone.
    let opened = tool::open(ctx, OpenWhat::Question(spec))?;
    let labels = ask::labels(q);
    let decode = |answer: &Value| -> Result<Answer, String> {
        let d = ask::decode(answer, &labels, ask::is_multi(q)).map_err(|e| e.to_string())?;
        Ok(gate_answer(q, d))
    };
    let Some(gate) = opened else {
        return Ok(dialog(host, method, fields, timeout, &|| {
            ctx.is_cancelled()
        }));
    };
    if gate.unattended {
        return match tool::wait(ctx, &gate.gate_id, &gate.answer, timeout) {
            Some(answer) => decode(&answer),
            None => Ok(Answer::Cancelled {
                timed_out: !ctx.is_cancelled(),
            }),
        };
    }
    let withdraw = || {
        ctx.gate(GateRequest::Withdraw {
            gate_id: gate.gate_id.clone(),
        })
    };
    let Some(shown) = show(host, method, fields, timeout) else {
        withdraw();
        return Ok(Answer::Cancelled { timed_out: false });
    };
    loop {
        if ctx.is_cancelled() {
            host.cancel(shown.id);
            withdraw();
            return Ok(Answer::Cancelled { timed_out: false });
        }
        if let Ok(answer) = gate.answer.try_recv() {
            host.cancel(shown.id);
            return decode(&answer);
        }
        match shown.poll(Duration::from_millis(10)) {
            None => {}
            Some(a @ Answer::Cancelled { .. }) => {
                withdraw();
                return Ok(a);
            }
            Some(a) => {
                let value = match &a {
                    Answer::Confirmed(c) => json!(c),
                    Answer::Value(v) => v.clone(),
                    _ => Value::Null,
                };
                let answer = ask::from_dialog(&value, &labels);
                ctx.gate(GateRequest::ResolvedElsewhere {
                    gate_id: gate.gate_id.clone(),
                    answer,
                });
                return Ok(a);
            }
        }
    }
}

/// A decoded gate answer in the form the dialog would have given.
fn gate_answer(q: &Value, d: crate::workflow::ask::Decoded) -> Answer {
    if let Some(question) = d.clarification {
        return Answer::Clarify(question);
    }
    if q["confirm"].as_bool() == Some(true) && d.custom.is_none() {
        return Answer::Confirmed(d.selected.first().is_some_and(|s| s == "Yes"));
    }
    let mut picked: Vec<Value> = d.selected.into_iter().map(Value::String).collect();
    picked.extend(d.custom.map(Value::String));
    if q["multi"].as_bool() == Some(true) {
        Answer::Value(Value::Array(picked))
    } else {
        Answer::Value(picked.into_iter().next().unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::{GateRequest, Opened};
    use crate::protocol::{FlatFrame, Outbound};

    /// Unattended: the question is answered through its gate only; no dialog is ever shown.
    #[test]
    fn unattended_questions_go_through_the_gate_alone() {
        let (out_tx, out_rx, _) = crate::output::lane();
        let (host, thread) = crate::host::spawn(out_tx).unwrap();
        let (_dir, ctx) = crate::tools::tests::ctx();
        let opened = std::sync::Mutex::new(Vec::new());
        let seen = std::sync::Arc::new(opened);
        let log = seen.clone();
        let mut ctx = ctx.with_gates(move |request| {
            if let GateRequest::Open { what, reply } = request {
                log.lock().unwrap().push(format!("{what:?}"));
                let (tx, rx) = crossbeam_channel::bounded(1);
                tx.send(json!({"selected": ["B"]})).unwrap();
                let _ = reply.send(Ok(Opened {
                    gate_id: "wg_x_deep-interview_000001".into(),
                    unattended: true,
                    answer: rx,
                }));
            }
            true
        });
        ctx.host = Some(host.clone());
        let args = json!({"questions": [{"question": "Pick?", "options": [{"label": "A"}, {"label": "B"}]}]});
        let out = Ask.execute(&args, &ctx);
        assert!(!out.is_error);
        assert_eq!(out.details.unwrap()["answers"][0]["answer"], "B");
        assert_eq!(seen.lock().unwrap().len(), 1);
        drop(ctx);
        drop(host);
        thread.join().unwrap();
        while let Some(q) = out_rx.recv() {
            let is_dialog = matches!(q.frame, Outbound::Frame(FlatFrame::ExtensionUiRequest(_)));
            assert!(!is_dialog, "no dialog in unattended mode");
        }
    }
}
