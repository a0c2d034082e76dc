//! Keeping credentials out of logs. The HTTP stack logs the wire at `trace` (ureq-proto hex-dumps
//! every request, headers included, and ureq prints full URLs), so those targets are capped at
//! `debug` whatever `RUST_LOG` asks for: at `debug` ureq prints only header names it knows to be
//! harmless. gjc's own log line for a request shows header values only for headers that carry no
//! credentials.

use std::collections::BTreeMap;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Log targets (crate names) that write request bytes, headers or URLs at `trace`.
const WIRE_TARGETS: [&str; 3] = ["ureq", "ureq_proto", "rustls"];

/// The most those targets may log.
const WIRE_MAX: Level = Level::Debug;

/// Whether a record of `target` at `level` may be written at all.
pub fn allowed(target: &str, level: Level) -> bool {
    level <= WIRE_MAX || !is_wire_target(target)
}

fn is_wire_target(target: &str) -> bool {
    WIRE_TARGETS.iter().any(|crate_name| {
        target
            .strip_prefix(crate_name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

/// A logger that drops the wire targets' `trace` records before `inner` sees them. `enabled`
/// answers for them too, so the dumps are not even formatted.
pub struct Capped<L>(pub L);

impl<L: Log> Log for Capped<L> {
    fn enabled(&self, metadata: &Metadata) -> bool {
        allowed(metadata.target(), metadata.level()) && self.0.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if allowed(record.target(), record.level()) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// Installs `inner` behind the cap as the process logger.
pub fn install<L: Log + 'static>(inner: L, max: LevelFilter) -> Result<(), log::SetLoggerError> {
    log::set_logger(Box::leak(Box::new(Capped(inner))))?;
    log::set_max_level(max);
    Ok(())
}

/// Headers whose value is a credential in every API gjc speaks.
const CREDENTIAL_HEADERS: [&str; 6] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
];

/// One outgoing request as gjc logs it: method, URL without query or user info, and headers with
/// the values of credentials and of every configured custom header (`custom`, from models.json,
/// which may hold tokens too) replaced by `<redacted>`.
pub fn request_line(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    custom: &BTreeMap<String, String>,
) -> String {
    let mut out = format!("{method} {}", safe_url(url));
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let secret = CREDENTIAL_HEADERS.contains(&name.as_str())
            || custom.keys().any(|c| c.eq_ignore_ascii_case(&name));
        let shown = if secret { "<redacted>" } else { value.as_str() };
        out.push_str(&format!("; {name}: {shown}"));
    }
    out
}

/// The URL without its query (which may hold a key) and without user info.
fn safe_url(url: &str) -> String {
    let base = url.split(['?', '#']).next().unwrap_or("");
    match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_targets_are_capped_below_trace() {
        for target in [
            "ureq",
            "ureq::run",
            "ureq_proto::util",
            "rustls::client::hs",
        ] {
            assert!(!allowed(target, Level::Trace), "{target}");
            assert!(allowed(target, Level::Debug), "{target}");
        }
        for target in ["gjc::provider::http", "ureqx", "globset"] {
            assert!(allowed(target, Level::Trace), "{target}");
        }
    }

    #[test]
    fn capped_logger_refuses_wire_trace_even_when_inner_accepts_all() {
        struct All;
        impl Log for All {
            fn enabled(&self, _: &Metadata) -> bool {
                true
            }
            fn log(&self, _: &Record) {}
            fn flush(&self) {}
        }
        let capped = Capped(All);
        let meta = |target, level| Metadata::builder().target(target).level(level).build();
        assert!(!capped.enabled(&meta("ureq_proto::util", Level::Trace)));
        assert!(capped.enabled(&meta("ureq_proto::util", Level::Debug)));
        assert!(capped.enabled(&meta("gjc", Level::Trace)));
    }

    #[test]
    fn request_lines_redact_credentials_custom_headers_and_queries() {
        let headers: Vec<(String, String)> = [
            ("content-type", "application/json"),
            ("Authorization", "Bearer sk-1"),
            ("x-api-key", "k2"),
            ("x-goog-api-key", "k3"),
            ("X-Team-Token", "t4"),
            ("anthropic-version", "2023-06-01"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let custom = BTreeMap::from([("x-team-TOKEN".to_string(), "t4".to_string())]);
        let line = request_line(
            "POST",
            "https://user:pw@api.example.com/v1/x?key=k5",
            &headers,
            &custom,
        );
        assert_eq!(
            line,
            "POST https://api.example.com/v1/x; content-type: application/json; \
             authorization: <redacted>; x-api-key: <redacted>; x-goog-api-key: <redacted>; \
             x-team-token: <redacted>; anthropic-version: 2023-06-01"
        );
        for secret in ["sk-1", "k2", "k3", "t4", "k5", "pw"] {
            assert!(!line.contains(secret), "{secret}");
        }
    }
}
