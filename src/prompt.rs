//! The system prompt: the built-in coding-agent prompt (tools, cwd, date), `--system-prompt` /
//! `--append-system-prompt`, context files (AGENTS.md, else CLAUDE.md) from the agent dir and
//! from the filesystem root down to the cwd, the rules (`crate::rules`: `alwaysApply` ones in
//! full, descriptive ones listed by name), and the skills found in skills folders.

use std::path::{Path, PathBuf};

use crate::fs::bounded::{self, Links, ReadError};
use crate::provider::ToolSpec;
use crate::rules::RuleSet;

/// A context file (AGENTS.md, CLAUDE.md) larger than this is skipped with a warning: it goes
/// into every request whole.
pub const MAX_CONTEXT_FILE_BYTES: u64 = 256 * 1024;
/// A SKILL.md larger than this is skipped with a warning.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;

pub struct PromptOptions<'a> {
    pub cwd: &'a Path,
    pub agent_dir: &'a Path,
    pub tools: &'a [ToolSpec],
    pub replace: Option<&'a str>,
    pub append: Option<&'a str>,
    pub rules: bool,
    /// Rule files (empty with `--no-rules`).
    pub rule_set: &'a RuleSet,
    pub skills: bool,
}

pub fn build(o: &PromptOptions) -> String {
    let mut prompt = match o.replace {
        Some(custom) => custom.to_string(),
        None => builtin(o.tools),
    };
    if let Some(extra) = o.append.filter(|a| !a.trim().is_empty()) {
        prompt.push_str("\n\n");
        prompt.push_str(extra);
    }
    if o.rules {
        for (path, text) in context_files(o.agent_dir, o.cwd) {
            prompt.push_str(&format!(
                "\n\n# Project context from {}\n\n{}",
                path.display(),
                text.trim()
            ));
        }
    }
    push_rules(&mut prompt, o.rule_set);
    if o.skills {
        let skills = find_skills(o.agent_dir, o.cwd);
        if !skills.is_empty() {
            prompt.push_str("\n\n# Skills\n\nRead a skill's file with the read tool when the task matches its description:\n");
            for s in skills {
                prompt.push_str(&format!(
                    "- {}: {} ({})\n",
                    s.name,
                    s.description,
                    s.path.display()
                ));
            }
        }
    }
    let date = &crate::ids::iso_now()[..10];
    prompt.push_str(&format!(
        "\n\nCurrent date: {date}\nCurrent working directory: {}",
        o.cwd.display()
    ));
    prompt
}

/// `alwaysApply` rules in full; rules that only describe themselves (no condition) as a list the
/// model can read from when they concern the task. Conditional rules stay out: they are sent
/// only when the model's output matches them.
fn push_rules(prompt: &mut String, rules: &RuleSet) {
    for r in rules.always_apply() {
        prompt.push_str(&format!("\n\n# Rule: {}\n\n{}", r.name, r.content));
    }
    let listed: Vec<_> = rules
        .rules()
        .iter()
        .filter(|r| !r.always_apply && r.condition.is_none() && r.description.is_some())
        .collect();
    if listed.is_empty() {
        return;
    }
    prompt.push_str(
        "\n\n# Rules\n\nRead a rule's file with the read tool when the task concerns it:\n",
    );
    for r in listed {
        let globs = if r.globs.is_empty() {
            String::new()
        } else {
            format!(" [files: {}]", r.globs.join(", "))
        };
        prompt.push_str(&format!(
            "- {}: {}{globs} ({})\n",
            r.name,
            r.description.as_deref().unwrap_or_default(),
            r.path.display()
        ));
    }
}

fn builtin(tools: &[ToolSpec]) -> String {
    let mut p = String::from(
        "You are gjc, an expert coding assistant working in the user's project through tools. \
You read files, edit them, run commands and search the code base to complete the user's task.\n\n",
    );
    if tools.is_empty() {
        p.push_str("No tools are available in this session; answer from the conversation alone.\n");
    } else {
        p.push_str("Available tools:\n");
        for t in tools {
            let first = t.description.split(". ").next().unwrap_or(&t.description);
            p.push_str(&format!("- {}: {}\n", t.name, first.trim_end_matches('.')));
        }
    }
    p.push_str(
        "\nGuidelines:\n\
- Read a file before editing it; use edit for precise changes and write for new files or full rewrites.\n\
- Prefer grep, find and ls over bash for exploring files.\n\
- Run the project's tests or build after changes when you can.\n\
- Be concise; show file paths clearly when you refer to code.",
    );
    p
}

