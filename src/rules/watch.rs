//! Matching conditional rules against a model stream, incrementally.
//!
//! Each scope (text, thinking, tool-call arguments) is streamed through a lazy DFA of its
//! conditions (`stream.rs`): a delta costs one step per byte of its own. When the DFA cannot
//! follow a block (a Unicode `\b` over non-ASCII text), the scope falls back for the rest of the
//! block to the tail window of what was streamed in it: the last [`WINDOW`] bytes. There a delta
//! is appended to the window, the window (at most `WINDOW` + the delta) is searched once for all
//! the scope's conditions together (one `RegexSet`, linear time), then cut back to its last
//! `WINDOW` bytes: bounded cost, but a match longer than the window is not found. The window is
//! kept (cut in larger steps) while the DFA runs, so that the fallback has it.
//!
//! In the window, a new match must end inside the new delta (one ending before it was looked for
//! already). So conditions whose matches have a bounded length (`maximum_len` of the parsed
//! pattern: most literal-like conditions) are searched together from just that far back before
//! the delta, with the bytes before as look-behind context for `\b` and `^`; only conditions that
//! can match without a bound (`.*`, `\s+`) search the whole window.

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

use super::stream::{Cursor, StreamDfa};
use super::{Rule, Scope, REGEX_DFA_LIMIT, REGEX_SIZE_LIMIT};
use crate::protocol::message::StreamEvent;

/// The bytes of earlier output each scope keeps for a match to span deltas.
pub const WINDOW: usize = 4096;

/// One condition, with the size limits every condition gets.
pub fn compile(condition: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(condition)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_LIMIT)
        .build()
}

/// The longest match of `condition` in bytes, if it has a bound.
fn reach(condition: &str) -> Option<usize> {
    let hir = regex_syntax::Parser::new().parse(condition).ok()?;
    hir.properties().maximum_len()
}

/// Conditions of one scope, compiled together.
struct ScopeSet {
    set: RegexSet,
    /// The rule index of each pattern of `set`.
    members: Vec<usize>,
    /// The longest match of any of them (`None`: unbounded, search the whole window).
    reach: Option<usize>,
}

impl ScopeSet {
    fn build(rules: &[Rule], members: Vec<usize>, reach: Option<usize>) -> Option<ScopeSet> {
        if members.is_empty() {
            return None;
        }
        let patterns = members
            .iter()
            .map(|&i| rules[i].condition.as_deref().unwrap_or(""));
        let built = RegexSetBuilder::new(patterns)
            .size_limit(REGEX_SIZE_LIMIT.saturating_mul(members.len()))
            .dfa_size_limit(REGEX_DFA_LIMIT.saturating_mul(members.len()))
            .build();
        match built {
            Ok(set) => Some(ScopeSet {
                set,
                members,
                reach,
            }),
            Err(e) => {
                log::warn!("{} conditional rules not watched: {e}", members.len());
                None
            }
        }
    }

    /// The armed rules matching in `haystack` with a match that may end after `old_end`.
    fn matches(&self, haystack: &str, old_end: usize, armed: &[bool]) -> Vec<usize> {
        let mut start = match self.reach {
            Some(r) => old_end.saturating_sub(r),
            None => 0,
        };
        while !haystack.is_char_boundary(start) {
            start -= 1;
        }
        if !self.set.is_match_at(haystack, start) {
            return Vec::new();
        }
        self.set
            .matches_at(haystack, start)
            .into_iter()
            .map(|p| self.members[p])
            .filter(|&i| armed[i])
            .collect()
    }
}

/// One scope's conditions: streamed through a lazy DFA, with the window sets for the blocks the
/// DFA cannot follow (see `stream.rs`).
#[derive(Default)]
struct ScopeWatch {
    /// Every rule watching this scope.
    members: Vec<usize>,
    dfa: Option<StreamDfa>,
    /// Split by reach: bounded conditions search only near the delta.
    sets: Vec<ScopeSet>,
}

/// The compiled conditions of a rule set, per scope.
#[derive(Default)]
pub struct Watcher {
    scopes: [ScopeWatch; 3],
}

