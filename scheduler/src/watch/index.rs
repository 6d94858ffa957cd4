//! The index task: the one task that applies what the watches deliver.
//!
//! Each watch task only forwards its stream's items, tagged with their kind, into one
//! bounded channel ([`Update`]); this task owns every kind's [`Index`] (with its relist
//! bookkeeping) and applies the items in the order they arrive. So the cluster state,
//! the reserve cache's NRT and pod records, the pending pods, namespaces, budgets,
//! volumes and DRA objects have a single writer fed by the API server, and two watches never contend
//! for a lock. The scheduling loop's own changes (assuming a decided pod, forgetting a
//! failed bind) stay with the loop, so the next decision sees them at once. A full
//! channel makes the watches wait (back-pressure), never drops an event.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tokio::sync::mpsc;

use super::budgets::BudgetWatch;
use super::dra::{DeviceClassWatch, ResourceClaimWatch, SliceWatch};
use super::namespaces::NamespaceWatch;
use super::nodes::NodeWatch;
use super::pods::{BoundPodWatch, PendingPodWatch};
use super::relist::Relisting;
use super::topologies::TopologyWatch;
use super::volumes::{ClaimWatch, StorageClassWatch, VolumeWatch};
use crate::shared::Shared;

/// Items in flight from the watches to the index task at most.
pub(super) const CAPACITY: usize = 1024;

/// One item of a watch's stream: an event, or the error the watcher retries after.
pub(super) type Item<K> = Result<Event<K>, watcher::Error>;

/// An item of one watch, tagged with the watch it came from (boxed: the kinds' objects
/// differ much in size, and a channel slot takes the largest).
pub(super) enum Update {
    /// Nodes.
    Nodes(Box<Item<Node>>),
    /// Pods bound to a node.
    BoundPods(Box<Item<Pod>>),
    /// Our pods not bound yet.
    PendingPods(Box<Item<Pod>>),
    /// NodeResourceTopology objects.
    Topologies(Box<Item<NodeResourceTopology>>),
    /// Namespaces (metadata only).
    Namespaces(Box<Item<PartialObjectMeta<Namespace>>>),
    /// PodDisruptionBudgets.
    Budgets(Box<Item<PodDisruptionBudget>>),
    /// PersistentVolumeClaims.
    Claims(Box<Item<PersistentVolumeClaim>>),
    /// PersistentVolumes.
    Volumes(Box<Item<PersistentVolume>>),
    /// StorageClasses.
    StorageClasses(Box<Item<StorageClass>>),
    /// ResourceSlices.
    ResourceSlices(Box<Item<ResourceSlice>>),
    /// DeviceClasses.
    DeviceClasses(Box<Item<DeviceClass>>),
    /// ResourceClaims.
    ResourceClaims(Box<Item<ResourceClaim>>),
}

/// Every watch's index, owned by the index task.
pub(super) struct Indexes {
    nodes: Relisting<NodeWatch>,
    bound_pods: Relisting<BoundPodWatch>,
    pending_pods: Relisting<PendingPodWatch>,
    topologies: Relisting<TopologyWatch>,
    namespaces: Relisting<NamespaceWatch>,
    budgets: Relisting<BudgetWatch>,
    claims: Relisting<ClaimWatch>,
    volumes: Relisting<VolumeWatch>,
    storage_classes: Relisting<StorageClassWatch>,
    resource_slices: Relisting<SliceWatch>,
    device_classes: Relisting<DeviceClassWatch>,
    resource_claims: Relisting<ResourceClaimWatch>,
}

