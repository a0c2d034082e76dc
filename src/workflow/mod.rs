//! The three workflow stages (`/deep-interview`, `/ralplan`, `/ultragoal`): the prompt that
//! starts each, the state of the stage in progress (kept in the gate store, so it survives a
//! restart), and what gjc refuses while a stage waits for its gate.

pub mod ask;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::gates::{Broker, GateSpec};
use crate::protocol::gate::GateOption;

/// The tool that presents a plan or a course for a decision (`tools/workflow_gate.rs`).
pub const GATE_TOOL: &str = "workflow_gate";

/// The stage in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageState {
    pub stage: String,
    /// What the user asked for (the text after the command).
    pub task: String,
    /// ralplan: the plan was approved; ultragoal: execution was approved; deep-interview: a
    /// question was answered. Until then, only read-only tools run.
    #[serde(default)]
    pub cleared: bool,
}

/// The session's workflow state: the gate broker and the stage. (Whether a host attends is the
/// unattended control plane's: once negotiated, questions reach the host as gates only.)
#[derive(Default)]
pub struct Workflow {
    pub broker: Option<Broker>,
    pub stage: Option<StageState>,
    /// The run must end with outcome `denied`, for this reason.
    pub denied: Option<String>,
}

pub const STAGE_COMMANDS: &[(&str, &str)] = &[
    ("/deep-interview", "deep-interview"),
    ("/ralplan", "ralplan"),
    ("/ultragoal", "ultragoal"),
];

/// `(stage, task)` when `text` starts a stage (`/ralplan add a cache`).
pub fn parse_command(text: &str) -> Option<(&'static str, String)> {
    let trimmed = text.trim_start();
    STAGE_COMMANDS.iter().find_map(|(cmd, stage)| {
        let rest = trimmed.strip_prefix(cmd)?;
        if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
            return None;
        }
        Some((*stage, rest.trim().to_string()))
    })
}

/// The stage's instructions: a skill of the same name (its SKILL.md without front matter) when
/// one is installed, else the built-in text.
pub fn stage_prompt(stage: &str, agent_dir: &std::path::Path, cwd: &std::path::Path) -> String {
    let skill = crate::prompt::find_skills(agent_dir, cwd)
        .into_iter()
        .find(|s| s.name == stage)
        .and_then(|s| crate::prompt::read_skill(&s.path))
        .map(|text| strip_front_matter(&text).trim().to_string())
        .filter(|t| !t.is_empty());
    skill.unwrap_or_else(|| builtin_prompt(stage).trim().to_string())
}

fn builtin_prompt(stage: &str) -> &'static str {
    match stage {
        "deep-interview" => include_str!("prompts/deep-interview.md"),
        "ralplan" => include_str!("prompts/ralplan.md"),
        _ => include_str!("prompts/ultragoal.md"),
    }
}

fn strip_front_matter(text: &str) -> &str {
    text.strip_prefix("---")
        .and_then(|rest| rest.find("\n---").map(|end| &rest[end + 4..]))
        .unwrap_or(text)
}

/// The message the model gets for a stage command.
pub fn stage_message(stage: &str, task: &str, prompt: &str) -> String {
    let label = match stage {
        "deep-interview" => "Topic",
        "ralplan" => "Task",
        _ => "Goal",
    };
    format!("{prompt}\n\n{label}: {task}")
}

/// Tools that change nothing, always allowed while a stage waits for its gate.
const READ_ONLY_TOOLS: &[&str] = &["read", "grep", "find", "ls", "ask", "todo_write", GATE_TOOL];

impl Workflow {
    /// Why gjc refuses this tool call now, if it does: while a stage is not yet cleared, only
    /// read-only tools and read-only shell commands run (fail closed: host tools and anything
    /// unknown are refused too).
    pub fn refusal(&self, tool: &str, args: &Value) -> Option<String> {
        let stage = self.stage.as_ref().filter(|s| !s.cleared)?;
        if READ_ONLY_TOOLS.contains(&tool) {
            return None;
        }
        let until = match stage.stage.as_str() {
            "ralplan" => "the plan is approved (present it with workflow_gate)",
            "ultragoal" => "execution is approved (present the plan with workflow_gate)",
            _ => "the user has answered a clarifying question (use ask)",
        };
        if tool == "bash" {
            let command = args.get("command").and_then(Value::as_str).unwrap_or("");
            if is_read_only_command(command) {
                return None;
            }
            return Some(format!(
                "workflow_read_only: {} is read-only until {until}; this command may change something: {command}",
                stage.stage
            ));
        }
        Some(format!(
            "workflow_read_only: {} is read-only until {until}; {tool} is not allowed yet",
            stage.stage
        ))
    }

    /// Applies an accepted answer to the stage: a decision clears or denies it, an answered
    /// question clears deep-interview.
    pub fn apply_answer(&mut self, stage: &str, kind: &str, answer: &Value) {
        let Some(current) = self.stage.as_mut().filter(|s| s.stage == stage) else {
            return;
        };
        match (kind, answer.get("decision").and_then(Value::as_str)) {
            ("approval" | "execution", Some("approve")) => current.cleared = true,
            ("approval", Some("reject")) => {
                self.denied = Some("the plan was rejected".into());
                self.stage = None;
            }
            ("execution", Some("decline")) => {
                self.denied = Some("execution was declined".into());
                self.stage = None;
            }
            ("question", _) if answer.get("action").and_then(Value::as_str) != Some("clarify") => {
                current.cleared = true
            }
            _ => {}
        }
    }
}