/// What one stream has seen, per scope, and which rules may still fire in it.
pub struct Watch {
    armed: Vec<bool>,
    lanes: [Lane; 3],
}

/// One scope of one stream: where it stands in the DFA (made on its first delta), and the tail
/// of the current block for the window search.
#[derive(Default)]
struct Lane {
    /// Boxed: a DFA cache is large, and the watch lives inside the run's phase.
    cursor: Option<Box<Cursor>>,
    window: Window,
}

#[derive(Default)]
struct Window {
    /// The content block the tail belongs to; a new block starts a new window.
    block: Option<usize>,
    tail: String,
}

impl Window {
    /// Appends `delta`; whether it starts a new block (the tail then holds only the delta).
    fn push(&mut self, block: usize, delta: &str) -> bool {
        let new = self.block != Some(block);
        if new {
            self.block = Some(block);
            self.tail.clear();
        }
        self.tail.push_str(delta);
        new
    }

    /// Cuts the tail back to its last [`WINDOW`] bytes once it is longer than that by `slack`
    /// (a window that is not searched is cut in large steps, so a delta costs no copy).
    fn trim(&mut self, slack: usize) {
        if self.tail.len() > WINDOW + slack {
            let mut cut = self.tail.len() - WINDOW;
            while !self.tail.is_char_boundary(cut) {
                cut += 1;
            }
            self.tail.drain(..cut);
        }
        // A single huge delta leaves a large buffer behind; give it back.
        if self.tail.capacity() > 4 * WINDOW {
            self.tail.shrink_to(2 * WINDOW);
        }
    }
}

impl Watcher {
    /// Compiles the conditions of `rules` by scope (conditions were checked to compile alone).
    pub fn new(rules: &[Rule]) -> Watcher {
        let mut watcher = Watcher::default();
        for scope in Scope::ALL {
            let (mut bounded, mut unbounded, mut longest) = (Vec::new(), Vec::new(), 0);
            let mut members = Vec::new();
            for (i, r) in rules.iter().enumerate() {
                let Some(c) = r.condition.as_deref().filter(|_| r.watches(scope)) else {
                    continue;
                };
                members.push(i);
                match reach(c) {
                    Some(n) => {
                        longest = longest.max(n);
                        bounded.push(i);
                    }
                    None => unbounded.push(i),
                }
            }
            if members.is_empty() {
                continue;
            }
            watcher.scopes[scope as usize] = ScopeWatch {
                dfa: StreamDfa::build(rules, &members),
                members,
                sets: [
                    ScopeSet::build(rules, bounded, Some(longest)),
                    ScopeSet::build(rules, unbounded, None),
                ]
                .into_iter()
                .flatten()
                .collect(),
            };
        }
        watcher
    }

    /// A watch for a stream in which the `armed` rules may fire; `None` if none can.
    pub fn watch(&self, armed: Vec<bool>) -> Option<Watch> {
        let any = self
            .scopes
            .iter()
            .any(|s| s.members.iter().any(|&i| armed[i]));
        any.then(|| Watch {
            armed,
            lanes: Default::default(),
        })
    }

