//! Whether this process is the leader right now: read on every bind, so it must be
//! cheap and must turn false at the renew deadline even if the election task is stuck
//! in a request or has died.
//!
//! The election task stores the deadline up to which leadership is guaranteed;
//! [`LeaderStatus::is_leader`] compares it with the clock (an atomic load and a
//! monotonic clock read). A watch channel carries the same flag for tasks that want to
//! wait for a change instead of polling.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Sentinel for "not leader" in [`Shared::valid_until`].
const NOT_LEADER: u64 = 0;

/// State shared between the election task and every [`LeaderStatus`].
#[derive(Debug)]
pub(crate) struct Shared {
    epoch: Instant,
    /// Nanoseconds after `epoch` up to which this process is leader, or [`NOT_LEADER`].
    valid_until: AtomicU64,
    changes: watch::Sender<bool>,
}

impl Shared {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            valid_until: AtomicU64::new(NOT_LEADER),
            changes: watch::Sender::new(false),
        })
    }

    /// Leader until `deadline` (a renewal moves it forward).
    pub(crate) fn lead_until(&self, deadline: Instant) {
        let nanos = deadline.saturating_duration_since(self.epoch).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX).max(1);
        self.valid_until.store(nanos, Ordering::SeqCst);
        self.changes
            .send_if_modified(|leading| !std::mem::replace(leading, true));
    }

    /// Not leader any more, effective immediately.
    pub(crate) fn stop_leading(&self) {
        self.valid_until.store(NOT_LEADER, Ordering::SeqCst);
        self.changes
            .send_if_modified(|leading| std::mem::replace(leading, false));
    }

    /// How long this process stays leader from `now` (None: not leader).
    fn remaining_at(&self, now: Instant) -> Option<Duration> {
        let until = self.valid_until.load(Ordering::SeqCst);
        if until == NOT_LEADER {
            return None;
        }
        let now = now.saturating_duration_since(self.epoch);
        Duration::from_nanos(until)
            .checked_sub(now)
            .filter(|left| !left.is_zero())
    }

    fn is_leader_at(&self, now: Instant) -> bool {
        let until = self.valid_until.load(Ordering::SeqCst);
        until != NOT_LEADER
            && now.saturating_duration_since(self.epoch).as_nanos() < u128::from(until)
    }
}

/// A cheap, cloneable view of one elector's leadership.
#[derive(Debug, Clone)]
pub struct LeaderStatus {
    shared: Arc<Shared>,
}

impl LeaderStatus {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// True while this process holds the lease and its renew deadline has not passed.
    /// Check it right before every action only the leader may take.
    pub fn is_leader(&self) -> bool {
        self.shared.is_leader_at(Instant::now())
    }

    /// Whether this process stays leader for at least `margin` more: the fence for
    /// an API write that must land while leading. Send the write only when this is
    /// true, and give up on it after `margin` (a request timeout); the write then
    /// ends before the renew deadline, which is a third of the lease duration before
    /// any other candidate may take over.
    pub fn leads_for(&self, margin: Duration) -> bool {
        self.shared
            .remaining_at(Instant::now())
            .is_some_and(|left| left > margin)
    }

    /// Resolves when this process stops leading after having led (the renew deadline
    /// passed without a renewal, another holder took the lease, or it stepped down).
    /// Resolves at once if it is leading no more but led before this call started
    /// waiting for the first time; waits for leadership first otherwise.
    pub async fn lost(&self) {
        self.until_leader().await;
        let mut changes = self.subscribe();
        loop {
            if !self.is_leader() {
                return;
            }
            // Wake on a change, or at the deadline if the election task is stuck.
            let left = self.shared.remaining_at(Instant::now()).unwrap_or_default();
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep(left) => {}
            }
        }
    }

    /// A receiver of leadership changes (`true` on acquiring, `false` on losing or
    /// stepping down). It may lag [`is_leader`](Self::is_leader) by a scheduling delay,
    /// so use it to wake up, and `is_leader` to decide.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.shared.changes.subscribe()
    }

    /// Resolves once this process becomes leader.
    pub async fn until_leader(&self) {
        let mut changes = self.subscribe();
        // The sender lives in `shared`, which `self` keeps alive: the channel never closes.
        let _ = changes.wait_for(|leading| *leading).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writes_are_fenced_by_the_time_left_and_loss_is_noticed_at_the_deadline() {
        let shared = Shared::new();
        let status = LeaderStatus::new(shared.clone());
        let margin = Duration::from_millis(300);
        assert!(!status.leads_for(Duration::ZERO));

        let deadline = Instant::now() + Duration::from_millis(600);
        shared.lead_until(deadline);
        assert!(status.leads_for(margin));
        let lost = tokio::spawn({
            let status = status.clone();
            async move { status.lost().await }
        });
        tokio::time::sleep_until(deadline - Duration::from_millis(250)).await;
        // Still leader, but not for long enough to start a write that may take 300 ms.
        assert!(status.is_leader());
        assert!(!status.leads_for(margin));
        assert!(!lost.is_finished());
        // No renewal and no word from the election task: lost at the deadline.
        tokio::time::timeout(Duration::from_secs(5), lost)
            .await
            .expect("loss noticed at the deadline")
            .unwrap();
        assert!(Instant::now() >= deadline);
        assert!(!status.is_leader());
    }

    #[tokio::test]
    async fn leadership_ends_at_the_deadline_without_the_task() {
        let shared = Shared::new();
        let status = LeaderStatus::new(shared.clone());
        let mut changes = status.subscribe();
        assert!(!status.is_leader());

        let deadline = Instant::now() + Duration::from_secs(10);
        shared.lead_until(deadline);
        assert!(status.is_leader());
        assert!(*changes.borrow_and_update());
        assert!(shared.is_leader_at(deadline - Duration::from_nanos(1)));
        assert!(!shared.is_leader_at(deadline));

        shared.stop_leading();
        assert!(!status.is_leader());
        assert!(changes.has_changed().unwrap());
        assert!(!*changes.borrow_and_update());
    }

    #[tokio::test]
    async fn renewing_does_not_notify_again() {
        let shared = Shared::new();
        let status = LeaderStatus::new(shared.clone());
        shared.lead_until(Instant::now() + Duration::from_secs(1));
        let changes = status.subscribe();
        shared.lead_until(Instant::now() + Duration::from_secs(2));
        assert!(!changes.has_changed().unwrap());
        status.until_leader().await;
    }
}