/// The decision gate of the active stage.
pub fn decision_spec(stage: &StageState, title: Option<String>, summary: &str) -> Option<GateSpec> {
    let (kind, default_title, decisions): (&str, &str, &[&str]) = match stage.stage.as_str() {
        "ralplan" => (
            "approval",
            "Approve the plan?",
            &["approve", "request-changes", "reject"],
        ),
        "ultragoal" => ("execution", "Approve execution?", &["approve", "decline"]),
        _ => return None,
    };
    let mut context = Map::new();
    context.insert(
        "title".into(),
        json!(title.unwrap_or_else(|| default_title.into())),
    );
    let key = if kind == "approval" {
        "plan"
    } else {
        "summary"
    };
    context.insert(key.into(), json!(summary));
    context.insert("prompt".into(), json!(stage.task));
    context.insert("stage_state".into(), json!({"task": stage.task}));
    Some(GateSpec {
        stage: stage.stage.clone(),
        kind: kind.into(),
        schema: decision_schema(kind),
        options: Some(
            decisions
                .iter()
                .map(|d| GateOption {
                    value: json!({"decision": d}),
                    label: (*d).into(),
                    description: None,
                })
                .collect(),
        ),
        context,
    })
}

/// `{decision, comments?}` (approval; comments required with `request-changes`) or
/// `{decision, reason?}` (execution).
pub fn decision_schema(kind: &str) -> Value {
    if kind == "approval" {
        let text = json!({"type": "string", "minLength": 1, "pattern": "\\S"});
        json!({"type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["approve", "request-changes", "reject"]},
                "comments": {"type": "string", "description": "required with request-changes"}},
            "required": ["decision"], "additionalProperties": false,
            "anyOf": [
                {"properties": {"decision": {"enum": ["approve", "reject"]}}},
                {"properties": {"decision": {"const": "request-changes"}, "comments": text}, "required": ["decision", "comments"]}]})
    } else {
        json!({"type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["approve", "decline"]},
                "reason": {"type": "string"}},
            "required": ["decision"], "additionalProperties": false})
    }
}

/// Whether a shell command certainly changes nothing: the unattended control plane's
/// fail-closed classifier calls it `bash.readonly` (unknown commands count as mutating), so the
/// stages and unattended mode enforce the same rules. An empty command has nothing to run.
pub fn is_read_only_command(command: &str) -> bool {
    !command.trim().is_empty() && crate::control::is_read_only(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_commands_are_recognised() {
        assert_eq!(
            parse_command("/ralplan add a cache"),
            Some(("ralplan", "add a cache".into()))
        );
        assert_eq!(
            parse_command("  /ultragoal"),
            Some(("ultragoal", String::new()))
        );
        assert_eq!(parse_command("/ralplanx y"), None);
        assert_eq!(parse_command("please /ralplan"), None);
    }

    #[test]
    fn read_only_commands_by_the_shared_classifier() {
        for c in ["ls -la", "git status", "cat a.txt", "grep -rn foo src"] {
            assert!(is_read_only_command(c), "{c}");
        }
        for c in [
            "rm -rf x",
            "echo hi > f",
            "cat a | sh",
            "git push",
            "ls; rm x",
            "ls $(rm x)",
            "sed -i s/a/b/ f",
            "git log -o x",
            "",
        ] {
            assert!(!is_read_only_command(c), "{c}");
        }
    }

    #[test]
    fn decisions_clear_or_deny_the_stage() {
        let mut w = Workflow {
            stage: Some(StageState {
                stage: "ralplan".into(),
                task: "t".into(),
                cleared: false,
            }),
            ..Default::default()
        };
        assert!(w
            .refusal("write", &json!({}))
            .unwrap()
            .starts_with("workflow_read_only: "));
        assert!(w
            .refusal("bash", &json!({"command": "git status"}))
            .is_none());
        assert!(w.refusal("bash", &json!({"command": "touch x"})).is_some());
        w.apply_answer(
            "ralplan",
            "approval",
            &json!({"decision": "request-changes", "comments": "more"}),
        );
        assert!(w.refusal("edit", &json!({})).is_some());
        w.apply_answer("ralplan", "approval", &json!({"decision": "approve"}));
        assert!(w.refusal("write", &json!({})).is_none());
        w.stage = Some(StageState {
            stage: "ultragoal".into(),
            task: "g".into(),
            cleared: false,
        });
        w.apply_answer("ultragoal", "execution", &json!({"decision": "decline"}));
        assert_eq!(w.denied.as_deref(), Some("execution was declined"));
        let schema = decision_schema("approval");
        assert!(crate::gates::schema::check_schema(&schema).is_ok());
        assert!(
            !crate::gates::schema::validate(&schema, &json!({"decision": "request-changes"}))
                .is_empty()
        );
        assert!(crate::gates::schema::validate(
            &schema,
            &json!({"decision": "request-changes", "comments": "x"})
        )
        .is_empty());
        assert!(
            crate::gates::schema::validate(&schema, &json!({"decision": "approve"})).is_empty()
        );
    }
}