impl Indexes {
    /// Every index, empty, writing into `shared`.
    pub(super) fn new(shared: &Arc<Shared>) -> Self {
        Self {
            nodes: Relisting::new(NodeWatch::new(shared.clone())),
            bound_pods: Relisting::new(BoundPodWatch(shared.clone())),
            pending_pods: Relisting::new(PendingPodWatch(shared.clone())),
            topologies: Relisting::new(TopologyWatch::new(shared.clone())),
            namespaces: Relisting::new(NamespaceWatch(shared.clone())),
            budgets: Relisting::new(BudgetWatch(shared.clone())),
            claims: Relisting::new(ClaimWatch(shared.clone())),
            volumes: Relisting::new(VolumeWatch(shared.clone())),
            storage_classes: Relisting::new(StorageClassWatch(shared.clone())),
            resource_slices: Relisting::new(SliceWatch::new(shared.clone())),
            device_classes: Relisting::new(DeviceClassWatch::new(shared.clone())),
            resource_claims: Relisting::new(ResourceClaimWatch::new(shared.clone())),
        }
    }

    /// Apply one update to the index of its kind.
    pub(super) fn apply(&mut self, update: Update) {
        match update {
            Update::Nodes(item) => self.nodes.handle(*item),
            Update::BoundPods(item) => self.bound_pods.handle(*item),
            Update::PendingPods(item) => self.pending_pods.handle(*item),
            Update::Topologies(item) => self.topologies.handle(*item),
            Update::Namespaces(item) => self.namespaces.handle(*item),
            Update::Budgets(item) => self.budgets.handle(*item),
            Update::Claims(item) => self.claims.handle(*item),
            Update::Volumes(item) => self.volumes.handle(*item),
            Update::StorageClasses(item) => self.storage_classes.handle(*item),
            Update::ResourceSlices(item) => self.resource_slices.handle(*item),
            Update::DeviceClasses(item) => self.device_classes.handle(*item),
            Update::ResourceClaims(item) => self.resource_claims.handle(*item),
        }
    }
}

/// The index task: applies updates until every watch has stopped sending (the process
/// is ending).
pub(super) async fn run(mut updates: mpsc::Receiver<Update>, mut indexes: Indexes) {
    while let Some(update) = updates.recv().await {
        indexes.apply(update);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}
        }))
        .expect("node")
    }

    fn bound_pod(name: &str, node: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": [{"name": "app",
                "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
        }))
        .expect("pod")
    }

    #[tokio::test]
    async fn updates_of_every_kind_reach_the_shared_state_in_the_order_sent() {
        let shared = crate::test_support::shared();
        let (tx, rx) = mpsc::channel(CAPACITY);
        let task = tokio::spawn(run(rx, Indexes::new(&shared)));
        let sends = [
            Update::Nodes(Box::new(Ok(Event::Init))),
            Update::Nodes(Box::new(Ok(Event::InitApply(node("n1"))))),
            Update::Nodes(Box::new(Ok(Event::InitApply(node("n2"))))),
            Update::Nodes(Box::new(Ok(Event::InitDone))),
            Update::BoundPods(Box::new(Ok(Event::Apply(bound_pod("a", "n1"))))),
            Update::BoundPods(Box::new(Ok(Event::Apply(bound_pod("b", "n2"))))),
            Update::BoundPods(Box::new(Ok(Event::Delete(bound_pod("b", "n2"))))),
            // A relist of the nodes that no longer lists n2.
            Update::Nodes(Box::new(Ok(Event::Init))),
            Update::Nodes(Box::new(Ok(Event::InitApply(node("n1"))))),
            Update::Nodes(Box::new(Ok(Event::InitDone))),
        ];
        for update in sends {
            tx.send(update).await.expect("the index task runs");
        }
        // Every watch has stopped: the task drains the channel and ends.
        drop(tx);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the index task ends once every sender is gone")
            .expect("no panic");

        assert!(
            shared
                .synced
                .nodes
                .load(std::sync::atomic::Ordering::Acquire)
        );
        let state = shared.state.read();
        assert_eq!(state.node_of("uid-a"), Some("n1"));
        assert_eq!(state.node_of("uid-b"), None);
        assert!(state.node("n1").is_some());
        assert!(state.node("n2").is_none(), "the relist forgot n2");
    }
}
