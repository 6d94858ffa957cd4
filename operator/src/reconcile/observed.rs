//! Reading the cluster's state out of Kubernetes objects: rollout counts of the
//! workloads, node agent readiness per node, NodeResourceTopology freshness, the NRT
//! CRD. Pure functions over objects from the controller's caches.
//!
//! Freshness is judged by time ([`super::freshness`]): the agent rewrites an idle
//! node's object once per heartbeat period, so an object not written for several
//! periods belongs to an agent that stopped, whatever its pod's readiness says.

use super::conditions::Workload;
use super::freshness::Freshness;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::collections::{BTreeMap, BTreeSet};
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
/// Ready, and each node's topology freshness (a node absent from `topology` is missing).
pub fn group_status(
    name: &str,
    nodes: &BTreeSet<String>,
    agent_ready: &BTreeSet<String>,
    topology: &BTreeMap<String, Freshness>,
) -> NodeGroupStatus {
    let ready = nodes.iter().filter(|n| agent_ready.contains(*n)).count();
    let stale: Vec<&String> = stale_nodes(nodes, topology).collect();
    NodeGroupStatus {
        name: name.to_owned(),
        desired_nodes: count(nodes.len()),
        ready_nodes: count(ready),
        nodes_with_fresh_nrt: count(nodes.len() - stale.len()),
        stale_nodes: stale
            .iter()
            .take(MAX_STALE_NODES)
            .map(|n| (*n).clone())
            .collect(),
        kubelet_config_issues: Vec::new(),
        foreign_nrt_writers: Vec::new(),
        stale_node_count: count(stale.len()),
    }
}

/// Nodes (of `nodes`, in order) whose topology is missing or stale.
pub fn stale_nodes<'a>(
    nodes: &'a BTreeSet<String>,
    topology: &'a BTreeMap<String, Freshness>,
) -> impl Iterator<Item = &'a String> + 'a {
    nodes
        .iter()
        .filter(move |n| !topology.get(*n).is_some_and(|f| f.is_fresh()))
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
    fn fresh_is_judged_by_time_not_by_the_agent_pod() {
        let nodes = set(&["n1", "n2", "n3", "n4"]);
        let ready = set(&["n1", "n2", "other"]);
        let topology = BTreeMap::from([
            ("n1".to_owned(), Freshness::Fresh { stale_at: None }),
            (
                "n2".to_owned(),
                Freshness::Stale {
                    age: std::time::Duration::from_secs(3600),
                },
            ),
            ("n3".to_owned(), Freshness::Fresh { stale_at: None }),
        ]);
        let s = group_status("g", &nodes, &ready, &topology);
        assert_eq!(s.desired_nodes, 4);
        assert_eq!(s.ready_nodes, 2);
        // n3's agent is not Ready, but its object was written recently.
        assert_eq!(s.nodes_with_fresh_nrt, 2, "n1 and n3");
        // n2: agent Ready, object not written for an hour; n4: no object.
        assert_eq!(s.stale_nodes, ["n2", "n4"]);
        assert_eq!(s.stale_node_count, 2);
    }

    #[test]
    fn stale_nodes_are_capped_and_counted() {
        let nodes: BTreeSet<String> = (0..50).map(|i| format!("n{i:02}")).collect();
        let s = group_status("g", &nodes, &BTreeSet::new(), &BTreeMap::new());
        assert_eq!(s.stale_nodes.len(), MAX_STALE_NODES);
        assert_eq!(s.stale_nodes[0], "n00");
        assert_eq!(s.stale_node_count, 50);
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
