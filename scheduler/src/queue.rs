//! The scheduling queue: pending pods ordered by priority, then by when they were queued
//! (their creation when first added, the time of their last failure when requeued, as
//! kube-scheduler does); unschedulable pods wait in a backoff queue with a growing,
//! capped delay, and move back early when an event could help them (a node added or
//! changed, a pod deleted, an NRT changed) — but never before the initial backoff, so a
//! storm of NRT updates cannot spin them hot. An event about one node's topology wakes
//! only the pods a caller-given check says could fit that node (see
//! [`SchedulingQueue::on_node_event`]); the check reads what the pod's last attempt
//! parsed ([`SchedulingQueue::unschedulable_with`]).
//!
//! Pure data structure with an injectable clock; the scheduler loop owns it behind a
//! mutex and is woken through a `Notify` when something becomes active.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::filter::PodFilterInput;

/// What the queue knows of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPod {
    /// Pod uid.
    pub uid: String,
    /// `namespace/name`, for logs.
    pub key: String,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// Creation time in seconds since the epoch (older first among equals).
    pub created: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Active {
    priority: i32,
    /// Milliseconds since the epoch: creation, or the last requeue.
    queued: i64,
    seq: u64,
    uid: String,
}

impl Ord for Active {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap pops the greatest: higher priority, then older, then first queued.
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.queued.cmp(&self.queued))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Active {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Debug, Clone)]
enum State {
    Active { seq: u64 },
    InFlight,
    Backoff { until: Instant, since: Instant },
}

#[derive(Debug, Clone)]
struct Entry {
    pod: QueuedPod,
    attempts: u32,
    state: State,
    /// Milliseconds since the epoch of the last requeue (`None`: never failed).
    requeued: Option<i64>,
    /// What the last attempt parsed, for [`SchedulingQueue::on_node_event`].
    filter: Option<Arc<PodFilterInput>>,
}

/// The queue.
#[derive(Debug)]
pub struct SchedulingQueue {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
    active: BinaryHeap<Active>,
    backoff: BTreeMap<(Instant, u64), String>,
    seq: u64,
    /// An instant and its wall-clock time in milliseconds, to stamp requeues with the
    /// injected clock.
    epoch: (Instant, i64),
}

