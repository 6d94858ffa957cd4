//! Whether the kubelet will give a pod's CPUs the zones its DRA devices were chosen
//! for, when pods bound to the node are not in its NodeResourceTopology yet.
//!
//! A decision reads the node's view, which holds back every pod in flight on each zone
//! the kubelet could have given it: at most what is free. For the NUMA fit that is
//! safe (a pod that fits the view fits the node); for DRA alignment it is not. Under
//! `single-numa-node` the kubelet takes the lowest zone that holds the pod, so when a
//! pod in flight is held back on zone 0 as well as on zone 1 (where it went), the
//! view can show zone 0 full while the kubelet still finds room there: the decision
//! takes devices on zone 1 and the kubelet puts the CPUs on zone 0.
//!
//! So before a pod whose devices must line up (`draAlignment: Required`) is bound, the
//! NUMA fit is run again on the view and on an upper bound of what is free (the NRT
//! with only the pods in flight whose zone is known kept on it, and what departed,
//! terminating and finished pods hold given back,
//! [`crate::cache::TopologyCache::zone_bounds`]). The kubelet's free amounts lie
//! between the two: when both fits give the zones of the devices, so does the
//! kubelet; otherwise the pod waits until the node's topology shows the pods in flight
//! (a retry with back-off), rather than being bound with devices that may end up
//! across the interconnect. Running pods that may finish on their own (`restartPolicy`
//! other than `Always`) are taken to keep what they hold: waiting for them could take
//! as long as a batch job runs, and one finishing in the instant between the decision
//! and the kubelet's admission is the one case left where the zones may differ.

use super::list;
use crate::cycle::numa_fit;
use crate::dra::Zones;
use crate::filter::NodeInfo;
use crate::numa::{NodeTopology, PodRequest};

/// Why the kubelet may put `request`'s CPUs elsewhere than `devices` on `node`, whose
/// free amounts lie between `view` and `upper`; `None` when it will put them there.
pub fn unsettled(
    view: &NodeTopology,
    upper: &NodeTopology,
    request: &PodRequest,
    node: &NodeInfo,
    devices: &Zones,
) -> Option<String> {
    let zones = |topology| {
        numa_fit(topology, request, node)
            .ok()
            .and_then(|p| p.zones)
            .map(|z| z.iter().collect::<Zones>())
    };
    let (low, high) = (zones(view), zones(upper));
    if low.as_ref() == Some(devices) && high.as_ref() == Some(devices) {
        return None;
    }
    let shown = |z: Option<Zones>| z.map_or_else(|| "none".to_owned(), |z| list(&z));
    Some(format!(
        "the kubelet may put the pod's CPUs on NUMA zone(s) {} of node {} or on {} while pods bound to it are not in its NodeResourceTopology yet, and its DRA devices would be on {} (draAlignment: Required): retried once the node's topology shows them",
        shown(high),
        node.name(),
        shown(low),
        list(devices),
    ))
}
