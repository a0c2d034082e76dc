//! Reading the user messages of a file, and branching: a new file holding the path up to one of
//! them.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{Step, StoreError};
use super::format::{entry_with, message_text};
use super::load::{path_to, read_entries, Entries};
use super::write::replace_file;
use super::Store;

/// Every user message entry in the file (all branches, file order) with non-empty text.
pub fn user_messages(path: &Path) -> Result<Vec<(String, String)>, StoreError> {
    let Entries { entries, .. } = read_entries(path, |line, _| {
        entry_with(line, |head, _| head.user_message())
    })?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            let text = message_text(&e.body?);
            (!text.is_empty()).then_some((e.id.to_string(), text))
        })
        .collect())
}

/// Writes a new session file holding the path from the root to the parent of user message
/// `entry_id`; returns the new file and the user message's text. The file appears whole or not at
/// all (written aside, then renamed into place).
pub fn branch(
    path: &Path,
    entry_id: &str,
    dir: &Path,
    new_id: &str,
    cwd: &Path,
) -> Result<(PathBuf, String), StoreError> {
    struct Kept {
        /// Copied to the new file as written.
        line: Vec<u8>,
        user_message: Option<Value>,
    }
    let Entries { entries, .. } = read_entries(path, |line, _| {
        entry_with(line, |head, line| Kept {
            line: line.to_vec(),
            user_message: head.user_message(),
        })
    })?;
    let Some((target, message)) = entries
        .iter()
        .filter(|e| e.id == entry_id)
        .find_map(|e| Some((e, e.body.user_message.as_ref()?)))
    else {
        return Err(StoreError::UnknownEntry(entry_id.to_string()));
    };
    let text = message_text(message);
    let kept = path_to(&entries, target.parent.as_deref());
    let store = Store::create(dir, new_id, cwd, Some(&path.display().to_string()));
    let new_path = store.path().map(Path::to_path_buf).unwrap_or_default();
    super::write::create_dir(dir)?;
    replace_file(&new_path, |out| {
        serde_json::to_writer(&mut *out, &store.header)?;
        out.write_all(b"\n")?;
        for &i in &kept {
            out.write_all(&entries[i].body.line)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    })
    .map_err(|source| StoreError::Io {
        step: Step::WriteBranch,
        path: Some(new_path.clone()),
        source,
    })?;
    Ok((new_path, text))
}
