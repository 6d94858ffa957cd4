//! Retry delays that grow per object and reset on success.
//!
//! A transient failure (API server unavailable, conflict, a CRD not yet Established)
//! requeues the object after a delay that doubles with each consecutive failure of that
//! object, from [`Backoff::FIRST`] up to [`Backoff::MAX`]; one success resets it. The
//! state lives in the controller's context keyed by object name, so one object failing
//! does not slow down another.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Exponential backoff of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Self::FIRST, Self::MAX)
    }
}

impl Backoff {
    /// Delay after the first failure.
    pub const FIRST: Duration = Duration::from_secs(1);
    /// Longest delay.
    pub const MAX: Duration = Duration::from_secs(300);

    /// A backoff starting at `first`, doubling up to `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The delay for this failure; the next one will be twice as long (up to the max).
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Back to the first delay.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// An endless iterator of delays, for kube's watcher backoff.
impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.next_delay())
    }
}

impl kube::runtime::utils::Backoff for Backoff {
    fn reset(&mut self) {
        Backoff::reset(self);
    }
}

/// Per-object backoffs, keyed by object name.
#[derive(Debug, Default)]
pub struct Backoffs {
    by_name: Mutex<HashMap<String, Backoff>>,
}

impl Backoffs {
    /// The delay before retrying `name` after a failure.
    pub fn next_delay(&self, name: &str) -> Duration {
        match self.by_name.lock() {
            Ok(mut map) => map.entry(name.to_owned()).or_default().next_delay(),
            // A panic elsewhere while holding the lock: retry at the slowest pace.
            Err(_) => Backoff::MAX,
        }
    }

    /// Forget `name`'s failures after a success.
    pub fn reset(&self, name: &str) {
        if let Ok(mut map) = self.by_name.lock() {
            map.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn doubles_from_one_second_to_five_minutes() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..12).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    }

    #[test]
    fn success_resets_only_that_object() {
        let backoffs = Backoffs::default();
        assert_eq!(backoffs.next_delay("a"), secs(1));
        assert_eq!(backoffs.next_delay("a"), secs(2));
        assert_eq!(backoffs.next_delay("b"), secs(1));
        assert_eq!(backoffs.next_delay("a"), secs(4));
        backoffs.reset("a");
        assert_eq!(backoffs.next_delay("a"), secs(1));
        assert_eq!(backoffs.next_delay("b"), secs(2));
    }

    #[test]
    fn iterator_and_reset_for_watchers() {
        let mut b = Backoff::new(Duration::from_millis(500), secs(2));
        let first: Vec<_> = b.by_ref().take(4).collect();
        assert_eq!(
            first,
            [Duration::from_millis(500), secs(1), secs(2), secs(2)]
        );
        kube::runtime::utils::Backoff::reset(&mut b);
        assert_eq!(b.next(), Some(Duration::from_millis(500)));
    }
}
