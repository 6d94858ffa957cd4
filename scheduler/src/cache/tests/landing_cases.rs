//! Reservations narrowed to the zones the kubelet could give the pod: which zones a
//! reservation is held on, and that every way out gives back exactly those.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::super::{NrtUpdate, PodBound};
use super::*;
use crate::numa::NumaSet;

/// A node with `policy`/`scope` whose zone `i` has `zones[i] = (CPUs, CPUs free)` and
/// 64Gi of memory, all free.
pub(super) fn node(policy: &str, scope: &str, zones: &[(u32, u32)]) -> NodeResourceTopology {
    let mut nrt = nrt_of(NODE, &[], &[]);
    for a in &mut nrt.attributes {
        match a.name.as_str() {
            "topologyManagerPolicy" => a.value = policy.to_owned(),
            "topologyManagerScope" => a.value = scope.to_owned(),
            _ => {}
        }
    }
    nrt.zones = zones
        .iter()
        .enumerate()
        .map(|(id, &(cpus, free))| {
            let mut zone = nrt_of(
                NODE,
                &[(id as u32, &[("cpu", "0"), ("memory", "64Gi")])],
                &[],
            )
            .zones
            .remove(0);
            let cpu = &mut zone.resources[0];
            cpu.capacity = cpus.to_string().as_str().into();
            cpu.allocatable = cpus.to_string().as_str().into();
            cpu.available = free.to_string().as_str().into();
            zone
        })
        .collect();
    nrt
}

fn cpus_free(cache: &TopologyCache, zones: u32) -> Vec<i64> {
    (0..zones)
        .map(|z| free(cache, NODE, z, "cpu") / 1000)
        .collect()
}

pub(super) fn four_cpus(name: &str) -> PodSpecBuilder {
    pod(name, &[("cpu", "4"), ("memory", "1Gi")])
}

#[test]
fn single_numa_node_pod_that_fits_one_zone_is_held_there_only() {
    let cache = cache();
    let now = Instant::now();
    assert_eq!(
        cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)])),
        NrtUpdate::Added
    );
    let before = cache.snapshot(NODE);
    reserve(&cache, NODE, &four_cpus("a"), now);
    assert_eq!(
        cache.reserved_zones(NODE, "uid-a"),
        Some(NumaSet::from_ids([1]))
    );
    assert_eq!(cpus_free(&cache, 2), [2, 4], "zone 0 untouched");
    assert_eq!(free(&cache, NODE, 0, "memory"), 64 * GI);
    assert_eq!(free(&cache, NODE, 1, "memory"), 63 * GI);

    // Unreserve gives back exactly what was held, where it was held. One CPU fits
    // zone 0 in the view, so the kubelet (lowest zone first) gives it zone 0.
    reserve(
        &cache,
        NODE,
        &pod("b", &[("cpu", "1"), ("memory", "1Gi")]),
        now,
    );
    assert_eq!(
        cache.reserved_zones(NODE, "uid-b"),
        Some(NumaSet::from_ids([0]))
    );
    assert_eq!(cpus_free(&cache, 2), [1, 4]);
    assert!(cache.unreserve(NODE, "uid-a"));
    assert_eq!(cpus_free(&cache, 2), [1, 8]);
    assert!(cache.unreserve(NODE, "uid-b"));
    assert_eq!(cache.snapshot(NODE), before);
}

#[test]
fn single_numa_node_holds_zones_up_to_the_lowest_the_view_can_hold() {
    let cache = cache();
    let now = Instant::now();
    cache.update_nrt(node("single-numa-node", "container", &[(8, 8), (8, 8)]));
    // The kubelet takes the lowest zone that holds the pod; zone 0 surely does.
    reserve(&cache, NODE, &four_cpus("a"), now);
    assert_eq!(
        cache.reserved_zones(NODE, "uid-a"),
        Some(NumaSet::from_ids([0]))
    );
    reserve(&cache, NODE, &four_cpus("b"), now);
    assert_eq!(
        cache.reserved_zones(NODE, "uid-b"),
        Some(NumaSet::from_ids([0]))
    );
    assert_eq!(cpus_free(&cache, 2), [0, 8]);
    // Zone 0 may still have room (the NRT shows it empty): 0 or 1.
    reserve(&cache, NODE, &four_cpus("c"), now);
    assert_eq!(cache.reserved_zones(NODE, "uid-c"), None);
    assert_eq!(cpus_free(&cache, 2), [-4, 4]);
}

#[test]
fn a_view_that_may_miss_pods_holds_every_zone_that_fits() {
    // Pods of other schedulers are not reserved: the view may show more than is free,
    // so the kubelet's tie-break cannot be read off it.
    let mut config = config();
    config.foreign_pods = ForeignPodsDetection::None;
    let cache = cache_with(config);
    cache.update_nrt(node("single-numa-node", "container", &[(8, 8), (8, 8)]));
    reserve(&cache, NODE, &four_cpus("a"), Instant::now());
    assert_eq!(cache.reserved_zones(NODE, "uid-a"), None);
    assert_eq!(cpus_free(&cache, 2), [4, 4]);
}

