//! Pods seen on the watch: ours confirming reservations, foreign pods under each
//! policy, deletions.

use super::super::PodBound;
use super::*;

const OTHER: &str = "default-scheduler";

fn cache_for(policy: ForeignPodsDetection) -> TopologyCache {
    let cache = cache_with(CacheConfig {
        foreign_pods: policy,
        ..config()
    });
    cache.update_nrt(nrt("30", "60Gi"));
    cache
}

fn exclusive_foreign() -> PodSpecBuilder {
    pod("db", &[("cpu", "4"), ("memory", "8Gi")])
        .by(OTHER)
        .on(NODE)
        .running()
}

fn shared_foreign() -> PodSpecBuilder {
    pod("web", &[("cpu", "4"), ("memory", "8Gi")])
        .burstable()
        .by(OTHER)
        .on(NODE)
        .running()
}

#[test]
fn only_exclusive_resources_policy() {
    let cache = cache_for(ForeignPodsDetection::OnlyExclusiveResources);
    let now = Instant::now();
    assert_eq!(
        cache.pod_bound(&shared_foreign().build(), now),
        PodBound::Recorded
    );
    assert!(cache.dirty_nodes().is_empty());

    assert_eq!(
        cache.pod_bound(&exclusive_foreign().build(), now),
        PodBound::Foreign
    );
    assert_eq!(zones_free(&cache), [(26_000, 52), (26_000, 52)]);
    assert_eq!(cache.dirty_nodes(), [NODE]);
    assert_eq!(cache.metrics().foreign_pods(), 1);
    let status = cache.status(NODE).expect("known");
    assert_eq!((status.foreign_reservations, status.pods), (1, 2));

    // Hugepages make a Burstable pod relevant, though it pins nothing we can subtract.
    let cache = cache_for(ForeignPodsDetection::OnlyExclusiveResources);
    let huge = pod("huge", &[("cpu", "1"), ("hugepages-2Mi", "64Mi")])
        .burstable()
        .by(OTHER)
        .on(NODE)
        .running();
    assert_eq!(cache.pod_bound(&huge.build(), now), PodBound::Foreign);
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
    assert_eq!(cache.dirty_nodes(), [NODE]);
}

#[test]
fn all_policy_makes_any_foreign_pod_dirty() {
    let cache = cache_for(ForeignPodsDetection::All);
    let now = Instant::now();
    assert_eq!(
        cache.pod_bound(&shared_foreign().build(), now),
        PodBound::Foreign
    );
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
    assert_eq!(cache.dirty_nodes(), [NODE]);
    assert_eq!(cache.metrics().foreign_pods(), 1);
}

#[test]
fn none_policy_ignores_foreign_pods_but_not_our_unreserved_ones() {
    let cache = cache_for(ForeignPodsDetection::None);
    let now = Instant::now();
    assert_eq!(
        cache.pod_bound(&exclusive_foreign().build(), now),
        PodBound::Recorded
    );
    assert!(cache.dirty_nodes().is_empty());

    // Ours, bound before a restart: nothing reserved it.
    let ours = pod("ours", &[("cpu", "2"), ("memory", "2Gi")])
        .on(NODE)
        .running();
    assert_eq!(cache.pod_bound(&ours.build(), now), PodBound::Foreign);
    assert_eq!(zones_free(&cache), [(28_000, 58), (28_000, 58)]);
}

#[test]
fn finished_and_unbound_pods_change_nothing() {
    let cache = cache_for(ForeignPodsDetection::All);
    let now = Instant::now();
    let done = exclusive_foreign().phase("Failed");
    assert_eq!(cache.pod_bound(&done.build(), now), PodBound::Recorded);
    let unbound = pod("queued", &[("cpu", "2")]);
    assert_eq!(cache.pod_bound(&unbound.build(), now), PodBound::Ignored);
    let mut anonymous = exclusive_foreign().build();
    anonymous.metadata.uid = None;
    assert_eq!(cache.pod_bound(&anonymous, now), PodBound::Ignored);
    assert!(cache.dirty_nodes().is_empty());
}

#[test]
fn our_pod_moves_from_assumed_to_bound_and_later_events_update_it() {
    let cache = cache_for(ForeignPodsDetection::All);
    let now = Instant::now();
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &p, now);
    assert_eq!(
        cache.pod_bound(&p.on(NODE).build(), now),
        PodBound::Confirmed
    );
    assert_eq!(
        cache.pod_bound(&p.on(NODE).running().build(), now),
        PodBound::Updated
    );
    assert_eq!(
        zones_free(&cache),
        [(22_000, 44), (22_000, 44)],
        "kept until resync"
    );
    assert_eq!(cache.metrics().foreign_pods(), 0);
}

