//! The messages of a context still in the session file, packed. A long session switched to holds
//! one of these per message until a prompt parses them, so each is 16 bytes: the span of its JSON
//! and its entry id as the number its eight hex digits spell (what gjc writes). The rare message
//! that is not in the file (parsed at load, or appended since) and the rare id of another form
//! (a UUID of an older file, none at all) sit in side lists that the slot points into. An `Item`
//! and an `Option<EntryId>` per message took 48 bytes.

use super::{Item, Span};
use crate::protocol::message::AgentMessage;
use crate::session::store::EntryId;

/// `Slot::at` holds an index into `Slots::parsed` instead of a file offset.
const PARSED: u64 = 1 << 63;
/// `Slot::id` holds an index into `Slots::odd_ids` instead of the id's number.
const ODD_ID: u64 = 1 << 62;
/// Offsets at or above this (4 EiB) cannot be packed; such a message is kept parsed.
const AT_LIMIT: u64 = 1 << 62;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The file offset of the message's JSON, or (with `PARSED`) its index in `parsed`; `ODD_ID`
    /// says where `id` points.
    at: u64,
    len: u32,
    id: u32,
}

/// One message of the list: parsed, or where its JSON is in the file.
#[derive(Clone, Copy, Debug)]
pub(super) enum At<'a> {
    Parsed(&'a AgentMessage),
    Stored(Span),
}

#[derive(Debug, Default)]
pub(super) struct Slots {
    slots: Vec<Slot>,
    parsed: Vec<AgentMessage>,
    odd_ids: Vec<Option<EntryId>>,
}

impl Slots {
    /// Packs `items` (an item whose span does not fit is read from the file now, by `read`) and
    /// their entry ids.
    pub fn new(
        items: Vec<Item>,
        ids: Vec<Option<EntryId>>,
        mut read: impl FnMut(Span) -> Option<AgentMessage>,
    ) -> Slots {
        let mut slots = Slots {
            slots: Vec::with_capacity(items.len()),
            ..Slots::default()
        };
        for (item, id) in items.into_iter().zip(ids) {
            match item {
                Item::Stored(span) if span.offset < AT_LIMIT && span.len < u32::MAX as usize => {
                    let id = slots.id_field(id);
                    slots.slots.push(Slot {
                        at: span.offset | id.0,
                        len: span.len as u32,
                        id: id.1,
                    });
                }
                Item::Stored(span) => match read(span) {
                    Some(message) => slots.push(message, id),
                    None => log::warn!("skipping a stored message gjc cannot read"),
                },
                Item::Parsed(message) => slots.push(*message, id),
            }
        }
        slots
    }

    /// The flag and number that stand for `id` in a slot.
    fn id_field(&mut self, id: Option<EntryId>) -> (u64, u32) {
        if let Some(n) = id.as_deref().and_then(crate::session::store::hex_id) {
            return (0, n);
        }
        self.odd_ids.push(id);
        (ODD_ID, (self.odd_ids.len() - 1) as u32)
    }

    pub fn push(&mut self, message: AgentMessage, id: Option<EntryId>) {
        let id = self.id_field(id);
        self.parsed.push(message);
        self.slots.push(Slot {
            at: PARSED | id.0 | (self.parsed.len() - 1) as u64,
            len: 0,
            id: id.1,
        });
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    fn at(&self, slot: &Slot) -> At<'_> {
        let at = slot.at & !(PARSED | ODD_ID);
        if slot.at & PARSED != 0 {
            At::Parsed(&self.parsed[at as usize])
        } else {
            At::Stored(Span {
                offset: at,
                len: slot.len as usize,
            })
        }
    }

    fn id(&self, slot: &Slot) -> Option<EntryId> {
        if slot.at & ODD_ID != 0 {
            self.odd_ids[slot.id as usize].clone()
        } else {
            Some(smol_str::format_smolstr!("{:08x}", slot.id))
        }
    }

    /// The messages, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = At<'_>> + '_ {
        self.slots.iter().map(|s| self.at(s))
    }

    /// The messages with their entry ids, oldest first.
    pub fn with_ids(&self) -> impl Iterator<Item = (At<'_>, Option<EntryId>)> + '_ {
        self.slots.iter().map(|s| (self.at(s), self.id(s)))
    }

    pub fn last(&self) -> Option<At<'_>> {
        self.slots.last().map(|s| self.at(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user message with a fixed timestamp, so two made a millisecond apart compare equal.
    fn user(text: &str) -> AgentMessage {
        let mut message = crate::protocol::message::UserMessage::new(text, &[]);
        message.timestamp = 0;
        AgentMessage::User(message)
    }

    #[test]
    fn a_slot_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 16);
    }

    /// Spans, parsed messages and every form of id come back as they went in, in order.
    #[test]
    fn items_and_ids_round_trip() {
        let span = |offset, len| Item::Stored(Span { offset, len });
        let items = vec![
            span(10, 5),
            Item::Parsed(Box::new(user("parsed"))),
            span(AT_LIMIT - 1, u32::MAX as usize - 1),
            span(20, 7),
        ];
        let ids: Vec<Option<EntryId>> = vec![
            Some("0000abcd".into()),
            Some("0192f0c4-3b1e-7c55-9a3e-5d2b1f4e8a01".into()),
            None,
            Some("ABCDEF01".into()),
        ];
        let mut slots = Slots::new(items, ids.clone(), |_| unreachable!());
        slots.push(user("pushed"), Some("ffffffff".into()));
        let got: Vec<_> = slots.with_ids().collect();
        assert_eq!(got.len(), 5);
        assert!(matches!(got[0].0, At::Stored(Span { offset: 10, len: 5 })));
        assert!(matches!(got[1].0, At::Parsed(m) if *m == user("parsed")));
        assert!(
            matches!(got[2].0, At::Stored(s) if s.offset == AT_LIMIT - 1 && s.len == u32::MAX as usize - 1)
        );
        assert!(matches!(got[3].0, At::Stored(Span { offset: 20, len: 7 })));
        assert!(matches!(got[4].0, At::Parsed(m) if *m == user("pushed")));
        let got_ids: Vec<_> = got.iter().map(|(_, id)| id.clone()).collect();
        let mut want = ids;
        want.push(Some("ffffffff".into()));
        assert_eq!(got_ids, want);
        assert_eq!(slots.len(), 5);
        assert!(matches!(slots.last(), Some(At::Parsed(_))));
    }

    /// A span too long or too far into the file to pack is read at once, or dropped if it
    /// cannot be.
    #[test]
    fn spans_that_do_not_fit_are_read_now() {
        let items = vec![
            Item::Stored(Span {
                offset: AT_LIMIT,
                len: 1,
            }),
            Item::Stored(Span {
                offset: 0,
                len: u32::MAX as usize,
            }),
        ];
        let mut reads = Vec::new();
        let slots = Slots::new(items, vec![Some("00000001".into()), None], |span| {
            reads.push(span);
            (reads.len() == 1).then(|| user("read"))
        });
        assert_eq!(reads.len(), 2);
        let got: Vec<_> = slots.with_ids().collect();
        assert_eq!(got.len(), 1, "the unreadable one is dropped");
        assert!(matches!(got[0].0, At::Parsed(m) if *m == user("read")));
        assert_eq!(got[0].1.as_deref(), Some("00000001"));
    }
}
