//! The bytes a match of a condition can end with: a window search for matches ending in a new
//! delta is skipped when the delta holds none of them. Exact for every condition that cannot
//! match the empty string (those never skip), and cheap: one table look-up per byte of the delta.
//! It keeps the window fallback near linear when a DFA gave up on text the conditions cannot
//! complete (`a[ab]{18}c7z` on text of `a`s and `b`s never sees its `z`).

use regex_syntax::hir::{Class, Hir, HirKind};

/// A set of bytes; `None` where a condition may match the empty string (it ends anywhere).
pub type EndBytes = Option<Box<[bool; 256]>>;

/// The bytes the matches of all `conditions` can end with.
pub fn end_bytes<'a>(conditions: impl IntoIterator<Item = &'a str>) -> EndBytes {
    let mut set = Box::new([false; 256]);
    for condition in conditions {
        let hir = regex_syntax::Parser::new().parse(condition).ok()?;
        if last(&hir, &mut set) {
            return None;
        }
    }
    Some(set)
}

/// Whether `haystack` holds a byte of `set` (always, without a set).
pub fn may_end_in(set: &EndBytes, haystack: &[u8]) -> bool {
    match set {
        Some(set) => haystack.iter().any(|b| set[*b as usize]),
        None => true,
    }
}

/// Adds the bytes a match of `hir` can end with to `set`; whether it can match the empty string.
fn last(hir: &Hir, set: &mut [bool; 256]) -> bool {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(lit) => match lit.0.last() {
            Some(b) => {
                set[*b as usize] = true;
                false
            }
            None => true,
        },
        HirKind::Class(class) => {
            class_last(class, set);
            false
        }
        HirKind::Repetition(rep) => last(&rep.sub, set) || rep.min == 0,
        HirKind::Capture(cap) => last(&cap.sub, set),
        HirKind::Concat(parts) => parts.iter().rev().all(|part| last(part, set)),
        HirKind::Alternation(alts) => alts.iter().fold(false, |empty, alt| last(alt, set) | empty),
    }
}

/// The last UTF-8 byte of any character of `class`: the character itself when ASCII, else any
/// continuation byte.
fn class_last(class: &Class, set: &mut [bool; 256]) {
    match class {
        Class::Bytes(bytes) => {
            for r in bytes.ranges() {
                (r.start()..=r.end()).for_each(|b| set[b as usize] = true);
            }
        }
        Class::Unicode(chars) => {
            for r in chars.ranges() {
                let (start, end) = (r.start() as u32, r.end() as u32);
                (start.min(0x80)..end.min(0x7f) + 1).for_each(|b| set[b as usize] = true);
                if end >= 0x80 {
                    (0x80..0xc0).for_each(|b| set[b] = true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(conditions: &[&str], text: &str) -> bool {
        may_end_in(&end_bytes(conditions.iter().copied()), text.as_bytes())
    }

    #[test]
    fn a_match_ends_with_one_of_its_last_bytes() {
        assert!(!ends(&["a[ab]{18}c7z"], "abababab"));
        assert!(ends(&["a[ab]{18}c7z"], "..z"));
        assert!(ends(&["(?i)todo\\b"], "TOD0 O"));
        assert!(!ends(&["(?i)todo\\b"], "TDX"));
        assert!(ends(&["x(ab)*"], "x"), "the repetition may be empty");
        assert!(ends(&["x(ab)*"], "b"));
        assert!(ends(&["é"], "\u{e9}"), "a continuation byte");
        assert!(ends(&["[^a]"], "\u{e9}"));
        assert!(!ends(&["[^a]", "zz"], "a"));
        // A condition that matches the empty string ends anywhere.
        assert!(ends(&["q", "a*"], "x"));
        assert!(ends(&["^"], "x"));
    }
}
