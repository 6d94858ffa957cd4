//! Retry delays that grow per object and reset on success, built on `backon`.
//!
//! A transient failure (API server unavailable, conflict, a CRD not yet Established)
//! requeues the object after a delay that doubles with each consecutive failure of that
//! object, from [`FIRST`] up to [`MAX`]; one success resets it. The state lives in the
//! controller's context keyed by object name, so one object failing does not slow down
//! another. [`watcher_backoff`] gives a watch its own doubling retry delays.

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use kube::runtime::watcher;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Delay after an object's first failure.
pub const FIRST: Duration = Duration::from_secs(1);
/// Longest delay between retries of an object.
pub const MAX: Duration = Duration::from_secs(300);

/// Delays from `first`, doubling up to `max`, without end and without jitter.
fn doubling(first: Duration, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(first)
        .with_max_delay(max)
        .with_factor(2.0)
        .without_max_times()
}

/// Per-object backoffs, keyed by object name.
#[derive(Debug, Default)]
pub struct Backoffs {
    by_name: Mutex<HashMap<String, ExponentialBackoff>>,
}

impl Backoffs {
    /// The delay before retrying `name` after a failure; the next one will be twice as
    /// long (up to [`MAX`]).
    pub fn next_delay(&self, name: &str) -> Duration {
        match self.by_name.lock() {
            Ok(mut map) => map
                .entry(name.to_owned())
                .or_insert_with(|| doubling(FIRST, MAX).build())
                .next()
                .unwrap_or(MAX),
            // A panic elsewhere while holding the lock: retry at the slowest pace.
            Err(_) => MAX,
        }
    }

    /// Forget `name`'s failures after a success.
    pub fn reset(&self, name: &str) {
        if let Ok(mut map) = self.by_name.lock() {
            map.remove(name);
        }
    }
}

/// A watch's retry delays: from `first`, doubling up to `max`; the watcher resets them
/// once it is back.
pub fn watcher_backoff(first: Duration, max: Duration) -> watcher::ExponentialBackoff {
    watcher::ExponentialBackoff::from(doubling(first, max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::utils::Backoff as _;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn doubles_from_one_second_to_five_minutes() {
        let backoffs = Backoffs::default();
        let delays: Vec<u64> = (0..12)
            .map(|_| backoffs.next_delay("a").as_secs())
            .collect();
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
    fn watcher_backoff_doubles_and_resets() {
        let mut b = watcher_backoff(Duration::from_millis(500), secs(2));
        let first: Vec<_> = b.by_ref().take(4).collect();
        assert_eq!(
            first,
            [Duration::from_millis(500), secs(1), secs(2), secs(2)]
        );
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(500)));
    }
}
