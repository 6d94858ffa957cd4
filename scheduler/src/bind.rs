//! The bind phase: a pod reserved on its node ([`crate::reserve`]) is bound through
//! the `pods/binding` subresource by the [`crate::writer`], whose outcome a background
//! task handles. A failed bind undoes the reservation and requeues the pod.
//!
//! A pod with resource claims has them written first, in the same request (see
//! [`crate::writer::claims`]): allocation and `reservedFor`. When a claim write fails,
//! or the bind after them fails, what was written for the pod is undone (its
//! `reservedFor` entries removed, the allocations TAS wrote cleared) before its devices
//! in flight are dropped, the pod is requeued with back-off and an Event says why. A pod is
//! never bound twice: it is marked in flight before its bind is queued and only leaves
//! that state when the bound pod is observed or the bind failed. A bind the writer
//! refuses because this process no longer leads for long enough is undone and retried
//! at once, by whichever replica leads next.
//!
//! A bind without a definite answer (no answer within the write timeout, or the
//! connection lost) may still be applied by the API server. Its reservation is kept,
//! and the pod stays in flight, until the pod is seen bound (the bound-pods watch takes
//! over) or a read after the write timeout shows it still unbound, or gone: only then
//! is the reservation freed and the pod requeued ([`settle`]). Freeing it at once would
//! let the next decision give the same NUMA resources to another pod while the kubelet
//! may be admitting this one.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, ResourceExt};

use crate::cycle::dra::DraChoice;
use crate::decisions::DecisionOutcome;
use crate::events::EventSender;
use crate::reserve::{release_devices, unreserve};
use crate::shared::Shared;
use crate::telemetry::BindRecord;
use crate::writer::claims::{ClaimRelease, ClaimReservation};
use crate::writer::{Admission, Request, WriteError, Writer};

/// Where a bind goes, and the attempt span it belongs to.
pub(crate) struct BindTarget {
    /// The node.
    pub(crate) node: String,
    /// The scheduling attempt's span.
    pub(crate) attempt: Option<opentelemetry::Context>,
    /// The attempt's entry in the decision log, which the bind's outcome settles.
    pub(crate) decision: u64,
    /// The pod's claim writes, if it has claims.
    pub(crate) claims: Option<ClaimWrites>,
    /// Whether the bind waits for the earlier binds to the node.
    pub(crate) admission: Admission,
}

/// A pod's claim writes before its bind, and their undo.
pub(crate) struct ClaimWrites {
    /// The allocation they carry.
    pub(crate) choice: DraChoice,
    /// One per claim that needs a write.
    pub(crate) writes: Vec<ClaimReservation>,
    /// Their undo.
    pub(crate) releases: Vec<ClaimRelease>,
}

/// Queues the bind of an assumed pod on the writer (waiting while its queue is full)
/// and handles the outcome in a background task.
pub(crate) async fn start(
    shared: &Arc<Shared>,
    events: &EventSender,
    writer: &Writer,
    pod: Arc<Pod>,
    uid: String,
    target: BindTarget,
) {
    let (sent, sent_at) = (Instant::now(), SystemTime::now());
    let claims = target
        .claims
        .as_ref()
        .map(|c| c.writes.clone())
        .unwrap_or_default();
    let reply = writer
        .submit(Request::Bind {
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            uid: uid.clone(),
            node: target.node.clone(),
            claims,
            admission: target.admission,
        })
        .await;
    let (shared, events, writer) = (shared.clone(), events.clone(), writer.clone());
    tokio::spawn(async move {
        let outcome = reply.outcome().await;
        let record = BindRecord {
            pod: &pod,
            node: &target.node,
            started: sent_at,
            duration: sent.elapsed(),
            pod_scheduling_seconds: None,
            error: None,
        };
        let freed = match finish(&shared, &events, &uid, &target, record, outcome) {
            Finished::Bound => false,
            Finished::Refused => true,
            Finished::Unknown => {
                let recheck = shared.settings.leader_election.write_timeout();
                let reads = writer.reads();
                let settled =
                    settle_when_known(&shared, &reads, &pod, &uid, &target.node, recheck).await;
                let (outcome, message) = match settled {
                    Some(Settled::Freed) => (
                        DecisionOutcome::BindFailed,
                        "the bind's outcome was unknown and the pod was then read unbound (or gone): retried",
                    ),
                    Some(Settled::Bound) | None => (
                        DecisionOutcome::Bound,
                        "the bind's outcome was unknown; the pod was then seen bound",
                    ),
                };
                shared
                    .decisions
                    .settle(target.decision, outcome, Some(message.to_owned()), None);
                settled == Some(Settled::Freed)
            }
        };
        if freed && let Some(claims) = &target.claims {
            undo_claims(&shared, &writer, &uid, &claims.releases).await;
        }
    });
}