impl SchedulingQueue {
    /// A queue whose retry delay doubles from `initial` up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: HashMap::new(),
            active: BinaryHeap::new(),
            backoff: BTreeMap::new(),
            seq: 0,
            epoch: (Instant::now(), epoch_millis(SystemTime::now())),
        }
    }

    /// Add a pending pod, or update its priority. A pod already queued keeps its place
    /// and attempts.
    pub fn add(&mut self, pod: QueuedPod) {
        if let Some(e) = self.entries.get_mut(&pod.uid) {
            e.pod = pod;
            return;
        }
        let uid = pod.uid.clone();
        self.entries.insert(
            uid.clone(),
            Entry {
                pod,
                attempts: 0,
                state: State::InFlight,
                requeued: None,
                filter: None,
            },
        );
        self.activate(&uid);
    }

    /// Forget a pod (deleted, or bound by someone).
    pub fn remove(&mut self, uid: &str) {
        // Heap and backoff entries of a removed pod are skipped lazily.
        self.entries.remove(uid);
    }

    /// Whether the queue tracks this pod.
    pub fn contains(&self, uid: &str) -> bool {
        self.entries.contains_key(uid)
    }

    /// Take the next active pod, after moving expired backoffs to active.
    pub fn pop(&mut self, now: Instant) -> Option<QueuedPod> {
        self.flush_backoff(now);
        while let Some(a) = self.active.pop() {
            let Some(e) = self.entries.get_mut(&a.uid) else {
                continue;
            };
            match e.state {
                State::Active { seq } if seq == a.seq => {
                    e.state = State::InFlight;
                    return Some(e.pod.clone());
                }
                _ => continue,
            }
        }
        None
    }

    /// The pod could not be placed: retry after a delay that doubles per attempt.
    /// Returns the delay.
    pub fn unschedulable(&mut self, uid: &str, now: Instant) -> Option<Duration> {
        self.unschedulable_with(uid, now, None)
    }

    /// As [`Self::unschedulable`], keeping what the attempt parsed so that a node's
    /// topology event wakes the pod only when it could fit that node.
    pub fn unschedulable_with(
        &mut self,
        uid: &str,
        now: Instant,
        filter: Option<Arc<PodFilterInput>>,
    ) -> Option<Duration> {
        let stamp = self.millis(now);
        let e = self.entries.get_mut(uid)?;
        e.filter = filter;
        e.requeued = Some(stamp);
        e.attempts = e.attempts.saturating_add(1);
        let delay = backoff_delay(self.initial, self.max, e.attempts);
        self.seq += 1;
        e.state = State::Backoff {
            until: now + delay,
            since: now,
        };
        self.backoff.insert((now + delay, self.seq), uid.to_owned());
        Some(delay)
    }

    /// Retry at once (e.g. after a failed bind, which says nothing about fit).
    pub fn retry_now(&mut self, uid: &str) {
        if self.entries.contains_key(uid) {
            self.activate(uid);
        }
    }

    /// An event that could make unschedulable pods fit: pods that have waited at least
    /// the initial backoff become active now. Returns how many moved.
    pub fn on_cluster_event(&mut self, now: Instant) -> usize {
        let ready: Vec<String> = self
            .entries
            .iter()
            .filter_map(|(uid, e)| match e.state {
                State::Backoff { since, .. } if now >= since + self.initial => Some(uid.clone()),
                _ => None,
            })
            .collect();
        for uid in &ready {
            self.activate(uid);
        }
        ready.len()
    }

    /// An event about one node (its topology changed or went away): of the pods that
    /// have waited at least the initial backoff, those `could_fit` accepts become
    /// active now. A pod whose last attempt left nothing to check is woken. Returns how
    /// many moved.
    pub fn on_node_event(
        &mut self,
        now: Instant,
        mut could_fit: impl FnMut(&PodFilterInput) -> bool,
    ) -> usize {
        let ready: Vec<String> = self
            .entries
            .iter()
            .filter_map(|(uid, e)| match e.state {
                State::Backoff { since, .. }
                    if now >= since + self.initial
                        && e.filter.as_deref().is_none_or(&mut could_fit) =>
                {
                    Some(uid.clone())
                }
                _ => None,
            })
            .collect();
        for uid in &ready {
            self.activate(uid);
        }
        ready.len()
    }

    /// When the earliest backoff expires (to sleep until then).
    pub fn next_backoff_expiry(&self) -> Option<Instant> {
        self.backoff
            .iter()
            .find(|(_, uid)| {
                matches!(
                    self.entries.get(*uid),
                    Some(Entry {
                        state: State::Backoff { .. },
                        ..
                    })
                )
            })
            .map(|((at, _), _)| *at)
    }

    /// Pods waiting to be scheduled (active + backoff + in flight).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no pod is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Active pods (approximate: may count entries superseded since).
    pub fn active_len(&self) -> usize {
        self.entries
            .values()
            .filter(|e| matches!(e.state, State::Active { .. }))
            .count()
    }

    /// Attempts made for a pod so far.
    pub fn attempts(&self, uid: &str) -> u32 {
        self.entries.get(uid).map_or(0, |e| e.attempts)
    }

    fn activate(&mut self, uid: &str) {
        self.seq += 1;
        let seq = self.seq;
        if let Some(e) = self.entries.get_mut(uid) {
            e.state = State::Active { seq };
            self.active.push(Active {
                priority: e.pod.priority,
                queued: e
                    .requeued
                    .unwrap_or_else(|| e.pod.created.saturating_mul(1000)),
                seq,
                uid: uid.to_owned(),
            });
        }
    }

    fn flush_backoff(&mut self, now: Instant) {
        while let Some(((at, _), _)) = self.backoff.first_key_value() {
            if *at > now {
                break;
            }
            let Some((_, uid)) = self.backoff.pop_first() else {
                break;
            };
            let due = matches!(
                self.entries.get(&uid),
                Some(Entry { state: State::Backoff { until, .. }, .. }) if *until <= now
            );
            if due {
                self.activate(&uid);
            }
        }
    }
}

impl SchedulingQueue {
    fn millis(&self, now: Instant) -> i64 {
        let (at, millis) = self.epoch;
        let since = now.saturating_duration_since(at).as_millis();
        millis.saturating_add(i64::try_from(since).unwrap_or(i64::MAX))
    }
}

