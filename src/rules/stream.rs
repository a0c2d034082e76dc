//! Streaming matching of conditions with a lazy DFA (`regex-automata`'s hybrid DFA).
//!
//! A group of one scope's conditions is compiled into one unanchored DFA that reports every
//! pattern matching at a position (`MatchKind::All`). A stream keeps the DFA's current state
//! between deltas, so a delta costs one transition per byte of its own, whatever came before it,
//! and a match may span any number of deltas of one content block. Memory is the DFA's cache,
//! bounded per rule like a condition's own cache; when full it is cleared and rebuilt as needed.
//!
//! A DFA cannot follow a Unicode `\b` across non-ASCII text: for such conditions (`watch.rs`
//! gives them a DFA of their own) it stops at the first non-ASCII byte ("quits"), and they fall
//! back to the bounded tail window for the rest of the block. So they do when a cache clear
//! happens on the end-of-input look-ahead (the cursor's state would no longer be valid): rare, as
//! the cache is only cleared once full.
//!
//! The cache of many conditions together is bounded ([`super::GROUP_DFA_LIMIT`]), not one
//! condition's bound times their number; such a DFA gives up when it keeps clearing its cache
//! (it builds a state for nearly every byte: conditions like `a[ab]{18}c`), and its conditions
//! fall back to the window for the rest of the block, as a quit does.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};

use super::{group_dfa_limit, Rule, REGEX_DFA_LIMIT, REGEX_SIZE_LIMIT};

/// A DFA whose cache is bounded below what its conditions could fill gives up (and its
/// conditions fall back to the window for the rest of the block) once it has cleared its cache
/// this many times while searching fewer than [`GIVE_UP_BYTES_PER_STATE`] bytes per state it
/// built: it then builds a state for nearly every byte and costs more than the window search.
/// One full cache is enough to tell: each further fill only adds to the cost.
const GIVE_UP_CLEARS: usize = 1;
const GIVE_UP_BYTES_PER_STATE: usize = 10;

/// One scope's conditions as a lazy DFA.
pub struct StreamDfa {
    dfa: DFA,
    /// The rule index of each pattern.
    members: Vec<usize>,
    /// Some condition has a Unicode word boundary: the DFA may quit on non-ASCII bytes.
    can_quit: bool,
    /// The cache is bounded below the conditions' own caches: the DFA may give up.
    may_give_up: bool,
}

/// Where one stream stands in one scope's DFA.
pub struct Cursor {
    cache: Cache,
    /// The current state; `None` once the DFA quit in this block.
    state: Option<LazyStateID>,
}

/// Whether a condition uses a Unicode word boundary (`\b`, `\B` outside `(?-u)`).
pub fn unicode_word(condition: &str) -> bool {
    regex_syntax::Parser::new()
        .parse(condition)
        .map(|hir| hir.properties().look_set().contains_word_unicode())
        .unwrap_or(true)
}

impl StreamDfa {
    /// `None` if the conditions cannot be compiled together within the size limits (the scope
    /// then uses the window for every block).
    pub fn build(rules: &[Rule], members: &[usize]) -> Option<StreamDfa> {
        let patterns: Vec<&str> = members
            .iter()
            .map(|&i| rules[i].condition.as_deref().unwrap_or(""))
            .collect();
        let can_quit = patterns.iter().any(|p| unicode_word(p));
        let capacity = group_dfa_limit(members.len());
        let may_give_up = capacity < REGEX_DFA_LIMIT.saturating_mul(members.len());
        let mut config = DFA::config()
            .match_kind(MatchKind::All)
            .unicode_word_boundary(can_quit)
            .cache_capacity(capacity);
        if may_give_up {
            config = config
                .minimum_cache_clear_count(Some(GIVE_UP_CLEARS))
                .minimum_bytes_per_state(Some(GIVE_UP_BYTES_PER_STATE));
        }
        let built = DFA::builder()
            .configure(config)
            .syntax(syntax::Config::new())
            .thompson(
                thompson::Config::new()
                    .nfa_size_limit(Some(REGEX_SIZE_LIMIT.saturating_mul(members.len()))),
            )
            .build_many(&patterns);
        match built {
            Ok(dfa) => Some(StreamDfa {
                dfa,
                members: members.to_vec(),
                can_quit,
                may_give_up,
            }),
            Err(e) => {
                log::warn!(
                    "{} conditional rules matched on a window instead of a stream: {e}",
                    members.len()
                );
                None
            }
        }
    }

