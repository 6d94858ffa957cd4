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
//! - Every other victim's NUMA footprint is in the NRT. When the object publishes the
//!   containers' NUMA placement (`topology.node.k8s.io/numaplacement-*`, written by
//!   resource-topology-exporter or TAS's agent) and it decodes against the pods on the
//!   node ([`crate::numa::pins`]), each pinned container's resources come back to its
//!   own zone. What remains is on some zone we do not know: we assume it all comes back
//!   to **one** zone, and try each zone in turn, never raising a zone above its
//!   allocatable (a zone cannot have held more than it has). The pod is judged to fit
//!   when some zone choice admits it.
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
use std::collections::HashMap;

use tas_api::nrt::numa_placement::ContainerRef;

use crate::numa::{NodeTopology, NumaSet, Resources, pins};
use crate::pod_meta::PodMeta;
use tas_api::tas::NodesWithoutTopology;

/// Whether `pod` passes the NUMA fit of `view` (the node's current cache view) once
/// `victims` are gone; `reserved` gives the cache's reservation of a victim on this
/// node. `node` is the node without the victims (for node-level resources). A
/// placement counts only when `accept` takes its zones (`None`: no zones to line up
/// with); the zone guesses of the module documentation are tried in turn until one is.
pub fn fits_without<R, A>(
    pod: &PodInput,
    node: &NodeInfo,
    view: &TopologyView,
    victims: &[&PodMeta],
    reserved: R,
    s: &CycleSettings,
    accept: A,
) -> bool
where
    R: Fn(&str) -> Option<Resources>,
    A: Fn(Option<NumaSet>) -> bool,
{
    let topology = match view {
        TopologyView::Unpublished if crate::cycle::numa_sensitive(&pod.request) => return false,
        TopologyView::Missing | TopologyView::Unpublished => {
            return s.nodes_without_topology == NodesWithoutTopology::Schedule && accept(None);
        }
        TopologyView::Invalid(_) => return false,
        TopologyView::Known(t) => t,
    };
    let mut base = (**topology).clone();
    let mut somewhere = Resources::default();
    // Decoded only when a victim has no reservation, and at most once: the decode
    // hashes every container on the node.
    let placed = std::cell::OnceCell::new();
    let decode = || {
        pins::zones_of(
            topology,
            node.pods()
                .map(|p| &*p.meta)
                .chain(victims.iter().copied())
                .map(|m| (m.namespace.as_str(), m.name.as_str(), m.pins.as_slice())),
        )
    };
    for v in victims {
        match reserved(&v.uid) {
            Some(amounts) => base.unreserve_on_every_zone(&amounts),
            None => match placed.get_or_init(decode) {
                Some(placed) => {
                    let rest = release_placed(&mut base, v, placed);
                    somewhere.add_all(&rest);
                }
                None => somewhere.add_all(&v.footprint),
            },
        }
    }
    let taken = |topology: &NodeTopology| {
        numa_fit(topology, &pod.request, node).is_ok_and(|placement| accept(placement.zones))
    };
    if taken(&base) {
        return true;
    }
    if somewhere.is_empty() {
        return false;
    }
    base.numa_ids().iter().any(|&zone| {
        let mut guess = base.clone();
        guess.release_on_zone(zone, &somewhere);
        taken(&guess)
    })
}

/// Gives `victim`'s placed containers' pinned resources back to their zones; returns
/// the rest of its footprint (what no placement locates).
fn release_placed(
    base: &mut NodeTopology,
    victim: &PodMeta,
    placed: &HashMap<ContainerRef, u32>,
) -> Resources {
    let mut located: Vec<(String, i64)> = Vec::new();
    let pinned: Vec<_> = victim.pins.iter().filter(|p| p.pinned_on(base)).collect();
    for pin in pinned {
        let id = ContainerRef::new(&victim.namespace, &victim.name, &pin.name);
        let Some(&zone) = placed.get(&id) else {
            continue;
        };
        let amounts = pin.pinned_amounts(base);
        base.release_on_zone(zone, &amounts);
        located.extend(amounts.iter().map(|(n, a)| (n.to_owned(), a)));
    }
    let mut rest: Vec<(&str, i64)> = victim.footprint.iter().collect();
    for (name, amount) in located {
        if let Some(r) = rest.iter_mut().find(|(n, _)| *n == name.as_str()) {
            r.1 = (r.1 - amount).max(0);
        }
    }
    Resources::from_amounts(rest)
}
