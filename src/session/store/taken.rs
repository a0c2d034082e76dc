//! The entry ids a session already uses, so that new ones are unique. gjc makes ids of eight
//! lowercase hex digits, so only a loaded id of that form can collide with a new one: those are
//! kept as the `u32` they spell (4 bytes each, where a list of id strings took 24 and the set
//! built from it more), and every other id (a UUID of an older file, a short test id) is left
//! out. A long session's list costs little to hold, and nothing to free at exit.

use std::collections::HashSet;

use super::EntryId;

/// An id gjc could make: exactly eight lowercase hex digits, as the number they spell.
pub fn hex_id(id: &str) -> Option<u32> {
    let digits = id.as_bytes();
    if digits.len() != 8
        || !digits
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    u32::from_str_radix(id, 16).ok()
}

/// The ids new ones must differ from: the loaded file's (sorted when the first new id is made,
/// so a switch does not wait for it) and those made since.
#[derive(Debug, Default)]
pub struct Taken {
    loaded: Vec<u32>,
    sorted: bool,
    made: HashSet<u32>,
}

impl Taken {
    /// The ids of a file's entries that a new id could collide with.
    pub(super) fn from_loaded<'a>(ids: impl ExactSizeIterator<Item = &'a EntryId>) -> Taken {
        // Sized up front: growing by doubling could leave half the block unused.
        let mut loaded = Vec::with_capacity(ids.len());
        loaded.extend(ids.filter_map(|id| hex_id(id)));
        loaded.shrink_to_fit();
        Taken {
            loaded,
            sorted: false,
            made: HashSet::new(),
        }
    }

    /// Whether `id` is one of them.
    #[cfg(test)]
    fn contains(&mut self, id: &str) -> bool {
        hex_id(id).is_some_and(|n| self.contains_hex(n))
    }

    fn contains_hex(&mut self, n: u32) -> bool {
        if !self.sorted {
            self.loaded.sort_unstable();
            self.sorted = true;
        }
        self.loaded.binary_search(&n).is_ok() || self.made.contains(&n)
    }

    /// A new id, different from every one taken, and taken from now on.
    pub(super) fn make(&mut self, mut random: impl FnMut() -> u32) -> EntryId {
        loop {
            let n = random();
            if !self.contains_hex(n) {
                self.made.insert(n);
                return smol_str::format_smolstr!("{n:08x}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_gjc_could_make_are_kept() {
        assert_eq!(hex_id("00000001"), Some(1));
        assert_eq!(hex_id("deadbeef"), Some(0xdead_beef));
        for other in ["DEADBEEF", "deadbee", "deadbeef0", "+eadbeef", "b2", ""] {
            assert_eq!(hex_id(other), None, "{other}");
        }
        let ids: Vec<EntryId> = ["0000000a", "0192f0c4-3b1e-7c55-9a3e-5d2b1f4e8a01", "c3"]
            .into_iter()
            .map(EntryId::from)
            .collect();
        let mut taken = Taken::from_loaded(ids.iter());
        assert_eq!(taken.loaded, [10]);
        assert!(taken.contains("0000000a"));
        assert!(!taken.contains("c3"), "a new id can never be c3");
    }

    /// A random number that spells a loaded id, or one made before, is drawn again.
    #[test]
    fn new_ids_skip_loaded_and_made_ones() {
        let loaded: Vec<EntryId> = ["00000003", "00000001"]
            .into_iter()
            .map(EntryId::from)
            .collect();
        let mut taken = Taken::from_loaded(loaded.iter());
        let mut draws = [1, 3, 2, 2, 3, 4].into_iter();
        let mut next = || draws.next().unwrap();
        assert_eq!(taken.make(&mut next), "00000002");
        assert_eq!(taken.make(&mut next), "00000004");
        assert!(taken.contains("00000002") && taken.contains("00000004"));
        assert!(!taken.contains("00000005"));
    }
}
