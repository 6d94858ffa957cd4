//! Table and property tests of the NUMA core, with small builders for pods and NRT
//! objects so each case reads like the reference tables it comes from.

mod cpu_reuse_cases;
mod fit_cases;
mod init_holding_cases;
mod kubelet_cases;
mod manager_cases;
mod memory_doubt_cases;
mod memory_group_cases;
mod merge_cases;
mod props;
mod reference;
mod request_cases;
mod score_cases;
mod topology_cases;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tas_api::nrt::v1alpha2::{AttributeInfo, CostInfo, NodeResourceTopology, ResourceInfo, Zone};

use super::{NodeTopology, PodRequest, Unfit, fit, fits};

fn quantities(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|&(k, v)| (k.to_owned(), Quantity(v.to_owned())))
            .collect()
    })
}

/// A container with these requests and limits.
pub(super) fn container(
    name: &str,
    requests: &[(&str, &str)],
    limits: &[(&str, &str)],
) -> Container {
    Container {
        name: name.to_owned(),
        resources: Some(ResourceRequirements {
            requests: quantities(requests),
            limits: quantities(limits),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

/// A container whose requests equal its limits (set as limits only, so requests are
/// defaulted like the API server does).
pub(super) fn guaranteed(name: &str, resources: &[(&str, &str)]) -> Container {
    container(name, &[], resources)
}

/// A container with requests only.
pub(super) fn burstable(name: &str, requests: &[(&str, &str)]) -> Container {
    container(name, requests, &[])
}

/// Makes `c` a sidecar (init container with `restartPolicy: Always`).
pub(super) fn sidecar(mut c: Container) -> Container {
    c.restart_policy = Some("Always".to_owned());
    c
}

pub(super) fn pod_with(
    init: Vec<Container>,
    apps: Vec<Container>,
    overhead: &[(&str, &str)],
) -> Pod {
    Pod {
        spec: Some(PodSpec {
            init_containers: (!init.is_empty()).then_some(init),
            containers: apps,
            overhead: quantities(overhead),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// A pod with these app containers.
pub(super) fn pod(apps: Vec<Container>) -> Pod {
    pod_with(Vec::new(), apps, &[])
}

pub(super) fn request(pod: &Pod) -> PodRequest {
    PodRequest::from_pod(pod).expect("valid pod")
}

/// One resource of a zone: name, available, allocatable, capacity.
pub(super) type ZoneResource<'a> = (&'a str, &'a str, &'a str, &'a str);

/// A zone whose resources are all free and allocatable: `(name, amount)`.
pub(super) fn free_zone<'a>(
    id: u32,
    resources: &[(&'a str, &'a str)],
) -> (u32, Vec<ZoneResource<'a>>) {
    (id, resources.iter().map(|&(n, a)| (n, a, a, a)).collect())
}

/// An NRT object with `policy`/`scope` attributes, zones `node-<id>` and costs from
/// `distance(from, to)`.
pub(super) fn nrt_with(
    policy: &str,
    scope: &str,
    zones: &[(u32, Vec<ZoneResource<'_>>)],
    distance: impl Fn(u32, u32) -> i64,
) -> NodeResourceTopology {
    let mut nrt = NodeResourceTopology::new("worker-1");
    nrt.attributes = vec![
        AttributeInfo::new("topologyManagerPolicy", policy),
        AttributeInfo::new("topologyManagerScope", scope),
    ];
    nrt.zones = zones
        .iter()
        .map(|(id, resources)| Zone {
            name: format!("node-{id}"),
            type_: "Node".to_owned(),
            costs: zones
                .iter()
                .map(|(to, _)| CostInfo {
                    name: format!("node-{to}"),
                    value: distance(*id, *to),
                })
                .collect(),
            resources: resources
                .iter()
                .map(|&(name, available, allocatable, capacity)| ResourceInfo {
                    name: name.to_owned(),
                    available: available.into(),
                    allocatable: allocatable.into(),
                    capacity: capacity.into(),
                })
                .collect(),
            ..Zone::default()
        })
        .collect();
    nrt
}

/// Distance 10 locally, 21 remotely.
pub(super) fn flat_distance(from: u32, to: u32) -> i64 {
    if from == to { 10 } else { 21 }
}

pub(super) fn node(
    policy: &str,
    scope: &str,
    zones: &[(u32, Vec<ZoneResource<'_>>)],
) -> NodeTopology {
    NodeTopology::from_nrt(&nrt_with(policy, scope, zones, flat_distance)).expect("valid NRT")
}

/// Like [`node`], with these extra top-level attributes (e.g. the CPU and memory
/// manager policies).
pub(super) fn managers_node(
    policy: &str,
    scope: &str,
    zones: &[(u32, Vec<ZoneResource<'_>>)],
    attributes: &[(&str, &str)],
) -> NodeTopology {
    let mut nrt = nrt_with(policy, scope, zones, flat_distance);
    nrt.attributes
        .extend(attributes.iter().map(|&(n, v)| AttributeInfo::new(n, v)));
    NodeTopology::from_nrt(&nrt).expect("valid NRT")
}

/// A named fit case: the pod and `Ok(zone ids)` or `Err(reason text)`.
pub(super) type FitCase<'a> = (&'a str, Pod, Result<&'a [u32], &'a str>);

/// Fits with no node-level resources: `Ok(zones of the pod)` or `Err(reason text)`.
/// Also checks that the filter's [`fits`] agrees: the same zones, or the same reason
/// once its codes are rendered.
pub(super) fn try_fit(node: &NodeTopology, pod: &Pod) -> Result<Option<Vec<u32>>, String> {
    let request = request(pod);
    let full = fit(node, &request, &|_| false);
    match (&full, fits(node, &request, &|_| false)) {
        (Ok(a), Ok(b)) => assert_eq!((a.zones, a.aligned), (b.zones, b.aligned)),
        (Err(a), Err(b)) => assert_eq!(*a, b.render(&request)),
        (a, b) => panic!("fit and fits disagree: {a:?} vs {b:?}"),
    }
    full.map(|p| p.zones.map(|z| z.iter().collect()))
        .map_err(|e: Unfit| e.to_string())
}

/// Asserts the fit result: `Ok(ids)` (empty slice = no NUMA opinion) or an error
/// containing `Err(text)`.
pub(super) fn assert_fit(
    case: &str,
    node: &NodeTopology,
    pod: &Pod,
    expected: Result<&[u32], &str>,
) {
    let got = try_fit(node, pod);
    match (expected, &got) {
        (Ok(ids), Ok(zones)) => {
            assert_eq!(zones.as_deref().unwrap_or(&[]), ids, "{case}");
        }
        (Err(text), Err(message)) => {
            assert!(message.contains(text), "{case}: {message:?} lacks {text:?}");
        }
        _ => panic!("{case}: expected {expected:?}, got {got:?}"),
    }
}
