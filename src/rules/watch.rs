//! Matching conditional rules against a model stream, incrementally.
//!
//! Each scope (text, thinking, tool-call arguments) is streamed through lazy DFAs of its
//! conditions (`stream.rs`): a delta costs one step per byte of its own. Conditions with a
//! Unicode `\b` get a DFA of their own, since it stops at non-ASCII text; its conditions then fall
//! back, for the rest of the block, to the tail window of what was streamed in it: the last
//! [`WINDOW`] bytes. There a delta is appended to the window, the window (at most `WINDOW` + the
//! delta) is searched once for those conditions together (a `RegexSet` built on first need,
//! linear time), then cut back to its last `WINDOW` bytes: bounded cost, but a match longer than
//! the window is not found. Scopes with such conditions keep the window (cut in larger steps)
//! while their DFA runs, so that the fallback has it.
//!
//! In the window, a new match must end inside the new delta (one ending before it was looked for
//! already). So conditions whose matches have a bounded length (`maximum_len` of the parsed
//! pattern: most literal-like conditions) are searched together from just that far back before
//! the delta, with the bytes before as look-behind context for `\b` and `^`; only conditions that
//! can match without a bound (`.*`, `\s+`) search the whole window.

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

use std::sync::OnceLock;

use super::stream::{unicode_word, Cursor, StreamDfa};
use super::{group_dfa_limit, Rule, Scope, REGEX_DFA_LIMIT, REGEX_SIZE_LIMIT};
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
    /// The bytes their matches can end with: a delta without one is not searched.
    ends: super::ends::EndBytes,
}

