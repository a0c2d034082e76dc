//! Rules: markdown files with YAML front matter, from `<agent dir>/rules/*.md` and
//! `<project>/.gjc/rules/*.md` (a project rule replaces a user rule of the same name).
//!
//! - `alwaysApply` rules join the system prompt (`crate::prompt`).
//! - A rule with a `condition` (a regular expression) costs nothing until the model's streamed
//!   output matches it: the session then stops the stream, discards the partial reply and sends
//!   the request again with the rule as a reminder ("time-traveling stream rules", `watch`).
//! - `history` remembers which rules fired in a session, so each fires once (or again after a
//!   gap of turns), across a reload of the session file.
//!
//! `parse` reads one file; this module finds the files and compiles the conditions.

mod ends;
mod history;
mod parse;
mod stream;
mod watch;

use std::path::{Path, PathBuf};

pub use history::Injections;
pub use watch::{Watch, WINDOW};

use crate::protocol::event::TtsrRule;
use crate::protocol::message::{Content, UserMessage};

/// A rule file larger than this is refused: rules are instructions, not documents.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// At most this many rule files are read from each folder.
const MAX_RULES_PER_DIR: usize = 500;
/// The compiled-program limit of one condition (`regex` refuses larger patterns).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// The lazy DFA cache of one condition.
pub const REGEX_DFA_LIMIT: usize = 2 << 20;
/// The lazy DFA cache of conditions compiled together, however many they are: a cache per
/// condition grew with the rule count (2 GB for 1,000 rules) while a search of many conditions
/// that keeps clearing its cache is no faster for a larger one.
pub const GROUP_DFA_LIMIT: usize = 4 * REGEX_DFA_LIMIT;

/// The cache of `n` conditions compiled together: one condition's each, up to the group's bound.
pub fn group_dfa_limit(n: usize) -> usize {
    REGEX_DFA_LIMIT.saturating_mul(n).min(GROUP_DFA_LIMIT)
}

/// Where the model's streamed output comes from; a rule's `scope` picks some of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Text = 0,
    Thinking = 1,
    Tool = 2,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Text, Scope::Thinking, Scope::Tool];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Text => "text",
            Scope::Thinking => "thinking",
            Scope::Tool => "tool",
        }
    }

    fn parse(s: &str) -> Option<Scope> {
        match s.trim() {
            "text" => Some(Scope::Text),
            "thinking" => Some(Scope::Thinking),
            "tool" | "toolCall" | "tool_call" => Some(Scope::Tool),
            _ => None,
        }
    }
}

/// How often a conditional rule may fire in one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    Once,
    /// Again once this many turns (finished model replies) have passed since it last fired.
    Gap(u64),
}

/// Whose folder a rule came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    User,
    Project,
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub path: PathBuf,
    pub content: String,
    pub description: Option<String>,
    pub globs: Vec<String>,
    pub always_apply: bool,
    /// The condition as written (compiled in [`RuleSet`]).
    pub condition: Option<String>,
    /// Empty: every scope.
    pub scopes: Vec<Scope>,
    pub repeat: Repeat,
    pub level: Level,
}

impl Rule {
    pub fn watches(&self, scope: Scope) -> bool {
        self.scopes.is_empty() || self.scopes.contains(&scope)
    }

    /// The rule as `ttsr_triggered` carries it.
    pub fn to_wire(&self) -> TtsrRule {
        let (repeat_mode, repeat_gap) = match self.repeat {
            Repeat::Once => ("once", None),
            Repeat::Gap(n) => ("gap", Some(n)),
        };
        TtsrRule {
            name: self.name.clone(),
            path: self.path.display().to_string(),
            content: self.content.clone(),
            globs: (!self.globs.is_empty()).then(|| self.globs.clone()),
            always_apply: self.always_apply.then_some(true),
            description: self.description.clone(),
            condition: self.condition.clone(),
            scope: (!self.scopes.is_empty())
                .then(|| self.scopes.iter().map(|s| s.as_str()).collect()),
            interrupt_mode: self.condition.as_ref().map(|_| "always"),
            repeat_mode: Some(repeat_mode),
            repeat_gap,
            source: serde_json::json!({
                "provider": "gjc",
                "level": match self.level { Level::User => "user", Level::Project => "project" },
            }),
        }
    }
}

/// The rules of a session, with every condition compiled once.
#[derive(Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    watcher: watch::Watcher,
}

impl RuleSet {
    /// Reads the rule folders. Files that cannot be used are skipped; why is returned, one line
    /// each, for the log.
    pub fn load(agent_dir: &Path, cwd: &Path) -> (RuleSet, Vec<String>) {
        let mut warnings = Vec::new();
        let mut rules: Vec<Rule> = Vec::new();
        let dirs = [
            (agent_dir.join("rules"), Level::User),
            (cwd.join(".gjc").join("rules"), Level::Project),
        ];
        for (dir, level) in dirs {
            for rule in read_dir(&dir, level, &mut warnings) {
                // A later folder (the project's) wins on a name clash.
                rules.retain(|r| r.name != rule.name);
                rules.push(rule);
            }
        }
        let set = RuleSet::from_rules(rules, &mut warnings);
        (set, warnings)
    }

