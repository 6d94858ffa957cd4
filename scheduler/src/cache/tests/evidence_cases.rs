//! Fingerprint evidence on arrival: a dirty node's NRT object is accepted as soon as
//! its fingerprint shows which unconfirmed pods it reflects, and only the others keep
//! their reservations.

use super::super::{NrtUpdate, PodBound, SUBSET_MAX_PODS, Search};
use super::*;

fn small(name: &str) -> PodSpecBuilder {
    pod(name, &[("cpu", "2"), ("memory", "2Gi")])
}

/// Two zones of 30 CPUs / 60Gi, with the fingerprint of `pods` (names in `ns`) and
/// zone 0 reduced by 2 CPUs / 2Gi per pod: what the agent reports once the kubelet
/// put them there.
fn reported(pods: &[&str]) -> NodeResourceTopology {
    let used = 2 * i64::try_from(pods.len()).expect("few pods");
    let zone0 = [
        ("cpu", format!("{}", 30 - used)),
        ("memory", format!("{}Gi", 60 - used)),
    ];
    let zone0: Vec<(&str, &str)> = zone0.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let zone1: &[(&str, &str)] = &[("cpu", "30"), ("memory", "60Gi")];
    let ids: Vec<(&str, &str)> = pods.iter().map(|p| ("ns", *p)).collect();
    with_fingerprint(nrt_of(NODE, &[(0, &zone0), (1, zone1)], &[]), &ids, None)
}

/// A node whose first NRT is accepted, then `names` reserved and seen bound (still
/// `Pending` for the shared informer) one second apart, in that order.
fn burst(t0: Instant, names: &[&str]) -> TopologyCache {
    let cache = cache();
    cache.update_nrt(reported(&[]));
    for (i, name) in names.iter().enumerate() {
        let at = t0 + secs(u64::try_from(i).expect("few pods"));
        let p = small(name);
        reserve(&cache, NODE, &p, at);
        assert_eq!(
            cache.pod_bound(&p.on(NODE).build(), at),
            PodBound::Confirmed
        );
    }
    cache
}

#[test]
fn a_bind_order_prefix_is_accepted_on_arrival() {
    let t0 = Instant::now();
    let cache = burst(t0, &["a", "b", "c"]);
    assert_eq!(zones_free(&cache), [(24_000, 54), (24_000, 54)]);

    // The kubelet admitted `a` only; before, this waited for the resync timer (and
    // then for a fingerprint covering every bound pod).
    assert_eq!(cache.update_nrt(reported(&["a"])), NrtUpdate::Confirmed);
    assert_eq!(cache.metrics().evidence_count(Some(Search::Prefix)), 1);
    let status = cache.status(NODE).expect("known");
    assert_eq!(status.reservations, 2, "b and c are not in the object yet");
    assert_eq!(zones_free(&cache), [(24_000, 54), (26_000, 56)]);

    // Everything admitted: clean.
    assert_eq!(
        cache.update_nrt(reported(&["a", "b", "c"])),
        NrtUpdate::Confirmed
    );
    assert!(cache.dirty_nodes().is_empty());
    assert_eq!(zones_free(&cache), [(24_000, 54), (30_000, 60)]);
}

#[test]
fn an_out_of_order_subset_is_found_by_the_bounded_search() {
    let t0 = Instant::now();
    let cache = burst(t0, &["a", "b", "c"]);
    // The kubelet admitted `b` before `a`: no bind-order prefix explains it.
    assert_eq!(cache.update_nrt(reported(&["b"])), NrtUpdate::Confirmed);
    assert_eq!(cache.metrics().evidence_count(Some(Search::Subset)), 1);
    let status = cache.status(NODE).expect("known");
    assert_eq!(status.reservations, 2, "a and c keep theirs");
    assert!(cache.reserved_amounts(NODE, "uid-b").is_none());
    assert!(cache.reserved_amounts(NODE, "uid-a").is_some());
    assert_eq!(zones_free(&cache), [(24_000, 54), (26_000, 56)]);
}

#[test]
fn an_object_no_candidate_explains_is_held_and_counted_as_a_miss() {
    let t0 = Instant::now();
    let cache = burst(t0, &["a", "b"]);
    assert_eq!(
        cache.update_nrt(reported(&["a", "stranger"])),
        NrtUpdate::Held
    );
    assert_eq!(cache.metrics().evidence_count(None), 1);
    assert_eq!(
        zones_free(&cache),
        [(26_000, 56), (26_000, 56)],
        "still pessimistic"
    );
}

#[test]
fn the_subset_search_is_bounded() {
    let t0 = Instant::now();
    let names: Vec<String> = (0..=SUBSET_MAX_PODS).map(|i| format!("p{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cache = burst(t0, &names);
    // Only the second pod admitted: not a prefix, and too many pods to try every subset.
    assert_eq!(cache.update_nrt(reported(&[names[1]])), NrtUpdate::Held);
    assert_eq!(cache.metrics().evidence_count(None), 1);
    // Prefixes are still tried however many pods there are.
    assert_eq!(
        cache.update_nrt(reported(&names[..2])),
        NrtUpdate::Confirmed
    );
    let status = cache.status(NODE).expect("known");
    assert_eq!(status.reservations, SUBSET_MAX_PODS + 1 - 2);
}

#[test]
fn a_deletion_the_object_still_counts_does_not_block_it() {
    let t0 = Instant::now();
    let cache = burst(t0, &["old"]);
    let old = small("old");
    cache.pod_bound(&old.on(NODE).running().build(), t0);
    assert_eq!(cache.update_nrt(reported(&["old"])), NrtUpdate::Confirmed);
    assert!(cache.dirty_nodes().is_empty());

    // `old` is deleted and `new` bound; the agent still lists `old` and not `new`.
    cache.pod_deleted(&old.on(NODE).running().build(), t0 + secs(10));
    let new = small("new");
    reserve(&cache, NODE, &new, t0 + secs(11));
    cache.pod_bound(&new.on(NODE).build(), t0 + secs(11));
    assert_eq!(cache.update_nrt(reported(&["old"])), NrtUpdate::Confirmed);
    // The object still holds `old`'s room; `new` stays reserved on top: pessimistic.
    assert_eq!(zones_free(&cache), [(26_000, 56), (28_000, 58)]);

    // The agent catches up: `old` gone, `new` in.
    assert_eq!(cache.update_nrt(reported(&["new"])), NrtUpdate::Confirmed);
    assert!(cache.dirty_nodes().is_empty());
    assert_eq!(zones_free(&cache), [(28_000, 58), (30_000, 60)]);
}
