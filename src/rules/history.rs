//! Which conditional rules fired in a session, and when (in turns). Each firing is written as a
//! `ttsr_injection` entry, `{injectedRules, ttsrMessageCount}`, where `ttsrMessageCount` is the
//! session's turn count at that moment; reading those entries back on load restores the history,
//! so a rule that fired once does not fire again after a reload.
//!
//! Turns are the model replies finished in this process since the session was opened, added to
//! the count of the last injection read back: replies between that injection and the reload are
//! not counted, so after a reload a `gap` rule waits at least its gap (never less).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{Repeat, Rule};

#[derive(Debug, Default, Clone)]
pub struct Injections {
    /// Rule name → the turn it last fired at.
    fired: HashMap<String, u64>,
    turns: u64,
}

impl Injections {
    /// Whether `rule` may fire now.
    pub fn eligible(&self, rule: &Rule) -> bool {
        match (self.fired.get(&rule.name), rule.repeat) {
            (None, _) => true,
            (Some(_), Repeat::Once) => false,
            (Some(&at), Repeat::Gap(gap)) => self.turns.saturating_sub(at) >= gap,
        }
    }

    /// A model reply finished.
    pub fn turn_done(&mut self) {
        self.turns += 1;
    }

    /// Notes that `names` fired now; the fields of the `ttsr_injection` entry that says so.
    pub fn record(&mut self, names: &[String]) -> Value {
        for n in names {
            self.fired.insert(n.clone(), self.turns);
        }
        json!({ "injectedRules": names, "ttsrMessageCount": self.turns })
    }

    /// Replays a `ttsr_injection` entry read from a session file.
    pub fn restore(&mut self, entry: &Value) {
        let at = entry["ttsrMessageCount"].as_u64().unwrap_or(self.turns);
        self.turns = self.turns.max(at);
        let names = entry["injectedRules"].as_array().into_iter().flatten();
        for name in names.filter_map(Value::as_str) {
            self.fired.insert(name.to_string(), at);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.fired.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse::parse;
    use crate::rules::Level;
    use std::path::Path;

    fn rule(front: &str) -> Rule {
        parse(
            &format!("---\n{front}\n---\nb"),
            "r",
            Path::new("/r.md"),
            Level::User,
        )
        .unwrap()
    }

    #[test]
    fn once_and_gap() {
        let once = rule("condition: x");
        let gap = rule("condition: x\nrepeatMode: gap\nrepeatGap: 2");
        let mut h = Injections::default();
        assert!(h.eligible(&once));
        let entry = h.record(&["r".into()]);
        assert_eq!(
            entry,
            json!({"injectedRules": ["r"], "ttsrMessageCount": 0})
        );
        assert!(!h.eligible(&once) && !h.eligible(&gap));
        h.turn_done();
        assert!(!h.eligible(&gap));
        h.turn_done();
        assert!(h.eligible(&gap) && !h.eligible(&once));
    }

    #[test]
    fn restored_from_entries() {
        let mut h = Injections::default();
        h.restore(
            &json!({"type": "ttsr_injection", "injectedRules": ["r", "s"], "ttsrMessageCount": 5}),
        );
        assert!(!h.eligible(&rule("condition: x")));
        let gap = rule("condition: x\nrepeatMode: gap\nrepeatGap: 1");
        assert!(!h.eligible(&gap));
        h.turn_done();
        assert!(h.eligible(&gap));
        assert!(!h.is_empty());
    }
}
