//! The scheduling loop: pop the next pod and make one attempt to schedule it
//! ([`crate::schedule_one`]): decide, assume, bind in the background.
//!
//! A decision assumes the pod on its node at once and queues its bind on the
//! [`crate::writer`] (see [`crate::bind`]). Only the leader decides and binds (leader
//! election is always on); the writer checks the lease again right before every bind
//! request, which is sent only while the lease is held for longer than the request's
//! timeout, so losing the lease stops binding before another replica can take over.
//!
//! A pod whose volumes no node can serve yet — a claim missing, being deleted, unbound,
//! or `ReadWriteOncePod` and used by another pod — is reported unschedulable before any
//! decision, with a message naming the claim (see [`crate::filter::volumes`]).
//! Likewise a pod whose resource claims cannot be allocated anywhere — a claim not
//! created yet, being deleted or full, a missing device class, a selector that does not
//! compile — is reported once, before any decision (see
//! [`crate::dra_state::pod_claims`] and [`crate::cycle::dra`]).
//!
//! A pod no node fits may preempt (see [`crate::preempt`]): the victim search runs in
//! the attempt, the evictions in a background task (through the writer); the pod itself waits in the
//! queue until an ordinary decision places it.

use crate::cycle::{self, CycleSettings, Decision, PodInput};
use crate::events::EventSender;
use crate::schedule_one::Attempts;
use crate::shared::Shared;
use crate::snapshot::{Snapshot, with_snapshot};
use crate::writer::Writer;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The fence every write passes (see [`crate::writer`]).
pub use crate::writer::LeaderCheck;

/// Run the loop until the process ends; every write goes through `writer`.
pub async fn run(shared: Arc<Shared>, events: EventSender, writer: Writer) {
    let mut attempts = Attempts::new(shared.clone(), events, writer);
    loop {
        if !shared.synced.all() || !attempts.leads() {
            tokio::select! {
                () = shared.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
            continue;
        }
        let next = {
            let mut q = shared.queue.lock();
            let p = q.pop(Instant::now());
            shared.metrics.queue_depth.set(q.len() as i64);
            p
        };
        let Some(queued) = next else {
            let expiry = shared.queue.lock().next_backoff_expiry();
            let sleep = expiry.map_or(Duration::from_secs(1), |t| {
                t.saturating_duration_since(Instant::now())
            });
            tokio::select! {
                () = shared.wake.notified() => {}
                () = tokio::time::sleep(sleep) => {}
            }
            continue;
        };
        let Some(pod) = shared.pending.read().get(&queued.uid).cloned() else {
            continue;
        };
        if shared.is_in_flight(&queued.uid) {
            continue;
        }
        attempts.schedule_one(&queued, pod).await;
    }
}

/// One decision over a consistent snapshot of nodes, namespaces and topologies, taken
/// for it alone.
pub fn decide(shared: &Shared, input: &PodInput, settings: &CycleSettings) -> Decision {
    with_snapshot(shared, input, |cluster, lookup| {
        cycle::decide_in(input, cluster, lookup, settings)
    })
}

/// [`decide`] over a snapshot kept between decisions, brought up to date first.
pub fn decide_with(
    shared: &Shared,
    snapshot: &mut Snapshot,
    input: &PodInput,
    settings: &CycleSettings,
) -> Decision {
    snapshot.with(shared, input, |cluster, lookup| {
        cycle::decide_in(input, cluster, lookup, settings)
    })
}