    /// Compiles the conditions; a rule whose condition does not compile is dropped (it would
    /// otherwise never fire, silently).
    pub fn from_rules(rules: Vec<Rule>, warnings: &mut Vec<String>) -> RuleSet {
        let mut kept = Vec::with_capacity(rules.len());
        for rule in rules {
            match &rule.condition {
                Some(c) => match watch::compile(c) {
                    Ok(_) => kept.push(rule),
                    Err(e) => warnings.push(format!(
                        "rule {} ({}): condition is not usable: {e}",
                        rule.name,
                        rule.path.display()
                    )),
                },
                None => kept.push(rule),
            }
        }
        let watcher = watch::Watcher::new(&kept);
        RuleSet {
            rules: kept,
            watcher,
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn get(&self, index: usize) -> &Rule {
        &self.rules[index]
    }

    pub fn always_apply(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| r.always_apply)
    }

    /// A watch over one model stream for the conditional rules that may still fire, or `None`
    /// when there is none (the stream then costs nothing extra).
    pub fn watch(&self, history: &Injections) -> Option<Watch> {
        let armed: Vec<bool> = self
            .rules
            .iter()
            .map(|r| r.condition.is_some() && history.eligible(r))
            .collect();
        self.watcher.watch(armed)
    }

    /// Feeds one streamed delta to the watch; the indices of the rules it made fire.
    pub fn check(
        &self,
        watch: &mut Watch,
        event: &crate::protocol::message::StreamEvent,
    ) -> Vec<usize> {
        self.watcher.check(watch, event)
    }
}

/// The message the model sees after its output was stopped by `rules`: a user message marked as
/// a reminder (`attribution: "agent"`, wrapped in `<system-reminder>`), so neither the model nor
/// a host takes it for something the user typed.
pub fn reminder(rules: &[Rule]) -> UserMessage {
    let mut text = String::from(
        "<system-reminder>\nYour previous output was stopped because it matched a rule of this project. \
Follow the rule below and continue the task from where you were.\n",
    );
    for r in rules {
        text.push_str(&format!(
            "\n<rule name=\"{}\" path=\"{}\">\n{}\n</rule>\n",
            r.name,
            r.path.display(),
            r.content
        ));
    }
    text.push_str("</system-reminder>");
    UserMessage {
        content: vec![Content::text(&text)],
        attribution: Some("agent".into()),
        timestamp: crate::ids::now_ms(),
    }
}

/// The `*.md` files of one folder, sorted by name. Folders are passed over; anything else named
/// `*.md` (a link, a FIFO, a device) is read only if it turns out a regular file, else reported.
fn read_dir(dir: &Path, level: Level, warnings: &mut Vec<String>) -> Vec<Rule> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    if paths.len() > MAX_RULES_PER_DIR {
        warnings.push(format!(
            "{}: {} rule files, only the first {MAX_RULES_PER_DIR} are read",
            dir.display(),
            paths.len()
        ));
        paths.truncate(MAX_RULES_PER_DIR);
    }
    paths
        .into_iter()
        .filter_map(|path| match read_rule(&path, level) {
            Ok(rule) => Some(rule),
            Err(e) => {
                warnings.push(format!("rule {}: {e}", path.display()));
                None
            }
        })
        .collect()
}

fn read_rule(path: &Path, level: Level) -> Result<Rule, String> {
    use crate::fs::bounded::{self, Links};
    let text =
        bounded::read_to_string(path, MAX_FILE_BYTES, Links::Follow).map_err(|e| e.to_string())?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse::parse(&text, &stem, path, level).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn project_rules_win_and_bad_ones_are_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let proj = tmp.path().join("proj");
        write(
            &agent.join("rules"),
            "a.md",
            "---\nname: style\nalwaysApply: true\n---\nuser style",
        );
        write(
            &proj.join(".gjc/rules"),
            "b.md",
            "---\nname: style\nalwaysApply: true\n---\nproject style",
        );
        write(
            &proj.join(".gjc/rules"),
            "bad.md",
            "---\ncondition: \"(unclosed\"\n---\nx",
        );
        write(&proj.join(".gjc/rules"), "notes.txt", "ignored");
        let (set, warnings) = RuleSet::load(&agent, &proj);
        assert_eq!(set.rules().len(), 1);
        assert_eq!(set.rules()[0].content, "project style");
        assert_eq!(set.rules()[0].level, Level::Project);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("bad.md"), "{warnings:?}");
    }

    #[test]
    fn wire_shape_names_the_optional_fields_only_when_set() {
        let rule = parse::parse(
            "---\ncondition: foo\nscope: thinking\nrepeatMode: gap\nrepeatGap: 3\n---\nbody",
            "r",
            Path::new("/x/r.md"),
            Level::User,
        )
        .unwrap();
        let v = serde_json::to_value(rule.to_wire()).unwrap();
        assert_eq!(v["name"], "r");
        assert_eq!(v["scope"], serde_json::json!(["thinking"]));
        assert_eq!(v["repeatMode"], "gap");
        assert_eq!(v["repeatGap"], 3);
        assert_eq!(v["_source"]["level"], "user");
        assert!(v.get("globs").is_none() && v.get("alwaysApply").is_none());
    }
}
