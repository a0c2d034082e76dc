//! The context: the messages the model is sent next, each with the session-file entry it came
//! from. After a session is loaded its messages stay in the session file, as byte spans, until
//! something needs them parsed (a prompt, a compaction, an export). Switching to a long session
//! and listing its messages therefore costs a scan of the file, not a parse of every message, and
//! memory holds offsets instead of message trees.

use std::borrow::Cow;
use std::cell::Cell;
use std::fs::File;

use serde_json::value::RawValue;

use super::store::EntryId;
use super::usage::Tally;
use crate::protocol::message::AgentMessage;
use crate::protocol::Data;
use crate::provider::catalog::Model;
use crate::provider::history::{History, HistoryCache};

mod error;
mod file;
mod slots;

pub use error::ContextError;
pub use file::Stamp;
use file::{parse, read_span, Window};
use slots::{At, Slots};

/// Where a message's JSON sits in the session file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub offset: u64,
    pub len: usize,
}

/// One message of a context that has not been parsed as a whole yet.
#[derive(Debug)]
pub enum Item {
    /// Boxed: most items of a long context are spans, which should stay small.
    Parsed(Box<AgentMessage>),
    Stored(Span),
}

/// Messages still in the session file. The file is held open: its bytes stay readable at these
/// offsets even when the header rewrite (`set_session_name`) replaces the file on disk.
#[derive(Debug)]
struct Stored {
    file: File,
    /// The messages and their entry ids (`Context::ids` is empty while they are stored).
    items: Slots,
    /// The file as it was when its stored messages were last checked to be JSON: while it still
    /// looks so, they are copied out without being checked again.
    checked: Option<Stamp>,
}

#[derive(Debug, Default)]
pub struct Context {
    /// The parsed messages; empty while `stored` holds them.
    parsed: Vec<AgentMessage>,
    stored: Option<Stored>,
    /// The session-file entry id of each parsed message (compaction cuts at one).
    ids: Vec<Option<EntryId>>,
    /// The messages encoded for the last model request; dropped whenever the messages may change
    /// other than by appending.
    history: HistoryCache,
    /// The running token figure (see [`super::usage`]), kept like `history`.
    tally: Cell<Option<Tally>>,
}

impl Context {
    pub fn from_messages(parsed: Vec<AgentMessage>, ids: Vec<Option<EntryId>>) -> Context {
        debug_assert_eq!(parsed.len(), ids.len());
        Context {
            parsed,
            stored: None,
            ids,
            history: HistoryCache::default(),
            tally: Cell::new(None),
        }
    }

    /// A context whose messages are read from `file` when needed. `checked` is the file's stamp
    /// taken before the reading that checked every stored message.
    pub fn from_file(
        file: File,
        checked: Option<Stamp>,
        items: Vec<Item>,
        ids: Vec<Option<EntryId>>,
    ) -> Context {
        debug_assert_eq!(items.len(), ids.len());
        let items = Slots::new(items, ids, |span| read_span(&file, span).ok().flatten());
        Context {
            parsed: Vec::new(),
            stored: Some(Stored {
                file,
                items,
                checked,
            }),
            ids: Vec::new(),
            history: HistoryCache::default(),
            tally: Cell::new(None),
        }
    }

