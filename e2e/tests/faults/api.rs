//! Faults between the schedulers and the API server, and the Lease handed over on
//! SIGTERM. The scheduler pods reach kube-apiserver through the stack's fault proxy
//! (every other client reaches it directly): it answers 429 and 503, or stalls, on
//! request. What a scheduler may never do is checked from kube-apiserver's audit log:
//! every binding it accepted came from a scheduler pod whose last accepted Lease write
//! (acquiring or renewing) was less than the renew deadline minus the write margin
//! before it (plus a little slack), i.e. no bind while the sender could not renew.
//!
//! Their bursts are of large pods only, as many as the zones hold (one per zone): a
//! zone counted twice is a kubelet rejection, and with nothing left Pending the
//! outcome is final as soon as every pod runs (no wait for retries to settle).

use super::harness::{LARGE, NAMESPACE, Run, Stack, TIMEOUT, Verdict};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use std::time::{Duration, Instant, SystemTime};
use tas_testcluster::audit::{self, LeaseWrite};
use tas_testcluster::fault_proxy::Fault;

/// The scheduler's Lease and its timing as the operator renders them (the scheduler's
/// defaults: 15 s lease, renew deadline two thirds of it, write margin a sixth).
const LEASE: &str = "tas-scheduler";
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const MARGIN: Duration = Duration::from_millis(2500);
/// Request latency allowed on top of the fence's bound in the audit-log check.
const SLACK: Duration = Duration::from_millis(1000);

/// Deletes the leading scheduler's pod (of two) in the middle of a burst: the runner
/// stops its process with SIGTERM, as the kubelet does. The process stops binding,
/// waits out the write margin and releases the Lease, so the standby takes over at its
/// next check (or its replacement pod, starting meanwhile, at its first) — long before
/// the lease would expire.
pub async fn terminate_leader(stack: &Stack) -> Verdict {
    let schedulers = stack.schedulers(2).await;
    let leader = stack.leader(&schedulers).await;
    let full = zones(stack);
    let mut run = Run::start(stack, "leader's pod deleted mid-burst (SIGTERM)").await;
    run.create_sized(full / 2, None, LARGE).await;
    let pods: Api<Pod> = Api::namespaced(stack.client.clone(), NAMESPACE);
    let deleted = Instant::now();
    pods.delete(&leader, &DeleteParams::default())
        .await
        .expect("leader's pod deleted");
    let successor = holder_other_than(stack, &leader).await;
    let handover = deleted.elapsed();
    run.create_sized(full - full / 2, None, LARGE).await;
    let verdict = run.finish(stack).await;
    println!(
        "  SIGTERM: {successor} held the Lease {handover:.1?} after {leader}'s pod was deleted"
    );
    // Unreleased, the Lease passes only once the standby has seen it unrenewed for the
    // lease duration: at least 10 s after the last renewal, at most 5 s before.
    assert!(
        handover < LEASE_DURATION / 2,
        "the standby took over {handover:?} after SIGTERM: the Lease was not released"
    );
    check_fenced(stack, &verdict);
    verdict
}

/// During a burst the API server answers the schedulers 429 (with Retry-After), then
/// 503, then stalls (accepts, never answers) for longer than the renew deadline, then
/// heals. The leader loses the Lease without binding meanwhile; after the heal one
/// scheduler acquires it and binds the rest.
pub async fn errors_then_stall(stack: &Stack) -> Verdict {
    let schedulers = stack.schedulers(2).await;
    stack.leader(&schedulers).await;
    let proxy = &stack.proxy;
    let full = zones(stack);
    let mut run = Run::start(stack, "API server 429, 503, then stalled, for schedulers").await;
    run.create_sized(full - 4, None, LARGE).await;
    let phase = Duration::from_secs(2);

    let before = proxy.answered();
    proxy.set(Fault::Answer {
        code: 429,
        retry_after: Some(1),
    });
    run.create_sized(1, None, LARGE).await;
    tokio::time::sleep(phase).await;
    let too_many = proxy.answered() - before;
    proxy.set(Fault::Answer {
        code: 503,
        retry_after: None,
    });
    run.create_sized(1, None, LARGE).await;
    tokio::time::sleep(phase).await;
    let unavailable = proxy.answered() - before - too_many;
    let stalled_before = proxy.stalled();
    proxy.set(Fault::Stall);
    run.create_sized(1, None, LARGE).await;
    tokio::time::sleep(RENEW_DEADLINE + Duration::from_millis(500)).await;
    let stalled = proxy.stalled() - stalled_before;
    proxy.set(Fault::Pass);
    run.create_sized(1, None, LARGE).await;
    let verdict = run.finish(stack).await;
    println!(
        "  API faults: {too_many} requests answered 429, {unavailable} answered 503, {stalled} stalled"
    );
    assert!(
        too_many > 0 && unavailable > 0 && stalled > 0,
        "the schedulers' requests met every fault"
    );
    check_fenced(stack, &verdict);
    verdict
}