/// Undoes the claim writes of pod `uid`, which is not bound, then drops its devices
/// in flight: until the undo is done they may still be allocated to it.
async fn undo_claims(shared: &Shared, writer: &Writer, uid: &str, releases: &[ClaimRelease]) {
    for release in releases {
        if let Err(e) = writer.write(Request::ReleaseClaim(release.clone())).await {
            tracing::warn!(claim = %format!("{}/{}", release.namespace, release.name), error = %e, "undoing a ResourceClaim reservation");
        }
    }
    if release_devices(shared, uid) {
        shared.cluster_event();
    }
}

/// What [`finish`] made of a bind's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finished {
    /// Bound.
    Bound,
    /// Refused (or not sent): the reservation is freed, the claim writes are to be
    /// undone.
    Refused,
    /// Maybe applied: the reservation is kept until [`settle`] is told what happened.
    Unknown,
}

/// What [`settle`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The pod is bound: the bound-pods watch takes over.
    Bound,
    /// The pod is unbound or gone: its reservation is freed.
    Freed,
}

/// Whether the API server may have applied a bind that failed with `e`: it was sent,
/// and no answer said it was refused.
fn maybe_applied(e: &WriteError) -> bool {
    match e {
        WriteError::TimedOut(_) => true,
        WriteError::Api(kube::Error::Api(_))
        | WriteError::NotLeader
        | WriteError::Stopped
        // The bind was not sent.
        | WriteError::Claim { .. } => false,
        // Transport failures: the request may have reached the API server.
        WriteError::Api(_) => true,
    }
}

/// Reads the pod every `recheck` (the write timeout: a bind still in the API server is
/// applied or given up by then) until [`settle`] knows what became of the bind, or the
/// pod leaves the in-flight set otherwise (the bound-pods watch saw it bound: `None`).
async fn settle_when_known(
    shared: &Shared,
    reads: &Client,
    pod: &Pod,
    uid: &str,
    node: &str,
    recheck: Duration,
) -> Option<Settled> {
    let pods: Api<Pod> = Api::namespaced(reads.clone(), &pod.namespace().unwrap_or_default());
    loop {
        tokio::time::sleep(recheck).await;
        if !shared.is_in_flight(uid) {
            return None;
        }
        match pods.get_opt(&pod.name_any()).await {
            Ok(seen) => return Some(settle(shared, uid, node, seen.as_ref())),
            Err(e) => {
                tracing::debug!(pod = %pod.name_any(), error = %e, "reading a pod whose bind timed out")
            }
        }
    }
}

/// Settles a bind whose outcome was unknown on `seen`, the pod as read after the write
/// timeout: still unbound (or gone, or replaced by a pod of the same name) frees the
/// reservation and requeues it; bound leaves it to the bound-pods watch.
pub(crate) fn settle(shared: &Shared, uid: &str, node: &str, seen: Option<&Pod>) -> Settled {
    let same = seen.filter(|p| p.uid().as_deref() == Some(uid));
    if same
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        return Settled::Bound;
    }
    unreserve(shared, uid, node);
    {
        let mut q = shared.queue.lock();
        if same.is_some() {
            q.unschedulable(uid, Instant::now());
        } else {
            q.remove(uid);
        }
    }
    shared.wake.notify_one();
    Settled::Freed
}

