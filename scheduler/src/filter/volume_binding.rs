//! `VolumeBinding`, for bound claims: the node must match the required node affinity
//! (`spec.nodeAffinity.required`) of every PersistentVolume the pod uses — one term of
//! each, terms matched like a pod's required node affinity ([`super::node_selector`]);
//! a volume whose terms are all empty or unusable fits no node.
//!
//! Claims that are missing, being deleted or unbound never reach this filter:
//! [`super::volumes::prepare`] keeps their pod Pending first.

use super::node::NodeInfo;
use super::pod::PodFilterInput;
use super::reason::FilterReason;

/// The filter; see the module documentation.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    let fits = pod.volumes().volumes.iter().all(|v| {
        v.node_affinity
            .as_ref()
            .is_none_or(|terms| terms.iter().any(|t| t.matches(node.labels(), node.name())))
    });
    if fits {
        Ok(())
    } else {
        Err(FilterReason::VolumeNodeConflict)
    }
}
