//! Resync: when a dirty node's latest NRT replaces its pessimistic view, and which
//! reservations survive.

use super::super::{NrtUpdate, PodBound, ResyncOutcome, Search};
use super::*;

const EXCLUSIVE: Option<&str> = Some("with-exclusive-resources");

/// The node after the kubelet put an 8 CPU / 16Gi pod on zone 0.
fn placed_on_zone_0() -> NodeResourceTopology {
    nrt_of(
        NODE,
        &[
            (0, &[("cpu", "22"), ("memory", "44Gi")]),
            (1, &[("cpu", "30"), ("memory", "60Gi")]),
        ],
        &[],
    )
}

fn big(name: &str) -> PodSpecBuilder {
    pod(name, &[("cpu", "8"), ("memory", "16Gi")])
}

/// A dirty node: `p` reserved at `t0` and seen running at `t0`.
fn dirty_node(t0: Instant, config: CacheConfig) -> TopologyCache {
    let cache = cache_with(config);
    cache.update_nrt(nrt("30", "60Gi"));
    let p = big("p");
    reserve(&cache, NODE, &p, t0);
    assert_eq!(
        cache.pod_bound(&p.on(NODE).running().build(), t0),
        PodBound::Confirmed
    );
    cache
}

#[test]
fn a_matching_nrt_replaces_the_view_on_arrival_and_cleans_the_node() {
    let t0 = Instant::now();
    let cache = dirty_node(t0, config());
    // A pod of another scheduler without exclusive resources counts under `all`.
    let web = pod("web", &[("cpu", "1")])
        .burstable()
        .by("default-scheduler");
    assert_eq!(
        cache.pod_bound(&web.on(NODE).running().build(), t0),
        PodBound::Recorded
    );
    let reported = with_fingerprint(placed_on_zone_0(), &[("ns", "p"), ("ns", "web")], None);
    assert_eq!(cache.update_nrt(reported), NrtUpdate::Confirmed);
    assert_eq!(zones_free(&cache), [(22_000, 44), (30_000, 60)]);
    assert!(cache.dirty_nodes().is_empty());
    assert_eq!(cache.metrics().evidence_count(Some(Search::Exact)), 1);
    assert_eq!(cache.metrics().dirty_nodes(), 0);
    assert!(
        cache.resync(t0 + secs(2)).nodes.is_empty(),
        "clean nodes are skipped"
    );
}

#[test]
fn match_with_exclusive_method_counts_only_pinned_pods() {
    let t0 = Instant::now();
    let cache = dirty_node(t0, config());
    let web = pod("web", &[("cpu", "1")])
        .burstable()
        .by("default-scheduler");
    cache.pod_bound(&web.on(NODE).running().build(), t0);

    // Under `all` the agent would have listed `web` too: mismatch.
    cache.update_nrt(with_fingerprint(placed_on_zone_0(), &[("ns", "p")], None));
    let report = cache.resync(t0 + secs(1));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Mismatch));

    let update = cache.update_nrt(with_fingerprint(
        placed_on_zone_0(),
        &[("ns", "p")],
        EXCLUSIVE,
    ));
    assert_eq!(update, NrtUpdate::Confirmed);
    assert_eq!(zones_free(&cache), [(22_000, 44), (30_000, 60)]);
}

#[test]
fn mismatch_keeps_the_node_dirty_and_pessimistic() {
    let t0 = Instant::now();
    let cache = dirty_node(t0, config());
    // A pod the scheduler does not know: no candidate set explains the object.
    cache.update_nrt(with_fingerprint(
        nrt("30", "60Gi"),
        &[("ns", "stranger")],
        None,
    ));
    let report = cache.resync(t0 + secs(5));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Mismatch));
    assert_eq!(report.nodes[0].dirty_for, secs(5));
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
    assert_eq!(cache.dirty_nodes(), [NODE]);
    assert_eq!(cache.metrics().resyncs(ResyncOutcome::Mismatch), 1);
}

