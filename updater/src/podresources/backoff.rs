//! Exponential backoff between failed calls to the kubelet.
//!
//! No jitter: one agent talks to one kubelet, so there is no herd to spread out.

use std::time::Duration;

/// Delay before the next attempt: `initial` after the first failure, doubling after each
/// further failure up to `max`, back to nothing after a success.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    last: Option<Duration>,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
            last: None,
        }
    }

    /// Records a failure and returns how long to wait before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = match self.last {
            None => self.initial,
            Some(last) => last.saturating_mul(2).min(self.max),
        };
        self.last = Some(delay);
        delay
    }

    /// Records a success: the next failure starts again from `initial`.
    pub(crate) fn reset(&mut self) {
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_restarts_after_success() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let delays: Vec<_> = (0..5).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(100));
    }

    #[test]
    fn cap_below_initial_is_raised_to_initial() {
        let mut backoff = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(backoff.next_delay(), Duration::from_secs(2));
        assert_eq!(backoff.next_delay(), Duration::from_secs(2));
    }
}
