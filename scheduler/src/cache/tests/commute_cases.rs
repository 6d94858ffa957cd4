//! Which reserved pods' binds may leave ahead of the earlier binds to their node
//! ([`TopologyCache::admission_commutes`]): those the kubelet pins nothing of to a
//! zone, and those that can only land on the node's lowest zone.

use super::landing_cases::{four_cpus, node};
use super::*;

fn commutes(cache: &TopologyCache, pod: &PodSpecBuilder) -> bool {
    cache.admission_commutes(NODE, &format!("uid-{}", pod.name), &pod.request())
}

#[test]
fn pods_landing_on_the_lowest_zone_only_commute_the_others_keep_their_turn() {
    let cache = cache();
    let now = Instant::now();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 8), (8, 8)]));
    // Zone 0 holds both: each can only be given zone 0, in either order.
    let (a, b) = (four_cpus("a"), four_cpus("b"));
    reserve(&cache, NODE, &a, now);
    reserve(&cache, NODE, &b, now);
    assert!(commutes(&cache, &a) && commutes(&cache, &b));
    // Zone 0 is full in the view but may not be yet for the kubelet (a and b in
    // flight): c could take zone 0 if it went first, so it waits.
    let c = four_cpus("c");
    reserve(&cache, NODE, &c, now);
    assert!(!commutes(&cache, &c));
}

#[test]
fn a_pod_held_on_one_higher_zone_keeps_its_turn() {
    let cache = cache();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)]));
    // Only zone 1 holds it, but zone 0 may gain room (a pod leaving) before the
    // kubelet admits it: then it would take zone 0, where an earlier pod may be due.
    let a = four_cpus("a");
    reserve(&cache, NODE, &a, Instant::now());
    assert_eq!(
        cache.reserved_zones(NODE, "uid-a"),
        Some(crate::numa::NumaSet::from_ids([1]))
    );
    assert!(!commutes(&cache, &a));
}

#[test]
fn pods_the_kubelet_pins_nothing_of_commute_everywhere() {
    let cache = cache();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)]));
    let burstable = pod("s", &[("cpu", "4"), ("memory", "1Gi")]).burstable();
    reserve(&cache, NODE, &burstable, Instant::now());
    assert!(commutes(&cache, &burstable));
}

#[test]
fn other_policies_and_views_that_may_miss_pods_keep_the_order() {
    for policy in ["restricted", "best-effort", "none"] {
        let cache = cache();
        cache.update_nrt(node(policy, "pod", &[(8, 8), (8, 8)]));
        let a = four_cpus("a");
        reserve(&cache, NODE, &a, Instant::now());
        assert!(!commutes(&cache, &a), "{policy}");
    }
    let mut config = config();
    config.foreign_pods = ForeignPodsDetection::None;
    let cache = cache_with(config);
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 8), (8, 8)]));
    let a = four_cpus("a");
    reserve(&cache, NODE, &a, Instant::now());
    assert!(!commutes(&cache, &a));
    // Not reserved at all: nothing to go by.
    assert!(!commutes(&cache, &four_cpus("z")));
}