    /// Feeds a delta; the armed rules whose condition now matches.
    pub fn check(&self, watch: &mut Watch, event: &StreamEvent) -> Vec<usize> {
        let (scope, block, delta) = match event {
            StreamEvent::TextDelta {
                content_index,
                delta,
            } => (Scope::Text, *content_index, delta),
            StreamEvent::ThinkingDelta {
                content_index,
                delta,
            } => (Scope::Thinking, *content_index, delta),
            StreamEvent::ToolcallDelta {
                content_index,
                delta,
            } => (Scope::Tool, *content_index, delta),
            _ => return Vec::new(),
        };
        let sw = &self.scopes[scope as usize];
        if sw.members.is_empty() {
            return Vec::new();
        }
        let Lane { cursor, window } = &mut watch.lanes[scope as usize];
        let new_block = window.push(block, delta);
        let mut fired = Vec::new();
        let streamed = sw.dfa.as_ref().is_some_and(|dfa| {
            let cursor = cursor.get_or_insert_with(|| Box::new(dfa.cursor()));
            if new_block {
                dfa.reset(cursor);
            }
            dfa.feed(cursor, delta.as_bytes(), &watch.armed, &mut fired)
        });
        if !streamed {
            let haystack = &window.tail;
            let old_end = haystack.len() - delta.len();
            for i in sw
                .sets
                .iter()
                .flat_map(|set| set.matches(haystack, old_end, &watch.armed))
            {
                if !fired.contains(&i) {
                    fired.push(i);
                }
            }
        }
        // A rule fires once per stream, even if its match stays in the window.
        fired.iter().for_each(|&i| watch.armed[i] = false);
        window.trim(if streamed { WINDOW } else { 0 });
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{Level, Repeat};
    use std::path::PathBuf;

    fn rule(name: &str, condition: &str, scopes: Vec<Scope>) -> Rule {
        Rule {
            name: name.into(),
            path: PathBuf::from(format!("/r/{name}.md")),
            content: String::new(),
            description: None,
            globs: Vec::new(),
            always_apply: false,
            condition: Some(condition.into()),
            scopes,
            repeat: Repeat::Once,
            level: Level::User,
        }
    }

    fn text(i: usize, d: &str) -> StreamEvent {
        StreamEvent::TextDelta {
            content_index: i,
            delta: d.into(),
        }
    }

    #[test]
    fn matches_across_deltas_within_a_scope() {
        let rules = vec![
            rule("a", "unwrap\\(\\)", vec![Scope::Text]),
            rule("b", "secret", vec![Scope::Thinking]),
        ];
        let w = Watcher::new(&rules);
        let mut watch = w.watch(vec![true, true]).unwrap();
        assert!(w.check(&mut watch, &text(0, "x.unw")).is_empty());
        assert_eq!(w.check(&mut watch, &text(0, "rap()")), vec![0]);
        // The thinking rule ignores text.
        assert!(w.check(&mut watch, &text(0, "secret")).is_empty());
        let think = StreamEvent::ThinkingDelta {
            content_index: 1,
            delta: "a secret".into(),
        };
        assert_eq!(w.check(&mut watch, &think), vec![1]);
    }

    #[test]
    fn a_new_block_starts_a_new_window_and_disarmed_rules_stay_quiet() {
        let rules = vec![rule("a", "ab", vec![]), rule("b", "zz", vec![])];
        let w = Watcher::new(&rules);
        let mut watch = w.watch(vec![true, false]).unwrap();
        assert!(w.check(&mut watch, &text(0, "a")).is_empty());
        assert!(w.check(&mut watch, &text(1, "b")).is_empty());
        assert!(w.check(&mut watch, &text(1, "zz")).is_empty());
        let tool = StreamEvent::ToolcallDelta {
            content_index: 2,
            delta: "{\"x\":\"ab\"}".into(),
        };
        assert_eq!(w.check(&mut watch, &tool), vec![0]);
        assert!(w.watch(vec![false, false]).is_none());
    }

    #[test]
    fn a_streamed_match_spans_any_number_of_deltas_and_the_window_stays_bounded() {
        let rules = vec![rule("a", "start.*end", vec![])];
        let w = Watcher::new(&rules);
        let mut watch = w.watch(vec![true]).unwrap();
        w.check(&mut watch, &text(0, "start"));
        for _ in 0..WINDOW {
            assert!(w.check(&mut watch, &text(0, "é")).is_empty());
        }
        assert!(watch.lanes[0].window.tail.len() <= 2 * WINDOW);
        // The DFA kept its state: a match longer than the window is found.
        assert_eq!(w.check(&mut watch, &text(0, "end")), vec![0]);
        let big = "x".repeat(10 * WINDOW);
        w.check(&mut watch, &text(0, &big));
        assert!(watch.lanes[0].window.tail.capacity() <= 4 * WINDOW);
    }

    #[test]
    fn a_unicode_word_boundary_falls_back_to_the_window_on_non_ascii_text() {
        let rules = vec![
            rule("w", "\\bTODO\\b", vec![]),
            rule("p", "pass\\s*=", vec![]),
        ];
        let w = Watcher::new(&rules);
        let mut watch = w.watch(vec![true, true]).unwrap();
        assert!(w.check(&mut watch, &text(0, "café éTODO ")).is_empty());
        assert!(w.check(&mut watch, &text(0, "pass ")).is_empty());
        assert_eq!(w.check(&mut watch, &text(0, " = ")), vec![1]);
        assert_eq!(w.check(&mut watch, &text(0, "é TODO")), vec![0]);
        // A new block streams again.
        let mut watch = w.watch(vec![true, true]).unwrap();
        w.check(&mut watch, &text(0, "é"));
        assert!(w.check(&mut watch, &text(1, "xTODO")).is_empty());
        assert_eq!(w.check(&mut watch, &text(1, " TODO.")), vec![0]);
    }

    /// A rule fires on the delta with which the output so far first matches it (the end of a
    /// delta is the end of the text for `\\b` and `$`), however the output is cut.
    #[test]
    fn streaming_agrees_with_a_search_of_each_output_so_far() {
        let conditions = [
            "forbidden_call_\\d+\\(",
            "(?i)password\\s*=\\s*\\d",
            "\\bTODO-7\\b",
            "^begin",
            "a[^z]{3,}z",
            "(?m)^fn main",
            "never here",
        ];
        let all = "begin wordy TODO-77 and TODO-7x, a 1234z\nfn main() { PassWord =  9; forbidden_call_12(); }";
        let rules: Vec<Rule> = conditions
            .iter()
            .enumerate()
            .map(|(i, c)| rule(&format!("r{i}"), c, vec![]))
            .collect();
        let regexes: Vec<Regex> = conditions.iter().map(|c| compile(c).unwrap()).collect();
        let w = Watcher::new(&rules);
        for size in [1, 2, 3, 5, 7, 64] {
            let mut watch = w.watch(vec![true; rules.len()]).unwrap();
            let mut first: Vec<Option<usize>> = vec![None; rules.len()];
            let mut expected: Vec<Option<usize>> = vec![None; rules.len()];
            let mut seen = String::new();
            for (n, chunk) in all.as_bytes().chunks(size).enumerate() {
                let piece = std::str::from_utf8(chunk).unwrap();
                seen.push_str(piece);
                for i in w.check(&mut watch, &text(0, piece)) {
                    first[i] = Some(n);
                }
                for (i, re) in regexes.iter().enumerate() {
                    if expected[i].is_none() && re.is_match(&seen) {
                        expected[i] = Some(n);
                    }
                }
            }
            assert_eq!(first, expected, "chunks of {size}");
            // `TODO-7` fires only if a delta ends right after it (in `TODO-77`).
            assert!(expected[2].is_some() || size > 1);
            assert!(expected[6].is_none());
        }
    }

    #[test]
    fn bounded_conditions_keep_their_look_behind_context() {
        let rules = vec![
            rule("word", "\\bTODO\\b", vec![]),
            rule("start", "^begin", vec![]),
        ];
        assert_eq!(reach("\\bTODO\\b"), Some(4));
        assert_eq!(reach("a.*b"), None);
        let w = Watcher::new(&rules);
        let mut watch = w.watch(vec![true, true]).unwrap();
        // `xTODO` has no word boundary before TODO, although the search starts near it.
        assert!(w.check(&mut watch, &text(0, &"a".repeat(100))).is_empty());
        assert!(w.check(&mut watch, &text(0, "xTO")).is_empty());
        assert!(w.check(&mut watch, &text(0, "DO ")).is_empty());
        assert!(
            w.check(&mut watch, &text(0, "begin")).is_empty(),
            "not at the start"
        );
        assert!(w.check(&mut watch, &text(0, " TO")).is_empty());
        assert_eq!(w.check(&mut watch, &text(0, "DO")), vec![0]);
        let mut watch = w.watch(vec![true, true]).unwrap();
        assert!(w.check(&mut watch, &text(0, "beg")).is_empty());
        assert_eq!(w.check(&mut watch, &text(0, "in")), vec![1]);
    }

    #[test]
    fn oversized_conditions_are_refused() {
        assert!(compile("(?:a{1000}){1000}").is_err());
        assert!(compile("foo|bar").is_ok());
    }
}