    /// Whether the DFA may stop in a block (quit on non-ASCII text, or give up), leaving its
    /// conditions to the window.
    pub fn may_stop(&self) -> bool {
        self.can_quit || self.may_give_up
    }

    /// The bound of each cursor's cache.
    #[cfg(test)]
    pub fn cache_capacity(&self) -> usize {
        self.dfa.get_config().get_cache_capacity()
    }

    /// Whether `cursor` stopped in its block (the window has the block's conditions).
    #[cfg(test)]
    pub fn stopped(cursor: &Cursor) -> bool {
        cursor.state.is_none()
    }

    pub fn cursor(&self) -> Cursor {
        let mut cache = self.dfa.create_cache();
        let state = self.start(&mut cache);
        Cursor { cache, state }
    }

    /// Puts the cursor at the start of a new content block.
    pub fn reset(&self, cursor: &mut Cursor) {
        cursor.state = self.start(&mut cursor.cache);
    }

    fn start(&self, cache: &mut Cache) -> Option<LazyStateID> {
        let config = start::Config::new().anchored(Anchored::No);
        self.dfa.start_state(cache, &config).ok()
    }

    /// Feeds `delta`; pushes onto `fired` the armed rules with a match ending in it (a match at
    /// its very end counts: the delta is the end of the output so far). Returns `false` when the
    /// DFA quit (or was already stopped) and the caller must look at the window instead.
    pub fn feed(
        &self,
        cursor: &mut Cursor,
        delta: &[u8],
        armed: &[bool],
        fired: &mut Vec<usize>,
    ) -> bool {
        let Some(mut sid) = cursor.state else {
            return false;
        };
        // The progress a give-up weighs against the states built (see `GIVE_UP_CLEARS`).
        cursor.cache.search_start(0);
        for (at, &byte) in delta.iter().enumerate() {
            cursor.cache.search_update(at);
            sid = match self.dfa.next_state(&mut cursor.cache, sid, byte) {
                Ok(s) => s,
                Err(_) => return self.stop(cursor),
            };
            if sid.is_tagged() {
                if sid.is_quit() {
                    return self.stop(cursor);
                }
                if sid.is_match() {
                    self.collect(&cursor.cache, sid, armed, fired);
                }
            }
        }
        cursor.state = Some(sid);
        // Matches show one byte late; the end-of-input transition shows the ones ending here,
        // without moving the cursor (more output may follow).
        let clears = cursor.cache.clear_count();
        let Ok(end) = self.dfa.next_eoi_state(&mut cursor.cache, sid) else {
            return self.stop(cursor);
        };
        if end.is_match() {
            self.collect(&cursor.cache, end, armed, fired);
        }
        if cursor.cache.clear_count() != clears {
            // `sid` was renumbered by the clear: it cannot be followed any more.
            cursor.state = None;
        }
        cursor.cache.search_finish(delta.len());
        true
    }

    fn stop(&self, cursor: &mut Cursor) -> bool {
        cursor.state = None;
        false
    }

    fn collect(&self, cache: &Cache, sid: LazyStateID, armed: &[bool], fired: &mut Vec<usize>) {
        for i in 0..self.dfa.match_len(cache, sid) {
            let rule = self.members[self.dfa.match_pattern(cache, sid, i).as_usize()];
            if armed[rule] && !fired.contains(&rule) {
                fired.push(rule);
            }
        }
    }
}