#[test]
fn forced_clean_after_max_staleness_reapplies_unconfirmed_reservations() {
    let t0 = Instant::now();
    let cache = dirty_node(t0, config());
    // A fingerprint that never matches (e.g. the agent judges exclusivity otherwise).
    cache.update_nrt(with_fingerprint(
        placed_on_zone_0(),
        &[("ns", "other")],
        None,
    ));
    assert_eq!(
        cache.resync(t0 + secs(119)).outcome(NODE),
        Some(ResyncOutcome::Mismatch)
    );
    // Reserved a second ago and not bound yet: the NRT cannot show it.
    let q = pod("q", &[("cpu", "2"), ("memory", "2Gi")]);
    reserve(&cache, NODE, &q, t0 + secs(119));

    let report = cache.resync(t0 + secs(120));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Forced));
    assert_eq!(report.nodes[0].dirty_for, secs(120));
    assert_eq!(report.nodes[0].carried_over, 1);
    assert_eq!(zones_free(&cache), [(20_000, 42), (28_000, 58)]);
    let status = cache.status(NODE).expect("known");
    assert_eq!(status.dirty_since, Some(t0 + secs(119)), "only q is left");
    assert_eq!(cache.metrics().resyncs(ResyncOutcome::Forced), 1);
    assert_eq!(cache.metrics().dirty_nodes(), 1);
}

#[test]
fn forced_clean_drops_a_leaked_reservation() {
    let t0 = Instant::now();
    let cache = cache();
    cache.update_nrt(with_fingerprint(nrt("30", "60Gi"), &[], None));
    reserve(&cache, NODE, &big("never-bound"), t0);
    // The fingerprint matches (nothing bound), but an unbound pod is always carried.
    let report = cache.resync(t0 + secs(5));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Match));
    assert_eq!(report.nodes[0].carried_over, 1);
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);

    let report = cache.resync(t0 + secs(120));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Forced));
    assert_eq!(report.nodes[0].carried_over, 0);
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
    assert!(cache.dirty_nodes().is_empty());
}

#[test]
fn match_carries_unbound_and_pending_pods() {
    let t0 = Instant::now();
    let cache = dirty_node(t0, config());
    let q = pod("q", &[("cpu", "1"), ("memory", "1Gi")]);
    let r = pod("r", &[("cpu", "2"), ("memory", "2Gi")]);
    reserve(&cache, NODE, &q, t0 + secs(1));
    reserve(&cache, NODE, &r, t0 + secs(2));
    cache.pod_bound(&r.on(NODE).build(), t0 + secs(3));
    cache.update_nrt_at(
        with_fingerprint(placed_on_zone_0(), &[("ns", "p")], None),
        t0 + secs(3),
    );

    let report = cache.resync(t0 + secs(4));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Match));
    assert_eq!(report.nodes[0].carried_over, 2);
    assert_eq!(zones_free(&cache), [(19_000, 41), (27_000, 57)]);
    assert_eq!(
        cache.status(NODE).and_then(|s| s.dirty_since),
        Some(t0 + secs(1))
    );

    // Past the bound, the leaked reservation (never bound) goes; the bound pod the
    // object proves it does not count keeps its room: the kubelet has still to admit
    // it.
    let report = cache.resync(t0 + secs(122));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Forced));
    assert_eq!(report.nodes[0].carried_over, 1);
    assert_eq!(zones_free(&cache), [(20_000, 42), (28_000, 58)]);
    // Once it ends, nothing keeps the node dirty.
    cache.pod_bound(&r.on(NODE).phase("Failed").build(), t0 + secs(123));
    let report = cache.resync(t0 + secs(124));
    assert!(cache.dirty_nodes().is_empty(), "{report:?}");
    assert_eq!(zones_free(&cache), [(22_000, 44), (30_000, 60)]);
}

