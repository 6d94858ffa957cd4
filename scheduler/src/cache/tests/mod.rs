//! Behaviour of the reserve cache as the scheduler sees it: what a filter reads after
//! reserves, binds, deletions, NRT updates and resyncs. Builders keep each case short.

mod commute_cases;
mod evidence_cases;
mod init_holding_cases;
mod landing_cases;
mod landing_props;
mod node_identity_cases;
mod pod_cases;
mod props;
mod reserve_cases;
mod resync_cases;
mod stopped_writer_cases;
mod unreported_cases;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tas_api::fingerprint;
use tas_api::nrt::v1alpha2::{AttributeInfo, NodeResourceTopology, ResourceInfo, Zone};
use tas_api::tas::{ForeignPodsDetection, InformerMode};

use super::{CacheConfig, CacheMetrics, PodRef, TopologyCache};
use crate::numa::PodRequest;

const NODE: &str = "worker-1";
const SCHEDULER: &str = "tas-scheduler";
const GI: i64 = 1 << 30;

fn config() -> CacheConfig {
    CacheConfig {
        scheduler_name: SCHEDULER.to_owned(),
        resync_period: Duration::from_secs(5),
        max_staleness: Duration::from_secs(120),
        foreign_pods: ForeignPodsDetection::OnlyExclusiveResources,
        informer_mode: InformerMode::Shared,
        missed_heartbeats: 3,
    }
}

fn cache_with(config: CacheConfig) -> TopologyCache {
    TopologyCache::new(config, CacheMetrics::default())
}

fn cache() -> TopologyCache {
    cache_with(config())
}

/// An NRT object for `node` with `best-effort`/`pod` attributes, `extra` attributes,
/// and zones `node-<id>` whose resources are all free. Under `best-effort` a
/// reservation holds every zone, which is what most cases here picture; the cases of
/// reservations narrowed to some zones (`single-numa-node`, `restricted`) are in
/// `landing_cases` and `landing_props`.
fn nrt_of(
    node: &str,
    zones: &[(u32, &[(&str, &str)])],
    extra: &[(&str, &str)],
) -> NodeResourceTopology {
    let mut nrt = NodeResourceTopology::new(node);
    nrt.attributes = [
        ("topologyManagerPolicy", "best-effort"),
        ("topologyManagerScope", "pod"),
    ]
    .iter()
    .chain(extra)
    .map(|&(n, v)| AttributeInfo::new(n, v))
    .collect();
    nrt.zones = zones
        .iter()
        .map(|&(id, resources)| Zone {
            name: format!("node-{id}"),
            type_: "Node".to_owned(),
            resources: resources
                .iter()
                .map(|&(name, amount)| ResourceInfo {
                    name: name.to_owned(),
                    available: amount.into(),
                    allocatable: amount.into(),
                    capacity: amount.into(),
                })
                .collect(),
            ..Zone::default()
        })
        .collect();
    nrt
}

/// Reference case 7's node: two zones of 30 CPUs and 60Gi each, no fingerprint.
fn nrt(cpus: &str, memory: &str) -> NodeResourceTopology {
    let zone: &[(&str, &str)] = &[("cpu", cpus), ("memory", memory)];
    nrt_of(NODE, &[(0, zone), (1, zone)], &[])
}

/// `nrt` with the fingerprint of `pods` (namespace, name) and an optional method.
fn with_fingerprint(
    mut nrt: NodeResourceTopology,
    pods: &[(&str, &str)],
    method: Option<&str>,
) -> NodeResourceTopology {
    let value = fingerprint::compute(pods.iter().copied());
    nrt.attributes
        .push(AttributeInfo::new("nodeTopologyPodsFingerprint", value));
    if let Some(method) = method {
        nrt.attributes.push(AttributeInfo::new(
            "nodeTopologyPodsFingerprintMethod",
            method,
        ));
    }
    nrt
}

/// A pod builder: Guaranteed by default (limits only), ours, unbound, Pending.
#[derive(Clone)]
struct PodSpecBuilder {
    name: String,
    limits: Vec<(String, String)>,
    requests: Vec<(String, String)>,
    node: Option<String>,
    scheduler: String,
    phase: Option<String>,
}

fn pod(name: &str, limits: &[(&str, &str)]) -> PodSpecBuilder {
    PodSpecBuilder {
        name: name.to_owned(),
        limits: owned(limits),
        requests: Vec::new(),
        node: None,
        scheduler: SCHEDULER.to_owned(),
        phase: None,
    }
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|&(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn quantities(pairs: &[(String, String)]) -> Option<BTreeMap<String, Quantity>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Quantity(v.clone())))
            .collect()
    })
}

impl PodSpecBuilder {
    /// Requests only (Burstable), replacing the limits.
    fn burstable(&self) -> Self {
        let mut next = self.clone();
        next.requests = std::mem::take(&mut next.limits);
        next
    }

    fn on(&self, node: &str) -> Self {
        let mut next = self.clone();
        next.node = Some(node.to_owned());
        next
    }

    fn by(&self, scheduler: &str) -> Self {
        let mut next = self.clone();
        next.scheduler = scheduler.to_owned();
        next
    }

    fn phase(&self, phase: &str) -> Self {
        let mut next = self.clone();
        next.phase = Some(phase.to_owned());
        next
    }

    fn running(&self) -> Self {
        self.phase("Running")
    }

    fn build(&self) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some("ns".to_owned()),
                uid: Some(format!("uid-{}", self.name)),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".to_owned(),
                    resources: Some(ResourceRequirements {
                        requests: quantities(&self.requests),
                        limits: quantities(&self.limits),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                node_name: self.node.clone(),
                scheduler_name: Some(self.scheduler.clone()),
                ..PodSpec::default()
            }),
            status: self.phase.as_ref().map(|phase| PodStatus {
                phase: Some(phase.clone()),
                ..PodStatus::default()
            }),
        }
    }

    fn id(&self) -> PodRef {
        PodRef::new(format!("uid-{}", self.name), "ns", &self.name)
    }

    fn request(&self) -> PodRequest {
        PodRequest::from_pod(&self.build()).expect("valid pod")
    }
}

/// Reserves `pod` on `node` the way the scheduling cycle does.
fn reserve(cache: &TopologyCache, node: &str, pod: &PodSpecBuilder, now: Instant) {
    cache.reserve(node, &pod.id(), &pod.request(), now);
}

/// Free amount of `resource` in zone `numa` of `node`'s view (CPU in millicores).
fn free(cache: &TopologyCache, node: &str, numa: u32, resource: &str) -> i64 {
    let view = cache.snapshot(node).expect("node has a view");
    let topology = view.expect("view is usable");
    topology
        .available(numa, resource)
        .expect("zone reports resource")
}

/// `(cpu millicores, memory Gi)` free in every zone of `NODE`.
fn zones_free(cache: &TopologyCache) -> Vec<(i64, i64)> {
    (0..2)
        .map(|z| {
            (
                free(cache, NODE, z, "cpu"),
                free(cache, NODE, z, "memory") / GI,
            )
        })
        .collect()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
