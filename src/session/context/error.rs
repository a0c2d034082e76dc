//! Why stored messages could not be read back from the session file or encoded.

use std::fmt;

#[derive(Debug)]
pub enum ContextError {
    /// The file ends before a message it held when it was loaded.
    Shorter,
    /// Reading the file again failed.
    Reread(std::io::Error),
    /// Messages could not be encoded as JSON.
    Encode(serde_json::Error),
    /// The bytes copied from the file are no longer JSON (not UTF-8: no parser error).
    Changed(Option<serde_json::Error>),
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContextError::Shorter => {
                f.write_str("the session file is shorter than when it was loaded")
            }
            ContextError::Reread(e) => write!(f, "cannot read the session file again: {e}"),
            ContextError::Encode(e) => write!(f, "cannot encode the messages: {e}"),
            ContextError::Changed(None) => {
                f.write_str("the session file changed on disk since it was loaded")
            }
            ContextError::Changed(Some(e)) => write!(
                f,
                "the session file changed on disk since it was loaded: {e}"
            ),
        }
    }
}

impl std::error::Error for ContextError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ContextError::Reread(e) => Some(e),
            ContextError::Encode(e) | ContextError::Changed(Some(e)) => Some(e),
            _ => None,
        }
    }
}