/// The 15,000-node benchmark's `TopologyAffinityError`s, replayed on one node: `a`
/// and `b` bound, the node agent's object counts `a` only (it was written before the
/// kubelet admitted `b`) and no newer object comes for the maximum staleness (the
/// agent's next write was lost under load). The fingerprint proves the object does not
/// count `b`, so `b` keeps its room past the bound: handing it out put the next pod
/// on `b`'s CPUs, and the kubelet, admitting `b` first, refused that pod.
#[test]
fn a_bound_pod_the_fingerprint_proves_unreported_keeps_its_room_past_the_bound() {
    let t0 = Instant::now();
    let cache = cache();
    cache.update_nrt_at(with_fingerprint(nrt("30", "60Gi"), &[], None), t0);
    let (a, b) = (big("a"), big("b"));
    for (p, at) in [(&a, t0), (&b, t0 + secs(1))] {
        reserve(&cache, NODE, p, at);
        assert_eq!(
            cache.pod_bound(&p.on(NODE).build(), at),
            PodBound::Confirmed
        );
    }
    assert_eq!(zones_free(&cache), [(14_000, 28), (14_000, 28)]);
    // Received after `b` was seen bound, written before the kubelet admitted it.
    let update = cache.update_nrt_at(
        with_fingerprint(placed_on_zone_0(), &[("ns", "a")], None),
        t0 + secs(2),
    );
    assert_eq!(update, NrtUpdate::Confirmed);
    assert_eq!(zones_free(&cache), [(14_000, 28), (22_000, 44)]);

    for at in [5, 60, 121, 300] {
        let report = cache.resync(t0 + secs(at));
        assert_eq!(
            report.outcome(NODE),
            Some(ResyncOutcome::Match),
            "at {at} s"
        );
        assert_eq!(report.nodes[0].carried_over, 1, "at {at} s");
        assert_eq!(
            zones_free(&cache),
            [(14_000, 28), (22_000, 44)],
            "`b`'s room is held at {at} s"
        );
    }
    // The agent's next object counts `b`: the node is clean.
    let both = nrt_of(
        NODE,
        &[
            (0, &[("cpu", "14"), ("memory", "28Gi")]),
            (1, &[("cpu", "30"), ("memory", "60Gi")]),
        ],
        &[],
    );
    let update = cache.update_nrt_at(
        with_fingerprint(both, &[("ns", "a"), ("ns", "b")], None),
        t0 + secs(301),
    );
    assert_eq!(update, NrtUpdate::Confirmed);
    assert!(cache.dirty_nodes().is_empty());
}

#[test]
fn without_fingerprint_the_nrt_is_trusted_after_one_resync_period() {
    let t0 = Instant::now();
    let cache = cache();
    cache.update_nrt(nrt("30", "60Gi"));
    let p = big("p");
    reserve(&cache, NODE, &p, t0);
    cache.pod_bound(&p.on(NODE).running().build(), t0 + secs(1));
    cache.update_nrt_at(placed_on_zone_0(), t0 + secs(2));

    let report = cache.resync(t0 + secs(4));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Deferred));
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);

    // Trusted, but `p` was bound only 4s ago: the agent may not have reported it.
    let report = cache.resync(t0 + secs(5));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::NoFingerprint));
    assert_eq!(report.nodes[0].carried_over, 1);
    assert_eq!(zones_free(&cache), [(14_000, 28), (22_000, 44)]);

    let report = cache.resync(t0 + secs(6));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::NoFingerprint));
    assert_eq!(zones_free(&cache), [(22_000, 44), (30_000, 60)]);
    assert!(cache.dirty_nodes().is_empty());
    assert_eq!(cache.metrics().resyncs(ResyncOutcome::NoFingerprint), 2);
    assert_eq!(cache.metrics().resyncs(ResyncOutcome::Deferred), 1);
}

#[test]
fn unusable_fingerprints_are_treated_as_absent() {
    for (attribute, value) in [
        ("nodeTopologyPodsFingerprint", "garbage"),
        ("nodeTopologyPodsFingerprint", "pfp0v0020123456789abcdef"),
        ("nodeTopologyPodsFingerprintMethod", "some-method"),
    ] {
        let t0 = Instant::now();
        let cache = dirty_node(t0, config());
        let mut reported = with_fingerprint(placed_on_zone_0(), &[("ns", "p")], None);
        match reported.attributes.iter_mut().find(|a| a.name == attribute) {
            Some(existing) => existing.value = value.to_owned(),
            None => reported
                .attributes
                .push(AttributeInfo::new(attribute, value)),
        }
        cache.update_nrt(reported);
        let early = cache.resync(t0 + secs(1));
        assert_eq!(
            early.outcome(NODE),
            Some(ResyncOutcome::Deferred),
            "{value}"
        );
        let late = cache.resync(t0 + secs(10));
        assert_eq!(
            late.outcome(NODE),
            Some(ResyncOutcome::NoFingerprint),
            "{value}"
        );
        assert_eq!(zones_free(&cache), [(22_000, 44), (30_000, 60)], "{value}");
    }
}

