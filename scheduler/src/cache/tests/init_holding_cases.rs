//! What a pod's regular init containers keep (exclusive CPUs, pinned memory, devices
//! no later container reuses) stays held back on the view after the node's object
//! reflects the pod: node agents build the object from podresources, which reports app
//! containers and sidecars only.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::PodBound;
use super::*;

/// A `single-numa-node` node of two zones with `free[i]` of 8 CPUs free on zone `i`
/// and 64Gi of memory each, all free.
fn node(free: [u32; 2]) -> NodeResourceTopology {
    let mut nrt = nrt_of(
        NODE,
        &[
            (0, &[("cpu", "8"), ("memory", "64Gi")]),
            (1, &[("cpu", "8"), ("memory", "64Gi")]),
        ],
        &[],
    );
    for a in &mut nrt.attributes {
        match a.name.as_str() {
            "topologyManagerPolicy" => a.value = "single-numa-node".to_owned(),
            "topologyManagerScope" => a.value = "container".to_owned(),
            _ => {}
        }
    }
    for (zone, free) in nrt.zones.iter_mut().zip(free) {
        zone.resources[0].available = free.to_string().as_str().into();
    }
    nrt
}

fn container(name: &str, cpu: &str, memory: &str) -> Container {
    let limits = quantities(&owned(&[("cpu", cpu), ("memory", memory)]));
    Container {
        name: name.to_owned(),
        resources: Some(ResourceRequirements {
            limits,
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

/// A Guaranteed pod whose init container takes 6 CPUs and 8Gi, its app 2 CPUs and
/// 2Gi, bound to `NODE` by `scheduler`.
fn pod_with_init(name: &str, scheduler: &str, phase: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            init_containers: Some(vec![container("init", "6", "8Gi")]),
            containers: vec![container("app", "2", "2Gi")],
            node_name: Some(NODE.to_owned()),
            scheduler_name: Some(scheduler.to_owned()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.to_owned()),
            ..PodStatus::default()
        }),
    }
}

fn cpus_and_memory(cache: &TopologyCache) -> Vec<(i64, i64)> {
    (0..2)
        .map(|z| {
            (
                free(cache, NODE, z, "cpu") / 1000,
                free(cache, NODE, z, "memory") / GI,
            )
        })
        .collect()
}

/// A cache whose node has all 16 CPUs free, with pod `p` ([`pod_with_init`]) placed
/// there by this scheduler and seen bound.
fn placed() -> (TopologyCache, Pod, PodRef, Instant) {
    let cache = cache();
    let now = Instant::now();
    cache.update_nrt(node([8, 8]));
    let pod = pod_with_init("p", SCHEDULER, "Pending");
    let id = PodRef::from_pod(&pod).expect("identity");
    let request = PodRequest::from_pod(&pod).expect("request");
    cache.reserve(NODE, &id, &request, now);
    assert_eq!(cache.pod_bound(&pod, now), PodBound::Confirmed);
    (cache, pod, id, now)
}

#[test]
fn a_placed_pods_init_holding_stays_held_after_its_reservation_is_confirmed() {
    let (cache, pod, id, now) = placed();
    // The reservation covers the whole pod (6 CPUs, the larger of init and app) on
    // every zone it could land on.
    assert_eq!(cpus_and_memory(&cache), [(2, 56), (2, 56)]);

    // The agent reports the app container (2 CPUs, 2Gi on zone 0) and the scheduler
    // drops the reservation: the init container's 6 CPUs stay held (the CPU manager
    // need not reuse them), and its 8Gi less the 2Gi the app reused on the same zone.
    let mut reported = node([6, 8]);
    reported.zones[0].resources[1].available = "62Gi".into();
    cache.update_nrt(reported);
    assert!(cache.unreserve(NODE, &id.uid));
    assert_eq!(cpus_and_memory(&cache), [(0, 56), (8, 64)]);

    // Once the pod is gone, so is the holding.
    cache.pod_deleted(&pod, now);
    let mut reported = node([6, 8]);
    reported.zones[0].resources[1].available = "62Gi".into();
    cache.update_nrt(reported);
    assert_eq!(cpus_and_memory(&cache), [(6, 62), (8, 64)]);
}

#[test]
fn another_schedulers_pod_is_predicted_on_the_view_before_it() {
    let cache = cache();
    let now = Instant::now();
    cache.update_nrt(node([8, 8]));
    let pod = pod_with_init("q", "default-scheduler", "Pending");
    assert_eq!(cache.pod_bound(&pod, now), PodBound::Foreign);
    // Reserved on every zone until an object reflects it.
    assert_eq!(cpus_and_memory(&cache), [(2, 56), (2, 56)]);
    let mut reported = node([6, 8]);
    reported.zones[0].resources[1].available = "62Gi".into();
    cache.update_nrt(reported);
    assert!(cache.unreserve(NODE, "uid-q"));
    assert_eq!(cpus_and_memory(&cache), [(0, 56), (8, 64)]);

    // A terminating pod may have released it already: no longer held.
    let mut finished = pod.clone();
    finished.status.as_mut().expect("status").phase = Some("Succeeded".to_owned());
    assert_eq!(cache.pod_bound(&finished, now), PodBound::Updated);
    assert_eq!(cpus_and_memory(&cache), [(6, 62), (8, 64)]);
}

#[test]
fn a_pod_seen_before_its_nodes_first_object_is_predicted_when_it_arrives() {
    let cache = cache();
    let now = Instant::now();
    // Bound and running before the scheduler has the node's object.
    let pod = pod_with_init("early", "default-scheduler", "Running");
    assert_eq!(cache.pod_bound(&pod, now), PodBound::Foreign);
    // The first object already reflects its app container (2 CPUs, 2Gi on zone 0).
    let mut reported = node([6, 8]);
    reported.zones[0].resources[1].available = "62Gi".into();
    cache.update_nrt(reported.clone());
    assert!(cache.unreserve(NODE, "uid-early"));
    // The init container's 6 CPUs and the 6Gi not reused stay held on zone 0.
    assert_eq!(cpus_and_memory(&cache), [(0, 56), (8, 64)]);
}

#[test]
fn an_object_that_counts_init_containers_cpus_is_not_charged_them_again() {
    let (cache, _, id, _) = placed();

    // The agent saw the shared pool: the app reused 2 of the init container's 6 CPUs,
    // so zone 0 has 2 CPUs free, and the object says the kept CPUs are counted.
    let mut reported = node([2, 8]);
    reported.zones[0].resources[1].available = "62Gi".into();
    reported
        .attributes
        .push(tas_api::nrt::init_cpus::counted_attribute());
    reported.zones[0]
        .attributes
        .extend(tas_api::nrt::init_cpus::zone_attribute(4));
    cache.update_nrt(reported);
    assert!(cache.unreserve(NODE, &id.uid));
    // The CPUs as published; the memory the init container keeps is still held back.
    assert_eq!(cpus_and_memory(&cache), [(2, 56), (8, 64)]);

    // The agent stops counting (its pool went stale): an object from podresources
    // alone, and the prediction holds the init container's 6 CPUs again.
    let mut reported = node([6, 8]);
    reported.zones[0].resources[1].available = "62Gi".into();
    cache.update_nrt(reported);
    assert_eq!(cpus_and_memory(&cache), [(0, 56), (8, 64)]);
}
