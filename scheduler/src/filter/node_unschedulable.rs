//! `NodeUnschedulable`: a cordoned node (`spec.unschedulable`) takes no new pods,
//! except pods that tolerate the taint `node.kubernetes.io/unschedulable:NoSchedule`
//! the node lifecycle controller puts on it (whether or not the taint is there yet).

use super::node::NodeInfo;
use super::pod::PodFilterInput;
use super::reason::FilterReason;
use super::taint_toleration::{NodeTaint, PodToleration, TaintEffect, tolerated};

/// The taint a cordoned node carries.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// Whether `tolerations` tolerate `node.kubernetes.io/unschedulable:NoSchedule`.
pub fn tolerates_unschedulable(tolerations: &[PodToleration]) -> bool {
    let taint = NodeTaint {
        key: UNSCHEDULABLE_TAINT_KEY.to_owned(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    tolerated(tolerations, &taint)
}

/// Fails on a cordoned node unless the pod tolerates the unschedulable taint.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    if node.is_unschedulable() && !pod.tolerates_unschedulable() {
        Err(FilterReason::Unschedulable)
    } else {
        Ok(())
    }
}