/// AGENTS.md (or CLAUDE.md) from the agent dir, then from the root down to the cwd.
pub fn context_files(agent_dir: &Path, cwd: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    if let Some(f) = context_file_in(agent_dir) {
        found.push(f);
    }
    let mut chain: Vec<(PathBuf, String)> = cwd.ancestors().filter_map(context_file_in).collect();
    chain.reverse();
    for f in chain {
        if !found.iter().any(|(p, _)| *p == f.0) {
            found.push(f);
        }
    }
    found
}

/// The first of AGENTS.md and CLAUDE.md in `dir` that can be read. One that exists and cannot
/// be read (a FIFO, a device, too large) is skipped with a warning.
fn context_file_in(dir: &Path) -> Option<(PathBuf, String)> {
    ["AGENTS.md", "CLAUDE.md"].iter().find_map(|name| {
        let path = dir.join(name);
        match bounded::read_to_string(&path, MAX_CONTEXT_FILE_BYTES, Links::Follow) {
            Ok(text) => Some((path, text)),
            Err(e) => {
                warn_unread("context file", &path, &e);
                None
            }
        }
    })
}

/// A file that exists and was not read goes to the log; a missing one is no news.
fn warn_unread(what: &str, path: &Path, e: &ReadError) {
    if !e.is_not_found() {
        log::warn!("skipping {what} {}: {e}", path.display());
    }
}

/// The text of a skill's SKILL.md, bounded like every context file; a file that exists and
/// cannot be read is reported in the log.
pub fn read_skill(path: &Path) -> Option<String> {
    bounded::read_to_string(path, MAX_SKILL_BYTES, Links::Follow)
        .map_err(|e| warn_unread("skill file", path, &e))
        .ok()
}

pub struct Skill {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
}

/// Skills are folders holding a SKILL.md whose front matter has `name` and `description`, under
/// `<agent dir>/skills` and `<cwd>/.gjc/skills`.
pub fn find_skills(agent_dir: &Path, cwd: &Path) -> Vec<Skill> {
    let mut skills = Vec::new();
    for root in [agent_dir.join("skills"), cwd.join(".gjc").join("skills")] {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let path = dir.join("SKILL.md");
            let Some(text) = read_skill(&path) else {
                continue;
            };
            let field = |key: &str| {
                front_matter(&text).and_then(|fm| {
                    fm.lines().find_map(|l| {
                        l.strip_prefix(key)
                            .map(|v| v.trim().trim_matches('"').to_string())
                    })
                })
            };
            let name = field("name:").unwrap_or_else(|| {
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
            let description = field("description:").unwrap_or_default();
            skills.push(Skill {
                name,
                description,
                path,
            });
        }
    }
    skills
}

fn front_matter(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---")?;
    let end = rest.find("\n---")?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_files_from_root_down_and_skills() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let proj = tmp.path().join("a/b");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::create_dir_all(agent.join("skills/lint")).unwrap();
        std::fs::write(agent.join("AGENTS.md"), "global").unwrap();
        std::fs::write(tmp.path().join("a/CLAUDE.md"), "outer").unwrap();
        std::fs::write(proj.join("AGENTS.md"), "inner").unwrap();
        std::fs::write(
            agent.join("skills/lint/SKILL.md"),
            "---\nname: lint\ndescription: Lint the code\n---\nbody",
        )
        .unwrap();
        let files: Vec<String> = context_files(&agent, &proj)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(files, vec!["global", "outer", "inner"]);
        let opts = PromptOptions {
            cwd: &proj,
            agent_dir: &agent,
            tools: &[],
            replace: Some("X"),
            append: Some("Y"),
            rules: true,
            rule_set: &RuleSet::default(),
            skills: true,
        };
        let p = build(&opts);
        assert!(p.starts_with("X\n\nY"));
        assert!(p.contains("- lint: Lint the code"));
        let opts = PromptOptions {
            rules: false,
            skills: false,
            ..opts
        };
        assert!(!build(&opts).contains("inner"));
    }

    #[test]
    fn rules_in_the_prompt() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".gjc/rules");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.md"),
            "---\nalwaysApply: true\n---\nAlways tabs.",
        )
        .unwrap();
        std::fs::write(
            dir.join("b.md"),
            "---\ndescription: SQL style\nglobs: \"*.sql\"\n---\nUpper case.",
        )
        .unwrap();
        std::fs::write(dir.join("c.md"), "---\ncondition: foo\n---\nNever foo.").unwrap();
        let (set, warnings) = RuleSet::load(&tmp.path().join("agent"), tmp.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        let p = build(&PromptOptions {
            cwd: tmp.path(),
            agent_dir: &tmp.path().join("agent"),
            tools: &[],
            replace: Some("X"),
            append: None,
            rules: true,
            rule_set: &set,
            skills: false,
        });
        assert!(p.contains("# Rule: a\n\nAlways tabs."), "{p}");
        assert!(p.contains("- b: SQL style [files: *.sql]"), "{p}");
        assert!(!p.contains("Never foo"), "{p}");
    }
}