fn epoch_millis(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `initial × 2^(attempts−1)`, capped at `max`.
pub fn backoff_delay(initial: Duration, max: Duration, attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(20);
    initial.saturating_mul(1 << shift).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, priority: i32, created: i64) -> QueuedPod {
        QueuedPod {
            uid: uid.into(),
            key: format!("ns/{uid}"),
            priority,
            created,
        }
    }

    fn queue() -> SchedulingQueue {
        SchedulingQueue::new(Duration::from_secs(1), Duration::from_secs(10))
    }

    #[test]
    fn priority_then_age() {
        let now = Instant::now();
        let mut q = queue();
        q.add(pod("young-low", 0, 20));
        q.add(pod("old-low", 0, 10));
        q.add(pod("high", 100, 30));
        let order: Vec<_> = std::iter::from_fn(|| q.pop(now)).map(|p| p.uid).collect();
        assert_eq!(order, ["high", "old-low", "young-low"]);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let d: Vec<_> = (1..=6)
            .map(|a| backoff_delay(Duration::from_secs(1), Duration::from_secs(10), a).as_secs())
            .collect();
        assert_eq!(d, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn unschedulable_pods_return_after_their_backoff() {
        let t0 = Instant::now();
        let mut q = queue();
        q.add(pod("a", 0, 1));
        assert!(q.pop(t0).is_some());
        assert_eq!(q.unschedulable("a", t0), Some(Duration::from_secs(1)));
        assert!(q.pop(t0 + Duration::from_millis(500)).is_none());
        assert_eq!(q.next_backoff_expiry(), Some(t0 + Duration::from_secs(1)));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(q.pop(t1).map(|p| p.uid), Some("a".into()));
        assert_eq!(q.unschedulable("a", t1), Some(Duration::from_secs(2)));
    }

    #[test]
    fn events_move_pods_early_but_not_hot() {
        let t0 = Instant::now();
        let mut q = queue();
        q.add(pod("a", 0, 1));
        q.pop(t0);
        for _ in 0..4 {
            q.unschedulable("a", t0);
        }
        // Waiting 8s now; an event right away does not move it (less than the initial 1s).
        assert_eq!(q.on_cluster_event(t0 + Duration::from_millis(100)), 0);
        // An event after 1s does.
        assert_eq!(q.on_cluster_event(t0 + Duration::from_secs(1)), 1);
        assert_eq!(
            q.pop(t0 + Duration::from_secs(1)).map(|p| p.uid),
            Some("a".into())
        );
    }

    #[test]
    fn requeued_pods_go_behind_pods_queued_before_their_requeue() {
        let t0 = Instant::now();
        let mut q = queue();
        // Created long ago, failed now.
        q.add(pod("old-failed", 0, 10));
        assert!(q.pop(t0).is_some());
        q.unschedulable("old-failed", t0);
        // Created after the old pod but long before its failure.
        q.add(pod("newer", 0, 20));
        let t1 = t0 + Duration::from_secs(1);
        let order: Vec<_> = std::iter::from_fn(|| q.pop(t1)).map(|p| p.uid).collect();
        assert_eq!(order, ["newer", "old-failed"]);
    }

    #[test]
    fn a_node_event_wakes_only_the_pods_that_could_fit() {
        use crate::test_support;
        let t0 = Instant::now();
        let mut q = queue();
        let fits = test_support::pod("fits", &[], serde_json::json!({}));
        let elsewhere = test_support::pod(
            "elsewhere",
            &[],
            serde_json::json!({"nodeSelector": {"pool": "other"}}),
        );
        for p in ["fits", "elsewhere", "unparsed"] {
            q.add(pod(p, 0, 1));
        }
        while q.pop(t0).is_some() {}
        let parsed = |p| Some(Arc::new(PodFilterInput::new(p).expect("parses")));
        // Second failures: backing off for 2s.
        for _ in 0..2 {
            q.unschedulable_with("fits", t0, parsed(&fits));
            q.unschedulable_with("elsewhere", t0, parsed(&elsewhere));
            q.unschedulable("unparsed", t0);
        }
        let node = test_support::node("n", &[("pool", "main")]);
        let later = t0 + Duration::from_secs(1);
        let moved = q.on_node_event(later, |p| crate::filter::filter_node(p, &node).is_ok());
        assert_eq!(moved, 2);
        let mut woken: Vec<_> = std::iter::from_fn(|| q.pop(later)).map(|p| p.uid).collect();
        woken.sort();
        assert_eq!(woken, ["fits", "unparsed"]);
    }

    #[test]
    fn removed_pods_are_never_popped_and_adds_are_idempotent() {
        let now = Instant::now();
        let mut q = queue();
        q.add(pod("a", 0, 1));
        q.add(pod("a", 0, 1));
        q.add(pod("b", 0, 2));
        q.remove("a");
        assert_eq!(q.pop(now).map(|p| p.uid), Some("b".into()));
        assert!(q.pop(now).is_none());
        assert_eq!(q.len(), 1, "b is in flight until removed or requeued");
    }
}
