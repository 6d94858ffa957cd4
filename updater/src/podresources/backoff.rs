//! Exponential backoff between failed calls to the kubelet: backon's
//! [`ExponentialBuilder`] without a limit on attempts, restarted after a success.
//!
//! No jitter: one agent talks to one kubelet, so there is no herd to spread out.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

type Delays = <ExponentialBuilder as BackoffBuilder>::Backoff;

/// Delay before the next attempt: `initial` after the first failure, doubling after each
/// further failure up to `max`, back to nothing after a success.
#[derive(Debug)]
pub(crate) struct Backoff {
    builder: ExponentialBuilder,
    max: Duration,
    /// The delays of the current run of failures; `None` after a success.
    delays: Option<Delays>,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        let max = max.max(initial);
        let builder = ExponentialBuilder::new()
            .with_min_delay(initial)
            .with_max_delay(max)
            .with_factor(2.0)
            .without_max_times();
        Self {
            builder,
            max,
            delays: None,
        }
    }

    /// Records a failure and returns how long to wait before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let builder = self.builder;
        self.delays
            .get_or_insert_with(|| builder.build())
            .next()
            // Never reached without a limit on attempts; the cap is the safe answer.
            .unwrap_or(self.max)
    }

    /// Records a success: the next failure starts again from `initial`.
    pub(crate) fn reset(&mut self) {
        self.delays = None;
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
    fn the_default_delays_reach_the_cap_and_stay_there() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30));
        let delays: Vec<_> = (0..12).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(
            delays,
            [
                100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000
            ]
        );
    }

    #[test]
    fn cap_below_initial_is_raised_to_initial() {
        let mut backoff = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(backoff.next_delay(), Duration::from_secs(2));
        assert_eq!(backoff.next_delay(), Duration::from_secs(2));
    }
}
