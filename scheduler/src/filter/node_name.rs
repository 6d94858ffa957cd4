//! `NodeName`: a pod that names a node (`spec.nodeName`) fits only that node.

use super::node::NodeInfo;
use super::pod::PodFilterInput;
use super::reason::FilterReason;

/// Fails when the pod names another node.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    match pod.node_name() {
        Some(name) if name != node.name() => Err(FilterReason::NodeNameMismatch),
        _ => Ok(()),
    }
}
