//! `NodeResourcesFit`: does the node have room for the pod's requests?
//!
//! The pod's request is `max(max init, sum app + sidecars) + overhead` per resource
//! (computed once per pod by [`crate::numa::PodRequest`]); the node's free amount is
//! its allocatable minus the requests of the non-terminal pods bound to it (kept
//! incrementally by [`NodeInfo`]). Like kube-scheduler, the pod-count check always
//! runs, resources the pod does not request are skipped, a scalar resource the node
//! does not have counts as zero allocatable, and every shortfall is reported, in the
//! order pods, cpu, memory, ephemeral-storage, then scalars by name.

use super::node::NodeInfo;
use super::pod::PodFilterInput;
use super::reason::FilterReason;
use super::resources::{Insufficient, ResourceName, ResourceTotals};

/// Fails with every resource the node lacks for the pod.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    let missing = insufficient_resources(pod.request(), node);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(FilterReason::InsufficientResources(missing))
    }
}

/// The resources `node` lacks for a pod requesting `request`; empty when it fits.
/// Allocates only when something is missing.
pub fn insufficient_resources(request: &ResourceTotals, node: &NodeInfo) -> Vec<Insufficient> {
    let mut missing = Vec::new();
    let allocatable = node.allocatable();
    let pods = i64::try_from(node.pod_count()).unwrap_or(i64::MAX);
    if pods.saturating_add(1) > allocatable.pods {
        missing.push(Insufficient {
            resource: ResourceName::Pods,
            requested: 1,
            used: pods,
            capacity: allocatable.pods,
        });
    }
    if request.is_zero() {
        return missing;
    }

    let used = node.requested();
    let free = &allocatable.resources;
    let mut check = |resource: ResourceName, requested: i64, used: i64, capacity: i64| {
        if requested > 0 && requested > capacity.saturating_sub(used) {
            missing.push(Insufficient {
                resource,
                requested,
                used,
                capacity,
            });
        }
    };
    check(
        ResourceName::Cpu,
        request.milli_cpu,
        used.milli_cpu,
        free.milli_cpu,
    );
    check(
        ResourceName::Memory,
        request.memory,
        used.memory,
        free.memory,
    );
    check(
        ResourceName::EphemeralStorage,
        request.ephemeral_storage,
        used.ephemeral_storage,
        free.ephemeral_storage,
    );
    for (name, id, amount) in request.scalar_ids() {
        let (used, capacity) = (used.scalar_of(id, name), free.scalar_of(id, name));
        if amount > 0 && amount > capacity.saturating_sub(used) {
            check(ResourceName::Scalar(name.clone()), amount, used, capacity);
        }
    }
    missing
}
