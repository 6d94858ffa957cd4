//! [`TopologyCache::admission_commutes`]: whether a reserved pod's bind may leave
//! the writer ahead of the earlier binds to its node (the rule and why it holds are in
//! the writer's bind order, [`crate::writer`]'s `bind_order` module).

use tas_api::nrt::TopologyManagerPolicy;
use tas_api::tas::ForeignPodsDetection;

use super::TopologyCache;
use super::pod::numa_footprint;
use crate::numa::{NumaSet, PodRequest};

impl TopologyCache {
    /// Whether the kubelet of `node` admits pod `uid` (asking for `request`, just
    /// reserved there), and every other pod bound to the node in flight, alike
    /// whichever it admits first. Conservative: true only for a pod the kubelet pins
    /// nothing of to a NUMA zone, or for one whose reservation says it can land on one
    /// zone only, the node's lowest, under `single-numa-node`; false whenever the
    /// cache cannot tell (no reservation, no usable view).
    pub fn admission_commutes(&self, node: &str, uid: &str, request: &PodRequest) -> bool {
        if numa_footprint(request).is_empty() {
            return true;
        }
        // Without every pod on the node accounted for, the view is no lower bound of
        // what is free, and the argument does not hold.
        if self.config.foreign_pods == ForeignPodsDetection::None {
            return false;
        }
        let state = self.read();
        let Some(entry) = state.nodes.get(node) else {
            return false;
        };
        let Some(zones) = entry.reservation(uid).and_then(|r| r.zones) else {
            return false;
        };
        let Some(Ok(view)) = entry.view() else {
            return false;
        };
        if view.policy() != TopologyManagerPolicy::SingleNumaNode {
            return false;
        }
        view.numa_ids()
            .iter()
            .min()
            .is_some_and(|&lowest| zones == NumaSet::from_ids([lowest]))
    }
}