#[test]
fn best_effort_and_none_hold_on_every_zone() {
    for policy in ["best-effort", "none"] {
        let cache = cache();
        cache.update_nrt(node(policy, "pod", &[(8, 2), (8, 8)]));
        reserve(&cache, NODE, &four_cpus("a"), Instant::now());
        assert_eq!(cache.reserved_zones(NODE, "uid-a"), None, "{policy}");
        assert_eq!(cpus_free(&cache, 2), [-2, 4], "{policy}");
    }
}

#[test]
fn burstable_pods_hold_on_every_zone() {
    let cache = cache();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)]));
    let p = pod(
        "a",
        &[("cpu", "4"), ("memory", "1Gi"), ("example.com/dev", "1")],
    );
    reserve(&cache, NODE, &p.burstable(), Instant::now());
    assert_eq!(cache.reserved_zones(NODE, "uid-a"), None);
}

#[test]
fn foreign_pods_hold_on_every_zone() {
    let cache = cache();
    let now = Instant::now();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)]));
    let other = four_cpus("f").by("default-scheduler").on(NODE).running();
    assert_eq!(cache.pod_bound(&other.build(), now), PodBound::Foreign);
    assert_eq!(cache.reserved_zones(NODE, "uid-f"), None);
    assert_eq!(cpus_free(&cache, 2), [-2, 4]);
}

#[test]
fn restricted_pod_is_held_on_every_mask_of_its_width_with_room() {
    let cache = cache();
    // 6 CPUs and 65Gi need two zones; only {0,1}, {1,3} and {0,3} have 6 CPUs free.
    cache.update_nrt(node("restricted", "pod", &[(4, 4), (4, 3), (4, 1), (4, 2)]));
    let p = pod("a", &[("cpu", "6"), ("memory", "65Gi")]);
    reserve(&cache, NODE, &p, Instant::now());
    assert_eq!(
        cache.reserved_zones(NODE, "uid-a"),
        Some(NumaSet::from_ids([0, 1, 3]))
    );
    assert_eq!(cpus_free(&cache, 4), [-2, -3, 1, -4]);
}

#[test]
fn restricted_pod_whose_providers_disagree_on_the_width_is_held_on_every_zone() {
    let cache = cache();
    // 6 CPUs need two zones, 1Gi one: the kubelet refuses it, and memory the merge
    // leaves out could spread wider, so no narrowing.
    cache.update_nrt(node("restricted", "pod", &[(4, 4), (4, 3), (4, 1), (4, 2)]));
    let p = pod("a", &[("cpu", "6"), ("memory", "1Gi")]);
    reserve(&cache, NODE, &p, Instant::now());
    assert_eq!(cache.reserved_zones(NODE, "uid-a"), None);
}

#[test]
fn container_scope_takes_the_union_over_containers() {
    let cache = cache();
    cache.update_nrt(node(
        "single-numa-node",
        "container",
        &[(8, 2), (8, 8), (8, 3)],
    ));
    // Two containers of 3 and 1 CPUs: 3 fits zones 1 and 2, 1 fits every zone.
    let mut p = pod("a", &[("cpu", "3"), ("memory", "1Gi")]).build();
    let spec = p.spec.as_mut().expect("spec");
    let mut second = spec.containers[0].clone();
    second.name = "side".to_owned();
    let limits = second
        .resources
        .as_mut()
        .and_then(|r| r.limits.as_mut())
        .expect("limits");
    limits.insert("cpu".to_owned(), Quantity("1".to_owned()));
    spec.containers.push(second);
    let request = PodRequest::from_pod(&p).expect("valid");
    cache.reserve(
        NODE,
        &PodRef::new("uid-a", "ns", "a"),
        &request,
        Instant::now(),
    );
    assert_eq!(cache.reserved_zones(NODE, "uid-a"), None);

    // The 3-CPU container alone fits zones 1 and 2 of the bound, and zone 1 of the
    // view: the kubelet gives it zone 1 at the latest.
    let alone = pod("b", &[("cpu", "3"), ("memory", "1Gi")]);
    reserve(&cache, NODE, &alone, Instant::now());
    assert_eq!(
        cache.reserved_zones(NODE, "uid-b"),
        Some(NumaSet::from_ids([1]))
    );
}

/// A single-numa-node node of zones with 2 and 8 free CPUs, where another
/// scheduler's running pod holds 6 CPUs of zone 0 (not reserved under this policy),
/// and pod `a` (4 CPUs) reserved on zone 1 only.
fn other_pod_and_a_narrowed_reservation(now: Instant) -> (TopologyCache, PodSpecBuilder) {
    let mut config = config();
    config.foreign_pods = ForeignPodsDetection::None;
    let cache = cache_with(config);
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)]));
    let other = pod("o", &[("cpu", "6"), ("memory", "1Gi")])
        .by("default-scheduler")
        .on(NODE)
        .running();
    assert_eq!(cache.pod_bound(&other.build(), now), PodBound::Recorded);
    reserve(&cache, NODE, &four_cpus("a"), now);
    assert_eq!(
        cache.reserved_zones(NODE, "uid-a"),
        Some(NumaSet::from_ids([1]))
    );
    (cache, other)
}

