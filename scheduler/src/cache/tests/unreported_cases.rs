//! Forcing a node clean when its agent has published nothing since pods were bound
//! (the agent frozen or gone, before its heartbeat says so): the pods holding exclusive
//! resources bound after the latest object arrived keep their reservations.

use super::super::ResyncOutcome;
use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Every zone free, with a fingerprint that never matches what the cache believes.
fn mismatching() -> NodeResourceTopology {
    with_fingerprint(nrt("30", "60Gi"), &[("ns", "other")], None)
}

#[test]
fn pods_bound_after_the_latest_nrt_stay_reserved_when_it_is_forced() {
    let t0 = Instant::now();
    let cache = cache();
    cache.update_nrt_at(mismatching(), t0);
    // Exclusive (whole CPUs): the agent publishes whenever the kubelet admits one.
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &p, t0 + secs(1));
    cache.pod_bound(&p.on(NODE).running().build(), t0 + secs(1));
    // Shared CPUs, no device: its admission changes no NUMA amount.
    let b = pod("b", &[("cpu", "500m"), ("memory", "1Gi")]).burstable();
    cache.pod_bound(&b.on(NODE).running().build(), t0 + secs(2));

    // No object since: after max_staleness (120 s) the node is forced clean, `p` kept.
    let report = cache.resync(t0 + secs(130));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Forced));
    assert_eq!(report.nodes[0].carried_over, 1);
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
    // And on every later resync, while nothing new arrives.
    for at in [135, 600, 3600] {
        cache.resync(t0 + secs(at));
        assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
    }
    assert_eq!(cache.dirty_nodes(), [NODE]);

    // The agent publishes again (without `p`, say it lags): an object received after
    // `p` was bound is trusted as before once forced.
    cache.update_nrt_at(mismatching(), t0 + secs(3601));
    let report = cache.resync(t0 + secs(3602));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Forced));
    assert_eq!(report.nodes[0].carried_over, 0);
    assert!(cache.dirty_nodes().is_empty());
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
}