impl ScopeSet {
    fn build(conditions: &[String], members: Vec<usize>, reach: Option<usize>) -> Option<ScopeSet> {
        if members.is_empty() {
            return None;
        }
        let patterns = members.iter().map(|&i| conditions[i].as_str());
        let built = RegexSetBuilder::new(patterns)
            .size_limit(REGEX_SIZE_LIMIT.saturating_mul(members.len()))
            .dfa_size_limit(group_dfa_limit(members.len()))
            .build();
        match built {
            Ok(set) => Some(ScopeSet {
                set,
                ends: super::ends::end_bytes(members.iter().map(|&i| conditions[i].as_str())),
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
        // A new match ends in the delta, with one of its last bytes.
        if !super::ends::may_end_in(&self.ends, &haystack.as_bytes()[old_end..]) {
            return Vec::new();
        }
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

/// Conditions of one scope streamed through one lazy DFA, with the window sets for the blocks
/// that DFA cannot follow (see `stream.rs`), built the first time they are needed.
struct Group {
    members: Vec<usize>,
    dfa: Option<StreamDfa>,
    /// Whether the DFA may stop in a block (it has a Unicode `\b` or a bounded cache it may give
    /// up on, or it could not be built).
    may_fall_back: bool,
    /// Split by reach: bounded conditions search only near the delta.
    sets: OnceLock<Vec<ScopeSet>>,
}

impl Group {
    fn new(rules: &[Rule], members: Vec<usize>) -> Group {
        let dfa = StreamDfa::build(rules, &members);
        Group {
            may_fall_back: dfa.as_ref().is_none_or(StreamDfa::may_stop),
            dfa,
            members,
            sets: OnceLock::new(),
        }
    }

    /// The window sets: conditions of bounded reach together, the others together.
    fn sets(&self, conditions: &[String]) -> &[ScopeSet] {
        self.sets.get_or_init(|| {
            let (mut bounded, mut unbounded, mut longest) = (Vec::new(), Vec::new(), 0);
            for &i in &self.members {
                match reach(&conditions[i]) {
                    Some(n) => {
                        longest = longest.max(n);
                        bounded.push(i);
                    }
                    None => unbounded.push(i),
                }
            }
            [
                ScopeSet::build(conditions, bounded, Some(longest)),
                ScopeSet::build(conditions, unbounded, None),
            ]
            .into_iter()
            .flatten()
            .collect()
        })
    }
}

/// One scope's conditions, in (at most) two groups: those a DFA always follows, and those with a
/// Unicode word boundary, whose DFA stops at non-ASCII text; so such a stop leaves the others
/// streaming.
#[derive(Default)]
struct ScopeWatch {
    /// Every rule watching this scope.
    members: Vec<usize>,
    groups: Vec<Group>,
    /// Some group may fall back to the window: the window is kept.
    keep_window: bool,
}

/// The compiled conditions of a rule set, per scope.
#[derive(Default)]
pub struct Watcher {
    /// Each rule's condition (empty: none), for building window sets when first needed.
    conditions: Vec<String>,
    scopes: [ScopeWatch; 3],
}

/// What one stream has seen, per scope, and which rules may still fire in it.
pub struct Watch {
    armed: Vec<bool>,
    lanes: [Lane; 3],
}

/// One scope of one stream: where it stands in each group's DFA (made on its first delta), and
/// the tail of the current block for the window search.
#[derive(Default)]
struct Lane {
    /// Boxed: a DFA cache is large, and the watch lives inside the run's phase.
    cursors: Vec<Option<Box<Cursor>>>,
    window: Window,
}

#[derive(Default)]
struct Window {
    /// The content block the tail belongs to; a new block starts a new window.
    block: Option<usize>,
    tail: String,
}

impl Window {
    /// Appends `delta` when the window is `kept`; whether it starts a new block.
    fn push(&mut self, block: usize, delta: &str, kept: bool) -> bool {
        let new = self.block != Some(block);
        if new {
            self.block = Some(block);
            self.tail.clear();
        }
        if kept {
            self.tail.push_str(delta);
        }
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
        let mut watcher = Watcher {
            conditions: rules
                .iter()
                .map(|r| r.condition.clone().unwrap_or_default())
                .collect(),
            ..Watcher::default()
        };
        for scope in Scope::ALL {
            let members: Vec<usize> = (0..rules.len())
                .filter(|&i| rules[i].condition.is_some() && rules[i].watches(scope))
                .collect();
            let (word, plain): (Vec<usize>, Vec<usize>) = members
                .iter()
                .partition(|&&i| unicode_word(rules[i].condition.as_deref().unwrap_or("")));
            let groups: Vec<Group> = [plain, word]
                .into_iter()
                .filter(|g| !g.is_empty())
                .map(|g| Group::new(rules, g))
                .collect();
            watcher.scopes[scope as usize] = ScopeWatch {
                keep_window: groups.iter().any(|g| g.may_fall_back),
                members,
                groups,
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
        let Lane { cursors, window } = &mut watch.lanes[scope as usize];
        let new_block = window.push(block, delta, sw.keep_window);
        cursors.resize_with(sw.groups.len(), || None);
        let mut fired = Vec::new();
        let mut searched = false;
        for (group, cursor) in sw.groups.iter().zip(cursors.iter_mut()) {
            let streamed = group.dfa.as_ref().is_some_and(|dfa| {
                let cursor = cursor.get_or_insert_with(|| Box::new(dfa.cursor()));
                if new_block {
                    dfa.reset(cursor);
                }
                dfa.feed(cursor, delta.as_bytes(), &watch.armed, &mut fired)
            });
            if !streamed {
                searched = true;
                // Without a kept window (a group that lost its DFA state after a cache clear),
                // the delta alone is searched.
                let haystack = if sw.keep_window { &window.tail } else { delta };
                self.search_window(group, haystack, delta.len(), &watch.armed, &mut fired);
            }
        }
        // A rule fires once per stream, even if its match stays in the window.
        fired.iter().for_each(|&i| watch.armed[i] = false);
        window.trim(if searched { 0 } else { WINDOW });
        fired
    }

    /// The window search of `group` for a match that ends in the last `delta_len` bytes.
    fn search_window(
        &self,
        group: &Group,
        haystack: &str,
        delta_len: usize,
        armed: &[bool],
        fired: &mut Vec<usize>,
    ) {
        let old_end = haystack.len() - delta_len;
        for set in group.sets(&self.conditions) {
            for i in set.matches(haystack, old_end, armed) {
                if !fired.contains(&i) {
                    fired.push(i);
                }
            }
        }
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
        // No condition can stop the DFA: no window is kept at all.
        assert!(!w.scopes[0].keep_window);
        assert!(watch.lanes[0].window.tail.is_empty());
        // The DFA kept its state: a match longer than the window is found.
        assert_eq!(w.check(&mut watch, &text(0, "end")), vec![0]);
        // With a condition that may stop it, the window is kept, and bounded.
        let rules = vec![
            rule("a", "start.*end", vec![]),
            rule("w", "\\bx\\b", vec![]),
        ];
        let w = Watcher::new(&rules);
        let mut watch = w.watch(vec![true, true]).unwrap();
        for _ in 0..WINDOW {
            assert!(w.check(&mut watch, &text(0, "yy")).is_empty());
        }
        assert!(watch.lanes[0].window.tail.len() <= 2 * WINDOW);
        let big = "y".repeat(10 * WINDOW);
        w.check(&mut watch, &text(0, &big));
        assert!(watch.lanes[0].window.tail.capacity() <= 4 * WINDOW);
    }

    /// Many conditions share one bounded cache; a DFA that keeps clearing it gives up, and its
    /// conditions are found in the window instead.
    #[test]
    fn many_conditions_share_a_bounded_cache_and_fall_back_when_it_thrashes() {
        let n = 100;
        let rules: Vec<Rule> = (0..n)
            .map(|i| rule(&format!("r{i}"), &format!("a[ab]{{18}}c{i}z"), vec![]))
            .collect();
        let w = Watcher::new(&rules);
        let dfa = w.scopes[0].groups[0].dfa.as_ref().expect("one DFA");
        assert_eq!(dfa.cache_capacity(), crate::rules::GROUP_DFA_LIMIT);
        assert!(
            w.scopes[0].keep_window,
            "a DFA that may give up keeps the window"
        );
        let mut watch = w.watch(vec![true; n]).unwrap();
        // a/b text (xorshift): nearly every byte needs a new DFA state.
        let mut x: u32 = 2463534242;
        let mut gave_up = false;
        for _ in 0..2048 {
            let delta: String = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    if x & 1 == 0 {
                        'a'
                    } else {
                        'b'
                    }
                })
                .collect();
            // No `c` yet: nothing matches.
            assert!(w.check(&mut watch, &text(0, &delta)).is_empty());
            let cursor = watch.lanes[0].cursors[0].as_ref().unwrap();
            if StreamDfa::stopped(cursor) {
                gave_up = true;
                break;
            }
        }
        assert!(gave_up, "the thrashing DFA gives up within 128 KiB");
        let hit = format!("a{}c7z", "b".repeat(18));
        assert_eq!(w.check(&mut watch, &text(0, &hit)), vec![7]);
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
        // Only the group with the word boundary fell back; the other one streams on.
        let groups = &w.scopes[0].groups;
        assert_eq!(
            (groups[0].members.clone(), groups[1].members.clone()),
            (vec![1], vec![0])
        );
        assert!(groups[0].sets.get().is_none() && groups[1].sets.get().is_some());
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
        let all = "begin wordy TODO-77 and é TODO-7x, TODO-7 a 1234z\nfn main() { PassWord =  9; forbidden_call_12(); }";
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
            let chars: Vec<char> = all.chars().collect();
            for (n, chunk) in chars.chunks(size).enumerate() {
                let piece: String = chunk.iter().collect();
                seen.push_str(&piece);
                for i in w.check(&mut watch, &text(0, &piece)) {
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
