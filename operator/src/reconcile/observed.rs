//! Reading the cluster's state out of Kubernetes objects: rollout counts of the
//! workloads, node agent readiness per node, NodeResourceTopology freshness, the NRT
//! CRD. Pure functions over objects from the controller's caches.
//!
//! Freshness: the updater writes its node's NodeResourceTopology only when the content
//! changes, so an idle node's object is legitimately old and its age means nothing. A
//! node's topology is *fresh* when its object exists with at least one zone AND the
//! node's updater pod is Ready: the agent reports Ready only after a successful
//! observation and publish, and turns unready when it cannot observe or publish.

use super::conditions::Workload;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::collections::BTreeSet;
use tas_api::tas::{NodeGroupStatus, NrtCrdStatus};

/// At most this many nodes are listed in `staleNodes` per group.
pub const MAX_STALE_NODES: usize = 20;

/// Whether a pod's `Ready` condition is True and it is not being deleted.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the CRD's `Established` condition is True.
pub fn crd_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// The NRT CRD as reported in status; `None` for the CRD when it does not exist.
pub fn nrt_crd_status(crd: Option<&CustomResourceDefinition>, managed: bool) -> NrtCrdStatus {
    let Some(crd) = crd else {
        return NrtCrdStatus {
            installed: false,
            managed,
            ..NrtCrdStatus::default()
        };
    };
    let versions = &crd.spec.versions;
    NrtCrdStatus {
        installed: crd_established(crd),
        managed,
        served_versions: versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect(),
        storage_version: versions.iter().find(|v| v.storage).map(|v| v.name.clone()),
        foreign_managers: super::coexistence::crd_foreign_managers(Some(crd), super::FIELD_MANAGER),
    }
}

fn observed(generation: Option<i64>, observed_generation: Option<i64>) -> bool {
    match (generation, observed_generation) {
        (Some(g), Some(o)) => o >= g,
        (None, _) => true,
        (Some(_), None) => false,
    }
}

/// Rollout counts of a node agent DaemonSet named `name` (`None`: it does not exist).
pub fn daemon_set_workload(name: &str, ds: Option<&DaemonSet>) -> Workload {
    let Some(ds) = ds else {
        return Workload {
            name: name.to_owned(),
            ..Workload::default()
        };
    };
    let s = ds.status.clone().unwrap_or_default();
    Workload {
        name: name.to_owned(),
        exists: true,
        desired: s.desired_number_scheduled,
        ready: s.number_ready,
        updated: s.updated_number_scheduled.unwrap_or_default(),
        available: s.number_available.unwrap_or_default(),
        current: s.current_number_scheduled,
        observed: observed(ds.metadata.generation, s.observed_generation),
    }
}

/// Rollout counts of the scheduler Deployment named `name` (`None`: it does not exist).
pub fn deployment_workload(name: &str, d: Option<&Deployment>) -> Workload {
    let Some(d) = d else {
        return Workload {
            name: name.to_owned(),
            ..Workload::default()
        };
    };
    let s = d.status.clone().unwrap_or_default();
    Workload {
        name: name.to_owned(),
        exists: true,
        desired: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
        ready: s.ready_replicas.unwrap_or_default(),
        updated: s.updated_replicas.unwrap_or_default(),
        available: s.available_replicas.unwrap_or_default(),
        current: s.replicas.unwrap_or_default(),
        observed: observed(d.metadata.generation, s.observed_generation),
    }
}

/// Status of one node group from the nodes it selects, the nodes whose agent pod is
/// Ready, and the nodes whose NodeResourceTopology has zones.
pub fn group_status(
    name: &str,
    nodes: &BTreeSet<String>,
    agent_ready: &BTreeSet<String>,
    nrt_with_zones: &BTreeSet<String>,
) -> NodeGroupStatus {
    let ready: Vec<&String> = nodes.iter().filter(|n| agent_ready.contains(*n)).collect();
    let fresh = ready
        .iter()
        .filter(|n| nrt_with_zones.contains(**n))
        .count();
    NodeGroupStatus {
        name: name.to_owned(),
        desired_nodes: count(nodes.len()),
        ready_nodes: count(ready.len()),
        nodes_with_fresh_nrt: count(fresh),
        stale_nodes: stale_nodes(nodes, agent_ready, nrt_with_zones)
            .take(MAX_STALE_NODES)
            .cloned()
            .collect(),
        kubelet_config_issues: Vec::new(),
        foreign_nrt_writers: Vec::new(),
    }
}

/// Nodes (of `nodes`, in order) whose topology is not fresh.
pub fn stale_nodes<'a>(
    nodes: &'a BTreeSet<String>,
    agent_ready: &'a BTreeSet<String>,
    nrt_with_zones: &'a BTreeSet<String>,
) -> impl Iterator<Item = &'a String> + 'a {
    nodes
        .iter()
        .filter(move |n| !(agent_ready.contains(*n) && nrt_with_zones.contains(*n)))
}

/// A count as the i32 the API types use, saturating (no cluster has 2^31 nodes).
pub fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DaemonSetStatus;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn fresh_needs_a_ready_agent_and_zones() {
        let nodes = set(&["n1", "n2", "n3", "n4"]);
        let ready = set(&["n1", "n2", "other"]);
        let zones = set(&["n1", "n3"]);
        let s = group_status("g", &nodes, &ready, &zones);
        assert_eq!(s.desired_nodes, 4);
        assert_eq!(s.ready_nodes, 2);
        assert_eq!(s.nodes_with_fresh_nrt, 1, "n1 only");
        // n2: agent ready, no topology; n3: topology, agent not ready; n4: neither.
        assert_eq!(s.stale_nodes, ["n2", "n3", "n4"]);
    }

    #[test]
    fn stale_nodes_are_capped() {
        let nodes: BTreeSet<String> = (0..50).map(|i| format!("n{i:02}")).collect();
        let s = group_status("g", &nodes, &BTreeSet::new(), &BTreeSet::new());
        assert_eq!(s.stale_nodes.len(), MAX_STALE_NODES);
        assert_eq!(s.stale_nodes[0], "n00");
        assert_eq!(s.desired_nodes, 50);
    }

    #[test]
    fn pod_readiness() {
        let mut pod = Pod {
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        assert!(pod_ready(&pod));
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!pod_ready(&pod), "a terminating pod is going away");
        assert!(!pod_ready(&Pod::default()));
    }

    #[test]
    fn daemon_set_counts_and_generation() {
        let ds = DaemonSet {
            metadata: ObjectMeta {
                generation: Some(3),
                ..ObjectMeta::default()
            },
            status: Some(DaemonSetStatus {
                desired_number_scheduled: 4,
                current_number_scheduled: 4,
                number_ready: 3,
                updated_number_scheduled: Some(4),
                number_available: Some(3),
                observed_generation: Some(2),
                ..DaemonSetStatus::default()
            }),
            ..DaemonSet::default()
        };
        let w = daemon_set_workload("d", Some(&ds));
        assert_eq!((w.desired, w.ready, w.updated), (4, 3, 4));
        assert!(!w.observed, "generation 3 not yet observed");
        assert!(!daemon_set_workload("d", None).exists);
    }

    #[test]
    fn nrt_crd_from_the_generated_crd() {
        let crd = tas_api::crds::node_resource_topology();
        let s = nrt_crd_status(Some(&crd), true);
        assert!(!s.installed, "no Established condition on a built CRD");
        assert_eq!(s.served_versions, ["v1alpha1", "v1alpha2"]);
        assert_eq!(s.storage_version.as_deref(), Some("v1alpha2"));
        assert!(!nrt_crd_status(None, false).installed);
    }
}
