//! Auto-retry policy: which failures are transient, and how long to wait before the next attempt.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub enabled: bool,
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        // GJC_RETRY_BASE_MS shortens the back-off for host test suites.
        let base_ms = std::env::var("GJC_RETRY_BASE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        RetryPolicy {
            enabled: true,
            max_attempts: 3,
            base_delay: Duration::from_millis(base_ms),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (1-based). A server's hint wins when it is sane.
    pub fn delay(&self, attempt: u32, hint: Option<Duration>) -> Duration {
        if let Some(hint) = hint.filter(|h| *h <= self.max_delay) {
            return hint;
        }
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
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

/// Parses `retry-after-ms`, then `retry-after` (seconds; HTTP dates are treated as absent).
pub fn retry_after(retry_after_ms: Option<&str>, retry_after: Option<&str>) -> Option<Duration> {
    if let Some(ms) = retry_after_ms
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    retry_after
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| *v >= 0.0)
        .map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_with_hint() {
        let p = RetryPolicy {
            enabled: true,
            max_attempts: 3,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        assert_eq!(p.delay(1, None), Duration::from_millis(100));
        assert_eq!(p.delay(3, None), Duration::from_millis(400));
        assert_eq!(p.delay(9, None), Duration::from_secs(1));
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(7))),
            Duration::from_millis(7)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(100))),
            Duration::from_millis(100)
        );
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
            retry_after(Some("250"), Some("9")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(retry_after(None, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(
            retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
    }
}
