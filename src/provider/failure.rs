//! What a failed request means, decided where the response is read: whether trying again could
//! help (transient), whether the context no longer fits (overflow), and how long the provider asked
//! us to wait (`retry-after-ms`, `retry-after` as seconds or an HTTP date). The session's retry
//! policy only consults the verdict; it never reads provider errors itself.

use std::time::{Duration, SystemTime};

/// The longest provider-requested wait gjc honours, unless `GJC_RETRY_AFTER_MAX_MS` says otherwise.
/// A minute keeps an interactive agent responsive; a provider asking for more (daily quotas,
/// long outages) is better reported at once than hammered or waited on silently.
pub const DEFAULT_RETRY_AFTER_CAP: Duration =
    Duration::from_millis(crate::settings::RETRY_AFTER_CAP_MS);

/// How the session should treat a failed HTTP response.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpVerdict {
    pub transient: bool,
    /// The provider's requested wait, within the cap.
    pub retry_after: Option<Duration>,
    /// Why a transient-looking failure is not retried, to append to the error message.
    pub refusal: Option<String>,
}

/// Classifies a non-200 response from its status, `x-should-retry`, the provider's error detail and
/// its requested wait. A wait longer than `cap` makes the failure final.
pub fn classify_http(
    status: u16,
    should_retry: Option<&str>,
    detail: &str,
    wait: Option<Duration>,
    cap: Duration,
) -> HttpVerdict {
    let transient = match should_retry {
        Some("true") => true,
        Some("false") => false,
        _ => is_transient_status(status) && !detail.contains("insufficient_quota"),
    };
    match wait {
        Some(w) if transient && w > cap => HttpVerdict {
            transient: false,
            retry_after: None,
            refusal: Some(format!(
                "the provider asks to wait {}, longer than the {} gjc waits (GJC_RETRY_AFTER_MAX_MS); not retried",
                seconds(w),
                seconds(cap)
            )),
        },
        _ => HttpVerdict {
            transient,
            retry_after: wait,
            refusal: None,
        },
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// Whether a failure with this message (and HTTP status, if any) is transient and whether it is a
/// context overflow. An overflow is never transient: the same request would fail the same way.
pub fn classify_message(message: &str, status: Option<u16>, transient: bool) -> (bool, bool) {
    let overflow = is_context_overflow(message);
    let transient = !overflow && (transient || (status.is_none() && is_transient_text(message)));
    (transient, overflow)
}

/// Whether an HTTP status is worth retrying.
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429 | 500 | 502 | 503 | 504 | 529)
}

/// Whether an error text (in-stream errors, transport failures) reads as transient.
pub fn is_transient_text(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    let terminal = [
        "insufficient_quota",
        "invalid api key",
        "invalid x-api-key",
        "unauthorized",
        "billing",
        "permission",
    ];
    if terminal.iter().any(|t| m.contains(t)) {
        return false;
    }
    [
        "overloaded",
        "rate limit",
        "rate_limit",
        "too many requests",
        "service unavailable",
        "internal server error",
        "api_error",
        "connection",
        "reset",
        "broken pipe",
        "timed out",
        "timeout",
        "stalled",
        "ended before",
        "eof",
        "unavailable",
    ]
    .iter()
    .any(|t| m.contains(t))
}

/// Whether a provider error means the context no longer fits the model.
pub fn is_context_overflow(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "exceeds the context window",
        "maximum context length",
        "context_length_exceeded",
        "request_too_large",
        "exceeds the available context size",
        "greater than the context length",
        "input token count",
        "too many tokens",
    ]
    .iter()
    .any(|t| m.contains(t))
}

/// The wait a response asks for: `retry-after-ms` (OpenAI's, more precise) when present, else
/// `retry-after` as delta-seconds or an HTTP date (a date in the past means now).
pub fn requested_wait(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(non_negative) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = retry_after?.trim();
    if let Some(s) = non_negative(value) {
        return Some(Duration::from_secs_f64(s));
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A finite, non-negative number (huge values saturate instead of panicking later).
fn non_negative(v: &str) -> Option<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| v.min(1e12))
}

/// An HTTP date in any of the three forms a recipient must accept (RFC 9110 §5.6.7):
/// `Sun, 06 Nov 1994 08:49:37 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT`, `Sun Nov  6 08:49:37 1994`.
pub fn parse_http_date(s: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(s.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn http_dates_in_all_three_forms() {
        // 1994-11-06 08:49:37 UTC
        let expected = at(784_111_777);
        for s in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_http_date(s), Some(expected), "{s}");
        }
        // A leap day, and the turn of a century that is not a leap year.
        assert_eq!(
            parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT"),
            Some(at(1_709_164_800))
        );
        assert_eq!(
            parse_http_date("Mon, 01 Mar 2100 00:00:00 GMT"),
            Some(at(4_107_542_400))
        );
        for bad in [
            "",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:00:00 GMT",
            "Sun, 06 Nov 1960 00:00:00 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn requested_wait_prefers_milliseconds_then_seconds_then_dates() {
        let now = at(1_000_000);
        for (ms, secs, expected) in [
            (Some("250"), Some("9"), 250),
            (None, Some("2"), 2000),
            (Some("-1"), Some("1.5"), 1500),
        ] {
            assert_eq!(
                requested_wait(ms, secs, now),
                Some(Duration::from_millis(expected)),
                "{ms:?} {secs:?}"
            );
        }
        // 1970-01-12 13:47:10 is 1,000,030 s after the epoch.
        assert_eq!(
            requested_wait(None, Some("Mon, 12 Jan 1970 13:47:10 GMT"), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            requested_wait(None, Some("Sun, 06 Nov 1994 08:49:37 GMT"), at(800_000_000)),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(requested_wait(None, Some("later"), now), None);
        assert_eq!(requested_wait(None, Some("inf"), now), None);
        assert_eq!(requested_wait(None, None, now), None);
    }

    #[test]
    fn a_wait_over_the_cap_is_final_and_says_why() {
        let cap = Duration::from_secs(60);
        let within = classify_http(429, None, "slow down", Some(Duration::from_secs(60)), cap);
        assert_eq!(
            within,
            HttpVerdict {
                transient: true,
                retry_after: Some(Duration::from_secs(60)),
                refusal: None
            }
        );
        let over = classify_http(429, None, "slow down", Some(Duration::from_secs(61)), cap);
        assert!(!over.transient);
        assert_eq!(over.retry_after, None);
        assert!(over
            .refusal
            .unwrap()
            .contains("wait 61 s, longer than the 60 s"));
        // A permanent failure stays permanent and is not given a reason about waiting.
        let bad = classify_http(400, None, "bad", Some(Duration::from_secs(600)), cap);
        assert_eq!(bad.refusal, None);
        assert!(!bad.transient);
        assert!(classify_http(400, Some("true"), "x", None, cap).transient);
        assert!(!classify_http(503, Some("false"), "x", None, cap).transient);
        assert!(!classify_http(429, None, "insufficient_quota: no", None, cap).transient);
    }

    #[test]
    fn classification() {
        assert!(is_transient_status(529));
        assert!(!is_transient_status(400));
        assert!(is_transient_text("Overloaded"));
        assert!(!is_transient_text("insufficient_quota: rate limit"));
        assert!(is_context_overflow(
            "prompt is too long: 210000 tokens > 200000 maximum"
        ));
        assert_eq!(
            classify_message("connection reset", None, false),
            (true, false)
        );
        assert_eq!(
            classify_message("connection reset", Some(400), false),
            (false, false)
        );
        assert_eq!(
            classify_message("HTTP 400: prompt is too long", Some(400), true),
            (false, true)
        );
    }
}
