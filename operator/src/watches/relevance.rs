//! Hashes of what the reconcile reads from each kind: a watch passes an update on only
//! when its hash changed (see [`super::relevant_changes`]).

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use std::hash::{DefaultHasher, Hash, Hasher};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::TopologyAwareScheduling;

fn hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// The CR: its spec (generation), its finalizers (the finalizer helper waits for the
/// update that adds ours) and whether it is being deleted. Not its status: the
/// operator's own status writes must not trigger it again.
pub fn stack(o: &TopologyAwareScheduling) -> u64 {
    let m = &o.metadata;
    hash(&(m.generation, &m.finalizers, m.deletion_timestamp.is_some()))
}

/// A node agent DaemonSet: its spec and labels (drift), and the rollout counts the
/// conditions are computed from.
pub fn daemon_set(o: &DaemonSet) -> u64 {
    let s = o.status.as_ref().map(|s| {
        (
            s.observed_generation,
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_ready,
            s.updated_number_scheduled,
            s.number_available,
        )
    });
    hash(&(o.metadata.generation, &o.metadata.labels, s))
}

/// The scheduler Deployment: spec and labels (drift), and rollout counts.
pub fn deployment(o: &Deployment) -> u64 {
    let s = o.status.as_ref().map(|s| {
        (
            s.observed_generation,
            s.replicas,
            s.ready_replicas,
            s.updated_replicas,
            s.available_replicas,
        )
    });
    hash(&(o.metadata.generation, &o.metadata.labels, s))
}

/// Objects without a status that anyone writes (ConfigMaps, ServiceAccounts,
/// Services, RBAC): every revision is an edit someone made.
pub fn revision<K: Resource>(o: &K) -> u64 {
    hash(&o.meta().resource_version)
}

/// A Node (its metadata): only its labels decide node-group membership. Heartbeats
/// (status) and everything else are ignored.
pub fn labels<K: Resource>(o: &K) -> u64 {
    hash(&o.meta().labels)
}

/// A NodeResourceTopology: whether it has zones and the heartbeat period it promises
/// (freshness), the agent's report on the kubelet configuration, the Topology Manager
/// policy and its foreign writers (status); the updater rewrites it on every allocation
/// change and every heartbeat, which is not the operator's business (the reconcile is
/// requeued for the moment a node can turn stale, see `reconcile::freshness`).
pub fn nrt(o: &NodeResourceTopology) -> u64 {
    let report =
        tas_api::nrt::agent_report::AgentReport::from_annotations(o.metadata.annotations.as_ref());
    hash(&(
        !o.zones.is_empty(),
        o.attribute(tas_api::nrt::heartbeat::HEARTBEAT_PERIOD),
        report.source,
        report.problem,
        o.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(tas_api::nrt::agent_report::AGENT_PROBLEM)),
        o.attribute(tas_api::nrt::attributes::TOPOLOGY_MANAGER_POLICY),
        tas_api::nrt::ownership::foreign_nrt_writers(
            &o.metadata,
            crate::reconcile::coexistence::UPDATER_FIELD_MANAGER,
        ),
    ))
}

/// A node agent pod: where it runs, whether it is Ready (and if not, why: the status
/// names it), whether it is going away.
pub fn updater_pod(o: &Pod) -> u64 {
    let node = o.spec.as_ref().and_then(|s| s.node_name.as_deref());
    let ready = crate::reconcile::observed::pod_ready(o);
    hash(&(
        node,
        ready,
        (!ready).then(|| crate::reconcile::agent_problems::agent_problem(o, None)),
        o.metadata.deletion_timestamp.is_some(),
        &o.metadata.labels,
    ))
}

/// The NRT CRD: its spec (served versions), labels, and whether it is Established.
pub fn crd(o: &CustomResourceDefinition) -> u64 {
    hash(&(
        o.metadata.generation,
        &o.metadata.labels,
        crate::reconcile::observed::crd_established(o),
        tas_api::nrt::ownership::foreign_crd_managers(&o.metadata, crate::reconcile::FIELD_MANAGER),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_agent_s_problem_report_and_an_unready_pod_s_reason_are_relevant() {
        let mut object = NodeResourceTopology::new("n1");
        let before = nrt(&object);
        object.metadata.annotations = Some(
            [(
                tas_api::nrt::agent_report::AGENT_PROBLEM.to_owned(),
                "socket missing".to_owned(),
            )]
            .into(),
        );
        assert_ne!(nrt(&object), before);

        let waiting = |reason: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "a"}, "status": {
                "containerStatuses": [{"name": "updater", "ready": false, "restartCount": 0,
                    "image": "x", "imageID": "", "state": {"waiting": {"reason": reason}}}]
            }}))
            .unwrap()
        };
        assert_ne!(
            updater_pod(&waiting("ContainerCreating")),
            updater_pod(&waiting("ErrImageNeverPull"))
        );
    }
}