/// The Lease requests of the schedulers stall while their binds still pass (a slow
/// Lease path): the leader keeps binding until its write margin before the renew
/// deadline, then stops. Pods created inside that margin are bound only once a
/// scheduler holds the Lease again. Fails if the margin is gone (binds up to the
/// deadline).
pub async fn renewals_stalled(stack: &Stack) -> Verdict {
    let schedulers = stack.schedulers(2).await;
    let leader = stack.leader(&schedulers).await;
    let proxy = &stack.proxy;
    let mut run = Run::start(stack, "Lease renewals stalled, binds pass").await;
    run.create_sized(2, None, LARGE).await;
    run.wait_bound(2).await;
    proxy.set_for("/leases/", Fault::Stall);
    // A renewal already past the proxy is in the log once answered.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let renewed = last_accepted_write(stack, &leader, SystemTime::now())
        .unwrap_or_else(|| panic!("{leader} renewed the Lease before the stall"));
    // Inside the margin: the leader leads until about renewed + RENEW_DEADLINE, but
    // not for longer than the margin.
    let inside = renewed + RENEW_DEADLINE - MARGIN + SLACK + Duration::from_millis(500);
    sleep_until_wall(inside).await;
    let created = SystemTime::now();
    run.create_sized(2, None, LARGE).await;
    sleep_until_wall(renewed + RENEW_DEADLINE + Duration::from_millis(300)).await;
    proxy.set(Fault::Pass);
    let verdict = run.finish(stack).await;
    let gap = created.duration_since(renewed).unwrap_or_default();
    println!("  renewals stalled: 2 pods created {gap:.1?} after {leader}'s last renewal");
    // Bound by whoever holds the Lease after the heal (the leader's restarted process
    // may, under the same pod name), never inside the old leader's margin.
    check_fenced(stack, &verdict);
    verdict
}

/// How many large pods the scenario's zones hold: one per zone.
fn zones(stack: &Stack) -> usize {
    stack.nodes().len() * 2
}

/// The first scheduler pod other than `old` to hold the scheduler Lease, polled every
/// 50 ms.
async fn holder_other_than(stack: &Stack, old: &str) -> String {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(stack.client.clone(), NAMESPACE);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let holder = leases
            .get_opt(LEASE)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        if let Some(h) = holder.filter(|h| !h.is_empty() && h != old) {
            return h;
        }
        assert!(
            Instant::now() < deadline,
            "nobody took the Lease from {old}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn lease_writes(stack: &Stack) -> Vec<LeaseWrite> {
    audit::lease_writes(&stack.audit_log, NAMESPACE, LEASE).expect("audit log read")
}

/// When the API server received the last Lease write by `pod` it accepted, at or
/// before `at`.
fn last_accepted_write(stack: &Stack, pod: &str, at: SystemTime) -> Option<SystemTime> {
    lease_writes(stack)
        .iter()
        .filter(|w| w.accepted() && w.sender_pod.as_deref() == Some(pod) && w.received <= at)
        .map(|w| w.received)
        .max()
}

/// Every binding of the run the API server accepted came from a scheduler pod that
/// had acquired or renewed the Lease less than the renew deadline minus the write
/// margin (plus slack) before: none was sent while its sender could not renew.
fn check_fenced(stack: &Stack, verdict: &Verdict) {
    let writes = lease_writes(stack);
    let bound = RENEW_DEADLINE - MARGIN + SLACK;
    let mut widest = Duration::ZERO;
    for b in verdict.bindings.iter().filter(|b| b.accepted()) {
        let sender = b.sender_pod.as_deref().unwrap_or(&b.user);
        let renewed = writes
            .iter()
            .filter(|w| w.accepted() && w.sender_pod.as_deref() == Some(sender))
            .filter(|w| w.received <= b.received)
            .map(|w| w.received)
            .max()
            .unwrap_or_else(|| {
                panic!(
                    "{}: {} bound by {sender}, which never held the Lease",
                    verdict.fault, b.pod
                )
            });
        let since = b.received.duration_since(renewed).unwrap_or_default();
        widest = widest.max(since);
        assert!(
            since < bound,
            "{}: {} bound by {sender} {since:?} after its last Lease write (fence bound {bound:?})",
            verdict.fault,
            b.pod
        );
    }
    println!(
        "  {}: bindings at most {widest:.1?} after their sender's last Lease write (bound {bound:?})",
        verdict.fault
    );
}

/// Sleeps until the wall clock reads `at` (the audit log's clock).
async fn sleep_until_wall(at: SystemTime) {
    if let Ok(left) = at.duration_since(SystemTime::now()) {
        tokio::time::sleep(left).await;
    }
}