#[test]
fn a_departed_pod_widens_the_narrowed_reservations() {
    let now = Instant::now();
    let (cache, other) = other_pod_and_a_narrowed_reservation(now);

    // Gone: the kubelet may give zone 0's CPUs to `a` before any NRT says so.
    assert!(cache.pod_deleted(&other.build(), now));
    assert_eq!(cache.reserved_zones(NODE, "uid-a"), None);
    assert_eq!(cpus_free(&cache, 2), [-2, 4]);
    // And a pod decided now starts from that bound.
    reserve(&cache, NODE, &four_cpus("b"), now);
    assert_eq!(cache.reserved_zones(NODE, "uid-b"), None);
    assert!(cache.unreserve(NODE, "uid-a"));
    assert!(cache.unreserve(NODE, "uid-b"));
    assert_eq!(cpus_free(&cache, 2), [2, 8]);
}

#[test]
fn a_terminating_pod_widens_the_narrowed_reservations() {
    let now = Instant::now();
    let (cache, other) = other_pod_and_a_narrowed_reservation(now);

    let mut terminating = other.build();
    terminating.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    assert_eq!(cache.pod_bound(&terminating, now), PodBound::Updated);
    assert_eq!(cache.reserved_zones(NODE, "uid-a"), None);
}

#[test]
fn pods_that_can_finish_on_their_own_count_as_free_already() {
    let mut config = config();
    config.foreign_pods = ForeignPodsDetection::None;
    let cache = cache_with(config);
    let now = Instant::now();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)]));
    let mut job = pod("o", &[("cpu", "6"), ("memory", "1Gi")])
        .by("default-scheduler")
        .on(NODE)
        .running()
        .build();
    job.spec.as_mut().expect("spec").restart_policy = Some("Never".to_owned());
    cache.pod_bound(&job, now);
    reserve(&cache, NODE, &four_cpus("a"), now);
    assert_eq!(cache.reserved_zones(NODE, "uid-a"), None);
}

#[test]
fn narrowed_reservations_survive_a_rebuild_on_their_zones() {
    let cache = cache();
    let now = Instant::now();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 2), (8, 8)]));
    reserve(&cache, NODE, &four_cpus("a"), now);
    reserve(&cache, NODE, &four_cpus("b"), now);
    assert_eq!(
        cache.reserved_zones(NODE, "uid-b"),
        Some(NumaSet::from_ids([1]))
    );
    // Held on a dirty node, then trusted without a fingerprint: both reservations
    // (not bound) are carried over onto the new object, on the same zones.
    let update = cache.update_nrt(node("single-numa-node", "pod", &[(8, 1), (8, 8)]));
    assert_eq!(update, NrtUpdate::Held);
    let report = cache.resync(now + config().resync_period + secs(1));
    assert_eq!(report.nodes.len(), 1);
    assert_eq!(report.nodes[0].carried_over, 2);
    assert_eq!(cpus_free(&cache, 2), [1, 0]);
    assert!(cache.unreserve(NODE, "uid-a"));
    assert_eq!(cpus_free(&cache, 2), [1, 4]);
    assert!(cache.unreserve(NODE, "uid-b"));
    assert_eq!(
        cpus_free(&cache, 2),
        [1, 8],
        "clean: the latest object itself"
    );
}

/// The bounds a DRA pod's zone is judged between: the view holds `b` (zone 1, but
/// zone 0 was possible as far as the NRT shows) back on both zones; the upper bound
/// keeps `a`, certainly on zone 0, there and gives `b` back, so a 2-CPU pod fits zone 0
/// in it (the kubelet's choice) but only zone 1 in the view.
#[test]
fn zone_bounds_keep_the_pods_whose_zone_is_certain() {
    let cache = cache();
    let now = Instant::now();
    cache.update_nrt(node("single-numa-node", "pod", &[(8, 8), (8, 8)]));
    let six = |name| pod(name, &[("cpu", "6"), ("memory", "1Gi")]);
    reserve(&cache, NODE, &six("a"), now);
    reserve(&cache, NODE, &six("b"), now);
    assert_eq!(
        cache.reserved_zones(NODE, "uid-a"),
        Some(NumaSet::from_ids([0]))
    );
    assert_eq!(cache.reserved_zones(NODE, "uid-b"), None, "0 or 1");
    let (view, upper) = cache.zone_bounds(NODE).expect("bounds");
    let cpus = |t: &crate::numa::NodeTopology| {
        (0..2)
            .map(|z| t.available(z, "cpu").expect("cpu") / 1000)
            .collect::<Vec<_>>()
    };
    assert_eq!(cpus(&view), [-4, 2]);
    assert_eq!(cpus(&upper), [2, 8]);
}