#[test]
fn deleting_a_pod_releases_its_reservation() {
    let cache = cache_for(ForeignPodsDetection::OnlyExclusiveResources);
    let now = Instant::now();
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &p, now);
    cache.pod_bound(&p.on(NODE).running().build(), now);
    cache.pod_bound(&exclusive_foreign().build(), now);
    assert_eq!(zones_free(&cache), [(18_000, 36), (18_000, 36)]);

    assert!(cache.pod_deleted(&exclusive_foreign().build(), now));
    assert_eq!(zones_free(&cache), [(22_000, 44), (22_000, 44)]);
    assert!(cache.pod_deleted(&p.on(NODE).build(), now));
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
    assert!(cache.dirty_nodes().is_empty());
    assert!(!cache.pod_deleted(&p.on(NODE).build(), now), "already gone");
    assert_eq!(cache.status(NODE).map(|s| s.pods), Some(0));

    // Deleted while assumed (never bound): found by UID.
    let q = pod("q", &[("cpu", "2"), ("memory", "2Gi")]);
    reserve(&cache, NODE, &q, now);
    assert!(cache.pod_deleted(&q.build(), now));
    assert_eq!(zones_free(&cache), [(30_000, 60), (30_000, 60)]);
}

#[test]
fn a_new_pod_reusing_a_deleted_name_is_counted() {
    let cache = cache_for(ForeignPodsDetection::OnlyExclusiveResources);
    let now = Instant::now();
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")])
        .on(NODE)
        .running();
    cache.pod_bound(&p.build(), now);
    cache.pod_deleted(&p.build(), now);
    let mut again = p.build();
    again.metadata.uid = Some("uid-p-2".to_owned());
    cache.pod_bound(&again, now + secs(1));
    assert_eq!(cache.metrics().identity_reuses(), 1);
    // Long after, the NRT cannot describe the old pod any more.
    cache.pod_deleted(&again, now + secs(2));
    again.metadata.uid = Some("uid-p-3".to_owned());
    cache.pod_bound(&again, now + secs(600));
    assert_eq!(cache.metrics().identity_reuses(), 1);

    // Ours: counted when reserved, not again when bound.
    cache.pod_deleted(&again, now + secs(601));
    let ours = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &ours, now + secs(602));
    cache.pod_bound(&ours.on(NODE).build(), now + secs(603));
    assert_eq!(cache.metrics().identity_reuses(), 2);
}

/// A node with the memory manager `Static` whose zones 0 and 1 show the group {0,1}.
fn grouped_nrt() -> NodeResourceTopology {
    let zone: &[(&str, &str)] = &[("cpu", "8"), ("memory", "8Gi")];
    let mut nrt = nrt_of(
        NODE,
        &[(0, zone), (1, zone), (2, zone)],
        &[("memoryManagerPolicy", "Static")],
    );
    for zone in &mut nrt.zones[..2] {
        zone.attributes
            .push(AttributeInfo::new("memoryManagerGroup", "node-0,node-1"));
    }
    nrt
}

/// `builder`'s pod with a regular init container asking for the same: the kubelet
/// admits it first, so a refusal of the app container can leave its memory behind.
fn with_init(mut pod: Pod) -> Pod {
    let spec = pod.spec.as_mut().expect("spec");
    let mut init = spec.containers[0].clone();
    init.name = "init".to_owned();
    spec.init_containers = Some(vec![init]);
    pod
}

fn refused(builder: &PodSpecBuilder) -> Pod {
    let mut pod = with_init(builder.phase("Failed").build());
    let status = pod.status.as_mut().expect("status");
    status.reason = Some("UnexpectedAdmissionError".to_owned());
    status.message = Some(
        "Pod was rejected: Allocate failed due to requested number of devices unavailable"
            .to_owned(),
    );
    pod
}

fn doubted_zones(cache: &TopologyCache) -> Vec<bool> {
    let view = cache.snapshot(NODE).expect("known").expect("valid");
    (0..view.zone_count())
        .map(|z| view.memory_zone_doubted(z))
        .collect()
}

/// The kubelet refused a pod part-way (its phase turned Failed with the kubelet's
/// rejection message): the groups the node's object shows are doubted, and stay so
/// in views rebuilt from objects that still show them; a pod that failed while
/// running doubts nothing.
#[test]
fn a_kubelet_refusal_doubts_the_memory_groups() {
    let now = Instant::now();
    let cache = cache();
    cache.update_nrt(grouped_nrt());
    let failed = pod("crashed", &[("cpu", "1"), ("memory", "1Gi")])
        .by(OTHER)
        .on(NODE)
        .phase("Failed");
    cache.pod_bound(&failed.build(), now);
    assert_eq!(doubted_zones(&cache), [false, false, false]);

    let gpu = pod("gpu", &[("cpu", "2"), ("memory", "1Gi")])
        .by(OTHER)
        .on(NODE);
    cache.pod_bound(&with_init(gpu.build()), now);
    cache.pod_bound(&refused(&gpu), now);
    assert_eq!(doubted_zones(&cache), [true, true, false]);

    // Deleting the refused pod does not reset the kubelet's cells. A new object still
    // showing the group keeps the doubt; one without ends it.
    cache.pod_deleted(&refused(&gpu), now);
    assert!(cache.dirty_nodes().is_empty(), "{:?}", cache.status(NODE));
    cache.update_nrt(grouped_nrt());
    assert_eq!(doubted_zones(&cache), [true, true, false]);
    let zone: &[(&str, &str)] = &[("cpu", "8"), ("memory", "8Gi")];
    cache.update_nrt(nrt_of(
        NODE,
        &[(0, zone), (1, zone), (2, zone)],
        &[("memoryManagerPolicy", "Static")],
    ));
    assert_eq!(doubted_zones(&cache), [false, false, false]);
    cache.update_nrt(grouped_nrt());
    assert_eq!(doubted_zones(&cache), [false, false, false]);
}
