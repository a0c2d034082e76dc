//! Host URI schemes: registration rules and the read/write round trip the file tools use for
//! `scheme://…` paths the host owns.

use std::time::Duration;

use crossbeam_channel::unbounded;

use super::{CallKind, HostEvent, HostHandle};
use crate::protocol::command::HostUriSchemeDefinition;
use crate::protocol::{FlatFrame, Outbound};

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UriScheme {
    pub scheme: String,
    pub description: Option<String>,
    pub writable: bool,
    pub immutable: bool,
}

/// Names the agent or the platform already gives a meaning.
const RESERVED: &[&str] = &[
    "http", "https", "file", "data", "gjc", "agent", "artifact", "memory", "local", "rule",
    "issue", "pr",
];

/// Lower-cases, validates and de-duplicates (first definition wins) a scheme list.
pub fn normalize(defs: &[HostUriSchemeDefinition]) -> Result<Vec<UriScheme>, String> {
    let mut out: Vec<UriScheme> = Vec::new();
    for (i, d) in defs.iter().enumerate() {
        let scheme = d.scheme.trim().trim_end_matches("://").to_ascii_lowercase();
        let valid = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase())
            && scheme
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c));
        if !valid {
            return Err(format!("schemes[{i}]: {:?} is not a valid URI scheme (a letter, then letters, digits, + . -)", d.scheme));
        }
        if RESERVED.contains(&scheme.as_str()) {
            return Err(format!("schemes[{i}]: {scheme} is reserved"));
        }
        if !out.iter().any(|s| s.scheme == scheme) {
            out.push(UriScheme {
                scheme,
                description: d.description.clone(),
                writable: d.writable,
                immutable: d.immutable,
            });
        }
    }
    Ok(out)
}

/// The host's answer to a read or write.
pub struct UriReply {
    pub content: Option<String>,
    pub content_type: Option<String>,
    pub notes: Vec<String>,
    pub immutable: bool,
}

/// Why a read or write through the host did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UriError {
    /// No broker to send the request through (gjc is shutting down).
    NoBroker,
    /// The call was cancelled while waiting.
    Aborted,
    /// The host answered with an error: its text, or `None` when it gave none.
    Refused {
        url: String,
        message: Option<String>,
    },
    /// The broker refused the request before the host saw it (its reason).
    Rejected(String),
    /// The broker stopped while the request waited.
    BrokerStopped,
}

impl std::fmt::Display for UriError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UriError::NoBroker => f.write_str("the host broker is not running"),
            UriError::Aborted => f.write_str("Host URI request aborted"),
            UriError::Refused {
                message: Some(m), ..
            } => f.write_str(m),
            UriError::Refused { url, message: None } => write!(f, "the host refused {url}"),
            UriError::Rejected(reason) => f.write_str(reason),
            UriError::BrokerStopped => f.write_str("the host broker stopped"),
        }
    }
}

impl std::error::Error for UriError {}

/// Asks the host to read or write `url`, waiting until it answers, the call is cancelled
/// (`cancelled` turns true), or the host goes away.
pub fn request(
    host: &HostHandle,
    url: &str,
    content: Option<&str>,
    cancelled: &dyn Fn() -> bool,
) -> Result<UriReply, UriError> {
    let (reply, rx) = unbounded();
    let id = host
        .call(CallKind::Uri, None, reply, |id| {
            Outbound::Frame(FlatFrame::HostUriRequest {
                id,
                operation: if content.is_some() { "write" } else { "read" },
                url: url.to_string(),
                content: content.map(str::to_string),
            })
        })
        .ok_or(UriError::NoBroker)?;
    loop {
        if cancelled() {
            host.cancel(id);
            return Err(UriError::Aborted);
        }
        match crate::park::recv_timeout(&rx, Duration::from_millis(10)) {
            Ok(HostEvent::UriResult(r)) if r.is_error => {
                return Err(UriError::Refused {
                    url: url.to_string(),
                    message: r.error.or(r.content),
                });
            }
            Ok(HostEvent::UriResult(r)) => {
                return Ok(UriReply {
                    content: r.content,
                    content_type: r.content_type,
                    notes: r.notes,
                    immutable: r.immutable,
                })
            }
            Ok(HostEvent::Rejected { reason, .. }) => return Err(UriError::Rejected(reason)),
            Ok(_) => {}
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(UriError::BrokerStopped)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(s: &str) -> HostUriSchemeDefinition {
        HostUriSchemeDefinition {
            scheme: s.into(),
            description: None,
            writable: false,
            immutable: false,
        }
    }

    /// The host's own text is shown as it is; without one, the refusal names the URL.
    #[test]
    fn a_refusal_shows_the_hosts_text_or_the_url() {
        let with = UriError::Refused {
            url: "db://x".into(),
            message: Some("no such table".into()),
        };
        assert_eq!(with.to_string(), "no such table");
        let without = UriError::Refused {
            url: "db://x".into(),
            message: None,
        };
        assert_eq!(without.to_string(), "the host refused db://x");
    }

    #[test]
    fn schemes_are_lowercased_checked_and_deduplicated() {
        let got = normalize(&[def("DB"), def("db"), def("notes+v2")]).unwrap();
        assert_eq!(
            got.iter().map(|s| s.scheme.as_str()).collect::<Vec<_>>(),
            ["db", "notes+v2"]
        );
        assert!(normalize(&[def("1db")]).is_err());
        assert!(normalize(&[def("https")]).unwrap_err().contains("reserved"));
    }
}
