//! Slash commands: the skills gjc found (`<agent dir>/skills`, `<project>/.gjc/skills`, such as
//! the workflow stages) offered as `available_commands_update`, and a prompt that starts with
//! `/name` turned into the instruction to follow that skill.

use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, UnstructuredCommandInput,
};

use crate::prompt::Skill;

pub fn available(skills: &[Skill]) -> AvailableCommandsUpdate {
    let commands = skills
        .iter()
        .map(|s| {
            AvailableCommand::new(s.name.clone(), s.description.clone()).input(
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(
                    "what to apply it to",
                )),
            )
        })
        .collect();
    AvailableCommandsUpdate::new(commands)
}

/// `/name rest` for a known skill becomes the request to follow the skill on `rest`; any other
/// text is left as it is.
pub fn expand(text: &str, skills: &[Skill]) -> String {
    let Some(rest) = text.strip_prefix('/') else {
        return text.to_string();
    };
    let (name, input) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
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

    #[test]
    fn a_skill_command_becomes_an_instruction() {
        let skills = vec![Skill {
            name: "ralplan".into(),
            description: "Plan, then get approval".into(),
            path: "/a/skills/ralplan/SKILL.md".into(),
        }];
        let text = expand("/ralplan add a cache", &skills);
        assert!(text.starts_with("Follow the ralplan skill: read /a/skills/ralplan/SKILL.md"));
        assert!(text.ends_with("add a cache"));
        assert_eq!(expand("/other x", &skills), "/other x");
        assert_eq!(expand("plain", &skills), "plain");
        let value = serde_json::to_value(available(&skills)).unwrap();
        assert_eq!(value["availableCommands"][0]["name"], "ralplan");
    }
}
