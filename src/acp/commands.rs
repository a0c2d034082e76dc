//! Slash commands: the workflow stages (`/deep-interview`, `/ralplan`, `/ultragoal`) and the
//! skills gjc found (`<agent dir>/skills`, `<project>/.gjc/skills`) offered as
//! `available_commands_update`. A prompt that starts with a stage goes to the session as it is (the
//! session starts and enforces the stage); one that starts with `/name` of another skill becomes
//! the instruction to follow that skill.

use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, UnstructuredCommandInput,
};

use crate::prompt::Skill;
use crate::workflow::STAGE_COMMANDS;

/// What each stage does, as the editor's command menu shows it.
fn stage_description(stage: &str) -> &'static str {
    match stage {
        "deep-interview" => "Clarify the task through questions, then write a spec",
        "ralplan" => "Plan read-only, then execute once the plan is approved",
        _ => "Run autonomously toward a goal once execution is approved",
    }
}

fn is_stage(name: &str) -> bool {
    STAGE_COMMANDS.iter().any(|(_, stage)| *stage == name)
}

pub fn available(skills: &[Skill]) -> AvailableCommandsUpdate {
    let input = |hint: &str| {
        AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint.to_string()))
    };
    let stages = STAGE_COMMANDS.iter().map(|(_, stage)| {
        AvailableCommand::new(stage.to_string(), stage_description(stage).to_string())
            .input(input("the task or goal"))
    });
    // A skill named like a stage replaces the stage's instructions, not the stage: listed once.
    let others = skills.iter().filter(|s| !is_stage(&s.name)).map(|s| {
        AvailableCommand::new(s.name.clone(), s.description.clone())
            .input(input("what to apply it to"))
    });
    AvailableCommandsUpdate::new(stages.chain(others).collect())
}

/// `/name rest` for a known skill becomes the request to follow the skill on `rest`; a stage
/// command and any other text are left as they are.
pub fn expand(text: &str, skills: &[Skill]) -> String {
    let Some(rest) = text.strip_prefix('/') else {
        return text.to_string();
    };
    let (name, input) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if is_stage(name) {
        return text.to_string();
    }
    match skills.iter().find(|s| s.name == name) {
        Some(skill) => format!(
            "Follow the {} skill: read {} first, then apply it.\n\n{}",
            skill.name,
            skill.path.display(),
            input.trim()
        ),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str) -> Skill {
        Skill {
            name: name.into(),
            description: format!("the {name} skill"),
            path: format!("/a/skills/{name}/SKILL.md").into(),
        }
    }

    #[test]
    fn a_skill_command_becomes_an_instruction() {
        let skills = vec![skill("review")];
        let text = expand("/review the cache", &skills);
        assert!(text.starts_with("Follow the review skill: read /a/skills/review/SKILL.md"));
        assert!(text.ends_with("the cache"));
        assert_eq!(expand("/other x", &skills), "/other x");
        assert_eq!(expand("plain", &skills), "plain");
    }

    /// The stages are offered first and reach the session untouched, even when a skill of the
    /// same name exists (it replaces the stage's instructions, not its enforcement).
    #[test]
    fn workflow_stages_are_commands_the_session_starts() {
        let skills = vec![skill("ralplan"), skill("review")];
        assert_eq!(
            expand("/ralplan add a cache", &skills),
            "/ralplan add a cache"
        );
        let value = serde_json::to_value(available(&skills)).unwrap();
        let names: Vec<&str> = value["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["deep-interview", "ralplan", "ultragoal", "review"]);
    }
}
