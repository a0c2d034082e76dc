//! Auto-retry policy: how many attempts, and how long to wait before the next one. Whether a
//! failure is worth retrying, and how long the provider asked to wait, is decided in
//! `provider::failure`; the policy only applies that verdict.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub enabled: bool,
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// The policy every session starts with; `base_delay` is `Settings::retry_base`
    /// (`GJC_RETRY_BASE_MS` shortens the back-off for host test suites).
    pub fn new(base_delay: Duration) -> RetryPolicy {
        RetryPolicy {
            enabled: true,
            max_attempts: 3,
            base_delay,
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (1-based). The provider's requested wait wins: the
    /// provider only passes one on when it is within its cap (a longer one makes the failure final
    /// there), so it is honoured as given, even above `max_delay`, which bounds our own back-off.
    pub fn delay(&self, attempt: u32, hint: Option<Duration>) -> Duration {
        if let Some(hint) = hint {
            return hint;
        }
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_unless_the_provider_asked_for_a_wait() {
        let p = RetryPolicy {
            enabled: true,
            max_attempts: 3,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        assert_eq!(p.delay(1, None), Duration::from_millis(100));
        assert_eq!(p.delay(3, None), Duration::from_millis(400));
        assert_eq!(p.delay(9, None), Duration::from_secs(1));
        assert_eq!(p.delay(40, None), Duration::from_secs(1));
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(7))),
            Duration::from_millis(7)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(30))),
            Duration::from_secs(30),
            "a requested wait the provider accepted is honoured even past our back-off bound"
        );
    }
}
