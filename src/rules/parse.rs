//! One rule file: `---`, YAML front matter, `---`, then the markdown body (the rule's content).
//! A file without front matter is a rule with no metadata (its name is the file's stem).

use std::path::Path;

use serde::Deserialize;

use super::{Level, Repeat, Rule, Scope};

/// A field that may be written as one string or a list of strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    globs: Option<OneOrMany>,
    always_apply: Option<bool>,
    condition: Option<OneOrMany>,
    scope: Option<OneOrMany>,
    repeat_mode: Option<String>,
    repeat_gap: Option<u64>,
}

/// Splits `text` into its front matter (without the fences) and body.
fn split(text: &str) -> (Option<&str>, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, text);
    };
    // The closing fence is a line of its own; front matter may be empty.
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return (Some(&rest[..at]), &rest[at + line.len()..]);
        }
        at += line.len();
    }
    (None, text)
}

/// Why a rule file is not a rule.
#[derive(Debug)]
pub enum ParseError {
    /// The front matter is not YAML of the expected shape.
    FrontMatter(serde_yaml_ng::Error),
    /// A `scope` that is none of text, thinking or tool.
    UnknownScope(String),
    /// A `repeatMode` that is neither once nor gap.
    UnknownRepeat(String),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::FrontMatter(e) => write!(f, "front matter: {e}"),
            ParseError::UnknownScope(s) => {
                write!(f, "unknown scope {s:?} (text, thinking or tool)")
            }
            ParseError::UnknownRepeat(m) => write!(f, "unknown repeatMode {m:?} (once or gap)"),
        }
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ParseError::FrontMatter(e) => Some(e),
            _ => None,
        }
    }
}

pub fn parse(text: &str, stem: &str, path: &Path, level: Level) -> Result<Rule, ParseError> {
    let (front, body) = split(text);
    let fm: FrontMatter = match front {
        Some(yaml) if !yaml.trim().is_empty() => {
            serde_yaml_ng::from_str(yaml).map_err(ParseError::FrontMatter)?
        }
        _ => FrontMatter::default(),
    };
    let name = fm
        .name
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| stem.to_string());
    let condition = fm
        .condition
        .map(OneOrMany::into_vec)
        .map(|alts| match alts.as_slice() {
            [one] => one.clone(),
            // Several conditions: any of them.
            many => many
                .iter()
                .map(|c| format!("(?:{c})"))
                .collect::<Vec<_>>()
                .join("|"),
        })
        .filter(|c| !c.is_empty());
    let scopes = match fm.scope {
        None => Vec::new(),
        Some(s) => s
            .into_vec()
            .iter()
            .map(|s| Scope::parse(s).ok_or_else(|| ParseError::UnknownScope(s.clone())))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let repeat = match fm.repeat_mode.as_deref() {
        None | Some("once") => Repeat::Once,
        // A gap of at least one turn, so a rule cannot fire again on the request it caused.
        Some("gap" | "after-gap") => Repeat::Gap(fm.repeat_gap.unwrap_or(1).max(1)),
        Some(other) => return Err(ParseError::UnknownRepeat(other.to_string())),
    };
    Ok(Rule {
        name,
        path: path.to_path_buf(),
        content: body.trim().to_string(),
        description: fm.description,
        globs: fm.globs.map(OneOrMany::into_vec).unwrap_or_default(),
        always_apply: fm.always_apply.unwrap_or(false),
        condition,
        scopes,
        repeat,
        level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> Result<Rule, ParseError> {
        parse(text, "stem", Path::new("/r/stem.md"), Level::User)
    }

    #[test]
    fn front_matter_fields() {
        let r = rule(
            "---\nname: no-unwrap\ndescription: \"Avoid: unwrap\"\nglobs: [\"*.rs\", \"src/**\"]\n\
condition:\n  - '\\.unwrap\\(\\)'\n  - expect\\(\nscope: [text, tool]\nrepeatMode: gap\nrepeatGap: 4\n---\n\nUse `?`.\n",
        )
        .unwrap();
        assert_eq!(r.name, "no-unwrap");
        assert_eq!(r.description.as_deref(), Some("Avoid: unwrap"));
        assert_eq!(r.globs, vec!["*.rs", "src/**"]);
        assert_eq!(
            r.condition.as_deref(),
            Some(r"(?:\.unwrap\(\))|(?:expect\()")
        );
        assert_eq!(r.scopes, vec![Scope::Text, Scope::Tool]);
        assert_eq!(r.repeat, Repeat::Gap(4));
        assert_eq!(r.content, "Use `?`.");
        assert!(!r.always_apply);
    }

    #[test]
    fn no_front_matter_and_defaults() {
        let r = rule("Just a body\n---\nstill body").unwrap();
        assert_eq!(r.name, "stem");
        assert_eq!(r.content, "Just a body\n---\nstill body");
        assert_eq!(r.repeat, Repeat::Once);
        assert!(r.scopes.is_empty() && r.condition.is_none());
        let r = rule("---\n---\nbody").unwrap();
        assert_eq!(r.content, "body");
        let r = rule("---\nrepeatMode: gap\nrepeatGap: 0\n---\nb").unwrap();
        assert_eq!(r.repeat, Repeat::Gap(1));
    }

    #[test]
    fn bad_front_matter_is_an_error() {
        let e = rule("---\nname: [unclosed\n---\nb").unwrap_err();
        assert!(matches!(e, ParseError::FrontMatter(_)), "{e:?}");
        assert!(e.to_string().starts_with("front matter: "), "{e}");
        let e = rule("---\nscope: everything\n---\nb").unwrap_err();
        assert!(
            matches!(&e, ParseError::UnknownScope(s) if s == "everything"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "unknown scope \"everything\" (text, thinking or tool)"
        );
        let e = rule("---\nrepeatMode: twice\n---\nb").unwrap_err();
        assert!(
            matches!(&e, ParseError::UnknownRepeat(m) if m == "twice"),
            "{e:?}"
        );
        assert!(e.to_string().contains("repeatMode"));
        assert!(matches!(
            rule("---\nalwaysApply: maybe\n---\nb"),
            Err(ParseError::FrontMatter(_))
        ));
    }
}