fn finish(
    shared: &Shared,
    events: &EventSender,
    uid: &str,
    target: &BindTarget,
    mut record: BindRecord<'_>,
    outcome: Result<(), WriteError>,
) -> Finished {
    let (pod, node) = (record.pod, target.node.as_str());
    let key = || format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    match outcome {
        Ok(()) => {
            shared.metrics.attempt("scheduled");
            if let Some(created) = &pod.metadata.creation_timestamp {
                let age = k8s_openapi::jiff::Timestamp::now().duration_since(created.0);
                let seconds = age.as_secs_f64().max(0.0);
                shared.metrics.e2e_latency.observe(seconds);
                record.pod_scheduling_seconds = Some(seconds);
            }
            shared.telemetry.bind(target.attempt.as_ref(), &record);
            shared.decisions.settle(
                target.decision,
                DecisionOutcome::Bound,
                None,
                Some(record.duration),
            );
            tracing::debug!(pod = %key(), node, "bound");
            let detail = target.claims.as_ref().map(|c| {
                shared.metrics.dra_allocation(c.choice.outcome.label());
                format!(
                    "DRA devices {} ({})",
                    c.choice.devices().join(", "),
                    c.choice.outcome.label()
                )
            });
            events.scheduled(pod, node, detail);
            return Finished::Bound;
        }
        Err(WriteError::NotLeader) => {
            // Nothing was sent.
            shared.decisions.settle(
                target.decision,
                DecisionOutcome::BindFailed,
                Some(
                    "not sent: this replica no longer leads for long enough; retried by the leader"
                        .into(),
                ),
                None,
            );
            unreserve(shared, uid, node);
            shared.queue.lock().retry_now(uid);
        }
        Err(e) if maybe_applied(&e) => {
            shared.metrics.bind_errors.inc();
            shared.metrics.attempt("error");
            record.error = Some((e.code(), e.to_string()));
            shared.telemetry.bind(target.attempt.as_ref(), &record);
            shared.decisions.settle(
                target.decision,
                DecisionOutcome::Binding,
                Some(format!("bind outcome unknown ({e}); the pod stays reserved until it is seen bound or unbound")),
                Some(record.duration),
            );
            tracing::warn!(pod = %key(), node, error = %e, "bind outcome unknown; the pod stays reserved on the node until it is seen bound or unbound");
            return Finished::Unknown;
        }
        Err(e) => {
            shared.metrics.bind_errors.inc();
            shared.metrics.attempt("error");
            record.error = Some((e.code(), e.to_string()));
            shared.telemetry.bind(target.attempt.as_ref(), &record);
            let failure = match e.stale_claim() {
                Some(claim) => format!(
                    "binding to {node} failed: ResourceClaim {claim} changed since TAS read it (409 Conflict), so the allocation chosen from it was not written"
                ),
                None => format!("binding to {node} failed: {e}"),
            };
            shared.decisions.settle(
                target.decision,
                DecisionOutcome::BindFailed,
                Some(format!("{failure}; retried with back-off")),
                Some(record.duration),
            );
            unreserve(shared, uid, node);
            let gone = matches!(e.code(), Some(404 | 409));
            tracing::warn!(pod = %key(), node, error = %e, "bind failed");
            if let WriteError::Claim { .. } = &e {
                shared.metrics.dra_allocation("failed");
                events.failed(
                    pod,
                    format!("{failure}; the claims written for the pod are undone and it is retried with back-off"),
                    true,
                );
            }
            {
                let mut q = shared.queue.lock();
                if gone {
                    // Deleted, or already bound (by us earlier or someone else): the
                    // watches settle what is true; never bind again.
                    q.remove(uid);
                } else {
                    q.unschedulable(uid, Instant::now());
                }
            }
            shared.wake.notify_one();
        }
    }
    Finished::Refused
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::reserve::reserve;
    use crate::test_support::{guaranteed_container, input, pod, shared};

    /// A reserved pod on `node-a` and what finishing its bind with `outcome` left.
    fn finish_with(outcome: Result<(), WriteError>) -> (Arc<Shared>, Pod, Finished) {
        finish_in(shared(), outcome)
    }

    /// [`finish_with`] for a pod the queue handed out for its attempt.
    fn finish_queued(outcome: Result<(), WriteError>) -> (Arc<Shared>, Pod, Finished) {
        let shared = shared();
        {
            let mut queue = shared.queue.lock();
            queue.add(crate::queue::QueuedPod {
                uid: "uid-big".into(),
                key: "default/big".into(),
                priority: 0,
                created: 0,
            });
            assert!(queue.pop(Instant::now()).is_some());
        }
        finish_in(shared, outcome)
    }

    fn finish_in(
        shared: Arc<Shared>,
        outcome: Result<(), WriteError>,
    ) -> (Arc<Shared>, Pod, Finished) {
        let pod = pod("big", &[], json!({"containers": guaranteed_container(4)}));
        reserve(&shared, &pod, &input(&pod), "node-a");
        let target = BindTarget {
            node: "node-a".into(),
            attempt: None,
            decision: 0,
            claims: None,
            admission: Admission::InTurn,
        };
        let record = BindRecord {
            pod: &pod,
            node: "node-a",
            started: SystemTime::now(),
            duration: Duration::from_secs(5),
            pod_scheduling_seconds: None,
            error: None,
        };
        let events = EventSender::disabled();
        let finished = finish(&shared, &events, "uid-big", &target, record, outcome);
        (shared, pod, finished)
    }

    fn reserved_on_a(shared: &Shared) -> bool {
        shared
            .cache
            .inspect(Instant::now())
            .iter()
            .any(|n| n.node == "node-a" && n.reservations.iter().any(|r| r.uid == "uid-big"))
    }

    /// A bind that timed out may still be applied: the pod keeps its reservation and
    /// stays in flight (not requeued), so no other pod is given its resources.
    #[test]
    fn a_timed_out_bind_keeps_its_reservation() {
        let (shared, _, finished) = finish_with(Err(WriteError::TimedOut(Duration::from_secs(5))));
        assert_eq!(finished, Finished::Unknown);
        assert!(shared.is_in_flight("uid-big"));
        assert!(
            reserved_on_a(&shared),
            "{:?}",
            shared.cache.inspect(Instant::now())
        );
        assert!(!shared.queue.lock().contains("uid-big"), "not requeued");
    }

    /// Read back unbound after the timeout: the reservation is freed and the pod
    /// requeued. Read back bound: the reservation stays for the bound-pods watch.
    #[test]
    fn an_unknown_bind_is_settled_by_reading_the_pod() {
        let (shared, unbound, _) = finish_with(Err(WriteError::TimedOut(Duration::from_secs(5))));
        assert_eq!(
            settle(&shared, "uid-big", "node-a", Some(&unbound)),
            Settled::Freed
        );
        assert!(!shared.is_in_flight("uid-big"));
        assert!(!reserved_on_a(&shared));

        let (shared, mut bound, _) = finish_with(Err(WriteError::TimedOut(Duration::from_secs(5))));
        bound.spec.as_mut().unwrap().node_name = Some("node-a".into());
        assert_eq!(
            settle(&shared, "uid-big", "node-a", Some(&bound)),
            Settled::Bound
        );
        assert!(shared.is_in_flight("uid-big"), "the watch settles it");
        assert!(reserved_on_a(&shared));

        let (shared, _, _) = finish_with(Err(WriteError::TimedOut(Duration::from_secs(5))));
        assert_eq!(
            settle(&shared, "uid-big", "node-a", None),
            Settled::Freed,
            "deleted"
        );
        assert!(!reserved_on_a(&shared));
    }

    /// A claim write refused with 409 (the claim changed since it was read): the bind
    /// was not sent, the reservation is freed and the pod waits in the back-off queue
    /// (not dropped as a bind's own 409 is: the pod is still unbound).
    #[test]
    fn a_conflict_on_a_claim_write_requeues_the_pod_with_back_off() {
        let status = kube::core::Status::failure("modified", "Conflict").with_code(409);
        let conflict = WriteError::Claim {
            claim: "ns/gpu".into(),
            source: Box::new(WriteError::Api(kube::Error::Api(Box::new(status)))),
        };
        assert_eq!(conflict.stale_claim(), Some("ns/gpu"));
        let (shared, _, finished) = finish_queued(Err(conflict));
        assert_eq!(finished, Finished::Refused);
        assert!(!shared.is_in_flight("uid-big"));
        assert!(!reserved_on_a(&shared));
        let mut queue = shared.queue.lock();
        assert!(queue.contains("uid-big"), "requeued, not lost");
        assert!(queue.pop(Instant::now()).is_none(), "after a back-off");
    }

    /// A definite refusal still frees the reservation at once.
    #[test]
    fn a_refused_bind_frees_its_reservation() {
        let status = kube::core::Status::failure("conflict", "Conflict").with_code(409);
        let refused = WriteError::Api(kube::Error::Api(Box::new(status)));
        let (shared, _, finished) = finish_with(Err(refused));
        assert_eq!(finished, Finished::Refused);
        assert!(!shared.is_in_flight("uid-big"));
        assert!(!reserved_on_a(&shared));
    }
}
