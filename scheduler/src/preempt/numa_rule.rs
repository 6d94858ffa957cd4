//! Would the pod pass the node's NUMA fit once the victims are gone?
//!
//! The NodeResourceTopology only reports per-zone totals; it does not say which pod
//! holds which zone. So the view after an eviction is *estimated*, by this rule:
//!
//! - A victim the cache still reserves on the node (placed or observed, and not yet
//!   reflected by an NRT the cache accepted) is subtracted from the zones its
//!   reservation holds (every zone, or those the kubelet could give it); its deletion
//!   is modelled as giving it back to every zone: exact for every-zone reservations,
//!   optimistic for narrowed ones (zones it was not held on gain room they never lost).
//! - Every other victim's NUMA footprint is in the NRT, on some zone we do not know.
//!   We assume the footprints of all such victims come back to **one** zone, and try
//!   each zone in turn, never raising a zone above its allocatable (a zone cannot have
//!   held more than it has). The pod is judged to fit when some zone choice admits it.
//!
//! This is an optimistic guess: victims spread over several zones free less on each.
//! It never causes a wrong placement, because preemption only evicts and nominates: the
//! preemptor is bound later by an ordinary scheduling cycle, on the cache's view, which
//! shows the freed resources only once the victims are gone *and* the node agent has
//! published an NRT (fingerprint-checked for dirty nodes) that reflects it. A wrong
//! guess therefore costs a further preemption round (see [`super::nominated`]), never a
//! kubelet `TopologyAffinityError`.

use crate::cycle::{CycleSettings, PodInput, TopologyView, numa_fit};
use crate::filter::NodeInfo;
use crate::numa::Resources;
use crate::pod_meta::PodMeta;
use tas_api::tas::NodesWithoutTopology;

/// Whether `pod` passes the NUMA fit of `view` (the node's current cache view) once
/// `victims` are gone; `reserved` gives the cache's reservation of a victim on this
/// node. `node` is the node without the victims (for node-level resources).
pub fn fits_without<R>(
    pod: &PodInput,
    node: &NodeInfo,
    view: &TopologyView,
    victims: &[&PodMeta],
    reserved: R,
    s: &CycleSettings,
) -> bool
where
    R: Fn(&str) -> Option<Resources>,
{
    let topology = match view {
        TopologyView::Unpublished if crate::cycle::numa_sensitive(&pod.request) => return false,
        TopologyView::Missing | TopologyView::Unpublished => {
            return s.nodes_without_topology == NodesWithoutTopology::Schedule;
        }
        TopologyView::Invalid(_) => return false,
        TopologyView::Known(t) => t,
    };
    let mut base = (**topology).clone();
    let mut somewhere = Resources::default();
    for v in victims {
        match reserved(&v.uid) {
            Some(amounts) => base.unreserve_on_every_zone(&amounts),
            None => somewhere.add_all(&v.footprint),
        }
    }
    if numa_fit(&base, &pod.request, node).is_ok() {
        return true;
    }
    if somewhere.is_empty() {
        return false;
    }
    base.numa_ids().iter().any(|&zone| {
        let mut guess = base.clone();
        guess.release_on_zone(zone, &somewhere);
        numa_fit(&guess, &pod.request, node).is_ok()
    })
}