    pub fn len(&self) -> usize {
        match &self.stored {
            Some(s) => s.items.len(),
            None => self.ids.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_parsed(&self) -> bool {
        self.stored.is_none()
    }

    pub fn push(&mut self, message: AgentMessage, id: Option<EntryId>) {
        let tally = self.tally.get().map(|t| t.append(&message));
        self.tally.set(tally);
        match &mut self.stored {
            Some(s) => s.items.push(message, id),
            None => {
                self.parsed.push(message);
                self.ids.push(id);
            }
        }
    }

    /// The messages, parsed now if they were still in the file, to change them. A stored
    /// message that no longer parses (the file was damaged after loading) is dropped with a
    /// warning, as the loader would have done; an unreadable file is an error and leaves the
    /// context as it was.
    pub fn messages(&mut self) -> Result<&mut Vec<AgentMessage>, ContextError> {
        self.parse_stored()?;
        self.history = HistoryCache::default();
        self.tally.set(None);
        Ok(&mut self.parsed)
    }

    /// The messages, parsed now if they were still in the file (see [`Context::messages`]), to
    /// read them.
    pub fn parsed(&mut self) -> Result<&[AgentMessage], ContextError> {
        self.parse_stored()?;
        Ok(&self.parsed)
    }

    /// The messages encoded for `model`'s API: only the ones appended since the last request
    /// (to the same model) are encoded now.
    pub fn encoded_history(&mut self, model: &Model) -> Result<History, ContextError> {
        self.parse_stored()?;
        Ok(self.history.encode(model, &self.parsed))
    }

    fn parse_stored(&mut self) -> Result<(), ContextError> {
        if let Some(stored) = &self.stored {
            let mut window = Window::new(&stored.file);
            let mut parsed = Vec::with_capacity(stored.items.len());
            let mut ids = Vec::with_capacity(stored.items.len());
            for (item, id) in stored.items.with_ids() {
                let message = match item {
                    At::Parsed(m) => Some(m.clone()),
                    At::Stored(span) => parse(window.get(span)?),
                };
                if let Some(m) = message {
                    parsed.push(m);
                    ids.push(id);
                }
            }
            (self.parsed, self.ids, self.stored) = (parsed, ids, None);
            crate::memory::release_free_pages();
        }
        Ok(())
    }

    /// The messages and their entry ids, parsed (see [`Context::messages`]).
    pub fn parts_mut(
        &mut self,
    ) -> Result<(&mut Vec<AgentMessage>, &mut Vec<Option<EntryId>>), ContextError> {
        self.messages()?;
        Ok((&mut self.parsed, &mut self.ids))
    }

    /// The context's token tally for a session last compacted at `compacted_at`: kept from the
    /// last call while only appends happened since, else counted back from the newest message.
    pub fn tally(&self, compacted_at: Option<u64>) -> Tally {
        if let Some(t) = self.tally.get().filter(|t| t.compacted_at == compacted_at) {
            return t;
        }
        let mut tally = Tally::new(compacted_at);
        self.scan_back(|m| tally.prepend(m));
        self.tally.set(Some(tally));
        tally
    }

    /// Calls `f` on each message, newest first, parsing stored ones one at a time, until `f`
    /// returns false. Unreadable messages are skipped.
    pub fn scan_back(&self, mut f: impl FnMut(&AgentMessage) -> bool) {
        match &self.stored {
            None => {
                for m in self.parsed.iter().rev() {
                    if !f(m) {
                        return;
                    }
                }
            }
            Some(s) => {
                for item in s.items.iter().rev() {
                    if let Some(m) = s.read_one(item) {
                        if !f(&m) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Calls `f` on each message, oldest first, without keeping parsed copies of stored ones.
    pub fn scan(&self, mut f: impl FnMut(&AgentMessage)) -> Result<(), ContextError> {
        match &self.stored {
            None => self.parsed.iter().for_each(f),
            Some(s) => {
                let mut window = Window::new(&s.file);
                for item in s.items.iter() {
                    match item {
                        At::Parsed(m) => f(m),
                        At::Stored(span) => {
                            if let Some(m) = parse(window.get(span)?) {
                                f(&m)
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub fn last(&self) -> Option<Cow<'_, AgentMessage>> {
        match &self.stored {
            None => self.parsed.last().map(Cow::Borrowed),
            Some(s) => s.read_one(s.items.last()?),
        }
    }

    /// `{"messages":[...]}`: stored messages are copied from the file as written, parsed ones
    /// serialized. The copy is checked again only if the file changed since it last was.
    pub fn to_json(&mut self) -> Result<Data, ContextError> {
        #[derive(serde::Serialize)]
        struct Messages<'a> {
            messages: &'a [AgentMessage],
        }
        let Some(s) = &mut self.stored else {
            return serde_json::value::to_raw_value(&Messages {
                messages: &self.parsed,
            })
            .map(Data::Checked)
            .map_err(ContextError::Encode);
        };
        let stamp = Stamp::of(&s.file);
        let mut window = Window::new(&s.file);
        let size: usize = s
            .items
            .iter()
            .map(|i| match i {
                At::Stored(span) => span.len + 1,
                At::Parsed(_) => 256,
            })
            .sum();
        let mut out = Vec::with_capacity(size + 16);
        out.extend_from_slice(b"{\"messages\":[");
        for (n, item) in s.items.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            match item {
                At::Stored(span) => out.extend_from_slice(window.get(span)?),
                At::Parsed(m) => {
                    serde_json::to_writer(&mut out, m).map_err(ContextError::Encode)?
                }
            }
        }
        out.extend_from_slice(b"]}");
        let text = String::from_utf8(out).map_err(|_| ContextError::Changed(None))?;
        if stamp.is_some() && stamp == s.checked {
            return Ok(Data::Assembled(text));
        }
        // Written to since the last check (by gjc's own appends, usually): check the copy so a
        // file changed behind gjc's back cannot put a broken line on stdout.
        let raw = RawValue::from_string(text).map_err(|e| ContextError::Changed(Some(e)))?;
        s.checked = stamp;
        Ok(Data::Checked(raw))
    }
}

impl Stored {
    fn read_one<'a>(&self, item: At<'a>) -> Option<Cow<'a, AgentMessage>> {
        match item {
            At::Parsed(m) => Some(Cow::Borrowed(m)),
            At::Stored(span) => match read_span(&self.file, span) {
                Ok(message) => message.map(Cow::Owned),
                Err(e) => {
                    log::warn!("cannot read the session file again: {e}");
                    None
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    /// A user message with a fixed timestamp, so two calls with one text compare equal.
    fn user(text: &str) -> AgentMessage {
        let mut message = crate::protocol::message::UserMessage::new(text, &[]);
        message.timestamp = 1_700_000_000_000;
        AgentMessage::User(message)
    }

    /// A file holding `messages` at known spans, with filler around each.
    fn stored(messages: &[AgentMessage]) -> (tempfile::NamedTempFile, Vec<Item>) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let mut items = Vec::new();
        let mut offset = 0u64;
        for m in messages {
            let json = serde_json::to_vec(m).unwrap();
            file.write_all(b"{\"message\":").unwrap();
            offset += 11;
            file.write_all(&json).unwrap();
            items.push(Item::Stored(Span {
                offset,
                len: json.len(),
            }));
            file.write_all(b"}\n").unwrap();
            offset += json.len() as u64 + 2;
        }
        (file, items)
    }

    #[test]
    fn stored_messages_read_like_parsed_ones() {
        let messages = vec![user("one"), user("two \u{2028} three")];
        let (file, items) = stored(&messages);
        let mut lazy = Context::from_file(file.reopen().unwrap(), None, items, vec![None, None]);
        lazy.push(user("four"), Some("e4".into()));
        let mut all = messages.clone();
        all.push(user("four"));
        let mut eager = Context::from_messages(all.clone(), vec![None, None, Some("e4".into())]);

        assert_eq!(
            lazy.to_json().unwrap().get(),
            eager.to_json().unwrap().get()
        );
        assert_eq!(lazy.last().as_deref(), Some(&user("four")));
        let mut seen = Vec::new();
        lazy.scan_back(|m| {
            seen.push(m.clone());
            seen.len() < 2
        });
        assert_eq!(seen, vec![user("four"), user("two \u{2028} three")]);
        let mut count = 0;
        lazy.scan(|_| count += 1).unwrap();
        assert_eq!(count, 3);

        assert!(!lazy.is_parsed());
        assert_eq!(lazy.messages().unwrap(), &all);
        assert!(lazy.is_parsed());
        assert_eq!(lazy.len(), 3);
    }

    #[test]
    fn a_damaged_stored_message_is_dropped_with_its_id() {
        let (file, mut items) = stored(&[user("one"), user("two")]);
        let Item::Stored(span) = items[1] else {
            unreachable!()
        };
        items[1] = Item::Stored(Span {
            offset: span.offset,
            len: span.len - 3,
        });
        let mut ctx = Context::from_file(
            file.reopen().unwrap(),
            None,
            items,
            vec![Some("a".into()), Some("b".into())],
        );
        let (messages, ids) = ctx.parts_mut().unwrap();
        assert_eq!(messages, &vec![user("one")]);
        assert_eq!(ids, &vec![Some(EntryId::from("a"))]);
        assert!(ctx.to_json().unwrap().get().contains("one"));
    }

    /// A file cut short after loading fails the parse (and leaves the context as it was).
    #[test]
    fn a_file_cut_short_is_an_error_not_a_shorter_context() {
        let (file, items) = stored(&[user("one"), user("two")]);
        let mut ctx = Context::from_file(file.reopen().unwrap(), None, items, vec![None, None]);
        file.as_file().set_len(10).unwrap();
        let err = ctx.parsed().unwrap_err();
        assert!(matches!(err, ContextError::Shorter), "{err:?}");
        assert_eq!(
            err.to_string(),
            "the session file is shorter than when it was loaded"
        );
        assert!(!ctx.is_parsed());
    }

    /// Marks `file` as written to: same-size writes within a clock tick leave the times as they
    /// were, so the test sets them apart by hand.
    fn touch(file: &File) {
        let past = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        file.set_modified(past).unwrap();
    }

    #[test]
    fn stored_messages_are_checked_again_only_after_the_file_changed() {
        let (file, items) = stored(&[user("one"), user("two")]);
        let Item::Stored(second) = items[1] else {
            unreachable!()
        };
        let reader = file.reopen().unwrap();
        let mut ctx =
            Context::from_file(reader, Stamp::of(file.as_file()), items, vec![None, None]);
        assert!(matches!(ctx.to_json().unwrap(), Data::Assembled(_)));

        // A same-size change that is still JSON: checked once, then trusted again.
        let writer = std::fs::OpenOptions::new()
            .write(true)
            .open(file.path())
            .unwrap();
        let at = std::fs::read(file.path()).unwrap();
        let one = at.windows(3).position(|w| w == b"one").unwrap();
        writer.write_all_at(b"One", one as u64).unwrap();
        touch(&writer);
        let Data::Checked(raw) = ctx.to_json().unwrap() else {
            panic!("a changed file was not checked again")
        };
        assert!(raw.get().contains("One"));
        assert!(matches!(ctx.to_json().unwrap(), Data::Assembled(_)));

        // A change that breaks a message: an error, not a broken line.
        let last = second.offset + second.len as u64 - 1;
        writer.write_all_at(b" ", last).unwrap();
        writer.set_modified(std::time::SystemTime::now()).unwrap();
        let err = ctx.to_json().unwrap_err();
        assert!(err.to_string().contains("changed on disk"), "{err}");
        assert!(matches!(err, ContextError::Changed(Some(_))), "{err:?}");
    }

    #[test]
    fn the_encoded_history_is_kept_while_appending_and_dropped_on_any_other_change() {
        use crate::provider::catalog::Api;
        use crate::provider::history::test_model;
        let model = test_model(Api::OpenAiCompletions, "m");
        let mut ctx = Context::from_messages(vec![user("one"), user("two")], vec![None, None]);
        let first = ctx.encoded_history(&model).unwrap();
        ctx.push(user("three"), None);
        let grown = ctx.encoded_history(&model).unwrap();
        assert!(grown.shares_piece(&first, 0), "appending keeps the pieces");
        assert_eq!(grown.items().len(), 3);

        // Compaction (and any edit) changes the messages through mutable access.
        let (messages, _) = ctx.parts_mut().unwrap();
        messages[0] = user("summary");
        let edited = ctx.encoded_history(&model).unwrap();
        assert!(!edited.shares_piece(&grown, 0));
        let fresh = History::fresh(&model, ctx.parsed().unwrap());
        assert_eq!(edited.items(), fresh.items());
        assert!(String::from_utf8_lossy(edited.items()[0]).contains("summary"));
    }

    /// An assistant reply of `tokens` reported tokens at `timestamp` (0: none reported), with a
    /// tool call whose arguments count in the estimate.
    fn reply(tokens: u64, timestamp: u64) -> AgentMessage {
        serde_json::from_value(serde_json::json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": "c", "name": "bash", "arguments": {"command": "echo hi"}}],
            "api": "openai-completions", "provider": "p", "model": "m",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                "totalTokens": tokens, "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0,
                "cacheWrite": 0.0, "total": 0.0}},
            "stopReason": "toolUse", "timestamp": timestamp}))
        .unwrap()
    }

    /// The tally counted from scratch, as a context that never kept one would.
    fn walked(ctx: &Context, compacted_at: Option<u64>) -> Tally {
        let mut tally = Tally::new(compacted_at);
        ctx.scan_back(|m| tally.prepend(m));
        tally
    }

    #[test]
    fn the_kept_token_tally_equals_a_full_walk_after_appends_edits_and_a_switch() {
        let mut ctx = Context::from_messages(vec![user("one")], vec![None]);
        assert_eq!(ctx.tally(None), walked(&ctx, None));
        // Without reported usage every message counts; with it, the newest anchor resets.
        for (n, m) in [reply(0, 5), user("two"), reply(40, 10), user("three three")]
            .into_iter()
            .enumerate()
        {
            ctx.push(m, None);
            assert_eq!(ctx.tally(None), walked(&ctx, None), "after append {n}");
        }
        assert_eq!(ctx.tally(None).anchor, Some(40));
        assert_eq!(ctx.tally(None).rest, 4 + 3);
        assert!(
            ctx.tally.get().is_some(),
            "the tally is kept while appending"
        );

        // A compaction after the anchor's reply: the anchor no longer counts.
        assert_eq!(ctx.tally(Some(11)), walked(&ctx, Some(11)));
        assert_eq!(ctx.tally(Some(11)).anchor, None);
        ctx.push(reply(0, 12), None);
        assert_eq!(ctx.tally(Some(11)), walked(&ctx, Some(11)));

        // Mutable access (compaction, edits) drops the kept tally.
        ctx.messages().unwrap().truncate(2);
        assert!(ctx.tally.get().is_none());
        assert_eq!(ctx.tally(Some(11)), walked(&ctx, Some(11)));
        ctx.push(reply(70, 20), None);
        assert_eq!(ctx.tally(Some(11)), walked(&ctx, Some(11)));
        assert_eq!(ctx.tally(Some(11)).anchor, Some(70));

        // A switched-to session: a stored context counts from its file.
        let messages = vec![user("a"), reply(0, 1), user("bb")];
        let (file, items) = stored(&messages);
        let mut lazy = Context::from_file(file.reopen().unwrap(), None, items, vec![None; 3]);
        assert_eq!(lazy.tally(None), walked(&lazy, None));
        lazy.push(user("ccc"), None);
        let eager = Context::from_messages(
            messages.into_iter().chain([user("ccc")]).collect(),
            vec![None; 4],
        );
        assert_eq!(lazy.tally(None), walked(&eager, None));
        assert_eq!(lazy.tally(None).anchor, None);
    }
}
