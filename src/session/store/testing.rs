//! Helpers for the store's unit tests.

use std::path::{Path, PathBuf};

use super::{load, Store};
use crate::protocol::message::{AgentMessage, Content, UserMessage};

pub fn user(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage::new(text, &[]))
}

/// A session file in `dir` holding one user message per text.
pub fn saved(dir: &Path, texts: &[&str]) -> (Store, PathBuf) {
    let mut store = Store::create(dir, "sid", dir, None);
    for text in texts {
        store.append_message(&user(text)).unwrap();
    }
    let path = store.path().unwrap().to_path_buf();
    (store, path)
}

/// The texts of the user messages a file loads to.
pub fn texts(path: &Path) -> Vec<String> {
    let mut loaded = load(path).unwrap();
    loaded
        .context
        .messages()
        .unwrap()
        .iter()
        .map(|m| match m {
            AgentMessage::User(u) => match &u.content[..] {
                [Content::Text { text, .. }] => text.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}