#[test]
fn finished_pods_count_only_with_a_dedicated_informer() {
    let kubelet_lists_both = [("ns", "p"), ("ns", "job")];
    for (mode, reported, expected) in [
        (
            InformerMode::Shared,
            &kubelet_lists_both[..],
            ResyncOutcome::Mismatch,
        ),
        (
            InformerMode::Shared,
            &kubelet_lists_both[..1],
            ResyncOutcome::Match,
        ),
        (
            InformerMode::Dedicated,
            &kubelet_lists_both[..],
            ResyncOutcome::Match,
        ),
        (
            InformerMode::Dedicated,
            &kubelet_lists_both[..1],
            ResyncOutcome::Mismatch,
        ),
    ] {
        let t0 = Instant::now();
        let cache = dirty_node(
            t0,
            CacheConfig {
                informer_mode: mode,
                ..config()
            },
        );
        let job = pod("job", &[("cpu", "1"), ("memory", "1Gi")]).by("default-scheduler");
        let outcome = cache.pod_bound(&job.on(NODE).phase("Succeeded").build(), t0);
        assert_eq!(outcome, PodBound::Recorded, "finished pods hold nothing");
        let update = cache.update_nrt(with_fingerprint(placed_on_zone_0(), reported, None));
        let outcome = match update {
            // Matched on arrival: nothing left for the resync.
            NrtUpdate::Confirmed => ResyncOutcome::Match,
            _ => cache
                .resync(t0 + secs(1))
                .outcome(NODE)
                .expect("still dirty"),
        };
        assert_eq!(outcome, expected, "{mode:?} {reported:?}");
    }
}

#[test]
fn a_relist_forgets_vanished_pods_so_the_fingerprint_matches_again() {
    let t0 = Instant::now();
    let cache = dirty_node(t0, config());
    // `gone` was bound and deleted while the watch was away: no Delete ever comes.
    let gone = big("gone");
    reserve(&cache, NODE, &gone, t0);
    cache.pod_bound(&gone.on(NODE).running().build(), t0);
    // `binding` is assumed, its binding still in flight: the relist cannot show it.
    let binding = pod("binding", &[("cpu", "2"), ("memory", "2Gi")]);
    reserve(&cache, NODE, &binding, t0);
    assert_eq!(cache.status(NODE).map(|s| s.reservations), Some(3));

    let forgotten = cache.retain_pods(|uid| uid == "uid-p" || uid == "uid-binding", t0);
    assert_eq!(forgotten, 1);
    let status = cache.status(NODE).expect("node known");
    assert_eq!(status.pods, 1, "only p is believed bound");
    assert_eq!(status.reservations, 2, "p and the in-flight pod");
    assert_eq!(zones_free(&cache), [(20_000, 42), (20_000, 42)]);

    // The node agent reports p alone: the fingerprint agrees, the view is replaced
    // and only the in-flight pod's reservation survives.
    cache.update_nrt(with_fingerprint(placed_on_zone_0(), &[("ns", "p")], None));
    let report = cache.resync(t0 + secs(1));
    assert_eq!(report.outcome(NODE), Some(ResyncOutcome::Match));
    assert_eq!(zones_free(&cache), [(20_000, 42), (28_000, 58)]);
}

#[test]
fn pods_the_node_agent_excludes_are_left_out_of_the_expected_fingerprint() {
    let t0 = Instant::now();
    let cache = dirty_node(t0, config());
    // A kube-system pod the agent's excludePods leaves out of its fingerprint.
    let dns = pod("dns", &[("cpu", "1")])
        .burstable()
        .by("default-scheduler");
    let mut dns_pod = dns.on(NODE).running().build();
    dns_pod.metadata.namespace = Some("kube-system".to_owned());
    cache.pod_bound(&dns_pod, t0);

    let reported = with_fingerprint(placed_on_zone_0(), &[("ns", "p")], None);
    let mut excluding = reported.clone();
    excluding.attributes.push(AttributeInfo::new(
        "nodeTopologyPodsFingerprintExclude",
        "kube-system/* other/{a,b}",
    ));
    // Without the attribute the scheduler counts the kube-system pod: no match.
    cache.update_nrt(reported);
    assert_eq!(
        cache.resync(t0 + secs(1)).outcome(NODE),
        Some(ResyncOutcome::Mismatch)
    );
    assert_eq!(cache.update_nrt(excluding), NrtUpdate::Confirmed);
    assert!(cache.dirty_nodes().is_empty());
}
