//! Client-side spacing of calls, so the agent alone never trips the kubelet's rate limit
//! (a token bucket of about 100 calls per second with a burst of 10).

use std::time::Duration;

use tokio::time::Instant;

/// Hands out start times at least `interval` apart. Callers reserve a slot and sleep
/// until it; concurrent callers queue up instead of bursting.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    interval: Duration,
    next_free: Option<Instant>,
}

impl Pacer {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            next_free: None,
        }
    }

    /// Reserves the first free slot not before `earliest` and returns its start time.
    pub(crate) fn reserve(&mut self, earliest: Instant) -> Instant {
        let start = self.next_free.map_or(earliest, |free| free.max(earliest));
        self.next_free = Some(start + self.interval);
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_to_back_reservations_are_spaced_by_the_interval() {
        let interval = Duration::from_millis(50);
        let mut pacer = Pacer::new(interval);
        let now = Instant::now();
        let first = pacer.reserve(now);
        let second = pacer.reserve(now);
        let third = pacer.reserve(now);
        assert_eq!(first, now);
        assert_eq!(second - first, interval);
        assert_eq!(third - second, interval);
    }

    #[test]
    fn a_late_caller_starts_at_once() {
        let mut pacer = Pacer::new(Duration::from_millis(50));
        let now = Instant::now();
        pacer.reserve(now);
        let later = now + Duration::from_secs(1);
        assert_eq!(pacer.reserve(later), later);
    }

    #[test]
    fn zero_interval_never_delays() {
        let mut pacer = Pacer::new(Duration::ZERO);
        let now = Instant::now();
        assert_eq!(pacer.reserve(now), now);
        assert_eq!(pacer.reserve(now), now);
    }
}
