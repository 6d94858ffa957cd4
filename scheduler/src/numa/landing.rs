//! [`landing_zones`]: every NUMA zone the kubelet could give a pod's aligned resources,
//! so a reservation can hold the pod back on those zones only instead of on every zone.
//!
//! The answer must never miss a zone the kubelet could use, or a later decision could
//! count on room the pod took (see the reserve cache's module documentation). So it is
//! computed against an *upper bound* of what the node has free (the caller's
//! `upper`: the latest accepted NRT plus everything that may have been released since,
//! never minus reservations), and it drops every constraint that only narrows the
//! kubelet's choice: the memory manager's grouping rules, the zones reusable
//! init-container CPUs and devices pin a hint to, the order of containers (each is
//! checked against the whole bound, as if it were the first), and the tie-break among
//! candidate masks (lowest, or closest). What stays is what makes the Topology Manager
//! refuse a mask:
//!
//! - `single-numa-node`: a zone where every aligned resource of the unit (the pod in
//!   `pod` scope, each container in `container` scope) fits;
//! - `restricted`: a mask of the unit's preferred width (the fewest zones whose totals
//!   hold each aligned resource; the width depends on totals, not on what is free)
//!   with enough of each aligned resource.
//!
//! A mask the kubelet picks holds the unit in the true free amounts, which are at most
//! the bound, so it is among these. The memory manager stays inside a preferred hint
//! (an extension would have to be as narrow and contain it), so memory lands there too.
//!
//! `None` (reserve on every zone) wherever that argument does not hold or the answer is
//! not small: policies `none` and `best-effort` (a non-preferred hint can be any mask),
//! pods that are not Guaranteed, units whose hint providers disagree on the width
//! (`restricted` refuses them, but memory the merge ignores could then spread wider),
//! `single-numa-node` units needing more than one zone, too many masks to enumerate,
//! and pods with nothing aligned (the set would be empty).
//!
//! ## The kubelet's tie-break
//!
//! Under `single-numa-node` the kubelet gives a pod the *lowest* zone that holds it.
//! When the scheduler's view `V` (pessimistic: at most what is free) holds the pod on
//! zone `v`, the truth holds it there too, so the kubelet's zone is at most `v`:
//! [`landing_zones_below`] keeps only those zones. That needs the view to be a lower
//! bound of the truth and the choice to be "lowest", so it is applied only to one unit
//! (`pod` scope, or one container with aligned resources and no init containers: the
//! zone of a later container depends on where the earlier ones went), without
//! `prefer-closest-numa-nodes`, on nodes publishing no multi-zone memory group (a zone
//! of such a group is not offered alone, which the view may not show), and only when
//! the caller says every pod on the node is accounted for (`trusted_view`).
//!
//! Resources the node does not align (CPUs of a CPU manager that is not `static`,
//! memory of a memory manager that is not `Static`) are not pinned to zones by the
//! kubelet, so it never refuses a pod over them on a zone: holding them back on the
//! returned zones only is as safe as holding back the aligned ones.

use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use super::NumaSet;
use super::align::{MAX_MASKS, Reqs, group_width};
use super::fit::collect;
use super::mask::{bits, count_masks, masks_of_width};
use super::request::{ContainerKind, PodRequest};
use super::topology::NodeTopology;

/// The NUMA zones the kubelet could give `pod`'s aligned resources on a node whose
/// free amounts are at most `upper`'s (see the module documentation); `None` when
/// that is every zone as far as this rule can tell.
pub fn landing_zones(upper: &NodeTopology, pod: &PodRequest) -> Option<NumaSet> {
    let single = match upper.policy() {
        TopologyManagerPolicy::SingleNumaNode => true,
        TopologyManagerPolicy::Restricted => false,
        TopologyManagerPolicy::None | TopologyManagerPolicy::BestEffort => return None,
    };
    if !pod.is_guaranteed() || upper.zone_count() > 64 {
        return None;
    }
    let mut union = 0u64;
    let mut reqs = Reqs::default();
    let mut unit = |resources, exclusive_cpu| -> Option<()> {
        reqs.clear();
        // Not strict: what no zone reports is not pinned to a zone.
        let _ = collect(
            upper,
            resources,
            true,
            exclusive_cpu,
            &|_| false,
            false,
            &mut reqs,
        );
        union |= unit_masks(upper, &reqs, single)?;
        Some(())
    };
    if upper.scope() == TopologyManagerScope::Pod {
        unit(pod.numa_request(), true)?;
    } else {
        for c in pod.containers() {
            unit(&c.resources, c.exclusive_cpu)?;
        }
    }
    (union != 0).then(|| upper.numa_set(union))
}

/// [`landing_zones`], narrowed by the kubelet's tie-break against `view` (see the
/// module documentation) when `trusted_view` says the view is at most what is free.
pub fn landing_zones_below(
    upper: &NodeTopology,
    view: &NodeTopology,
    pod: &PodRequest,
    trusted_view: bool,
) -> Option<NumaSet> {
    let zones = landing_zones(upper, pod)?;
    if !trusted_view || upper.policy() != TopologyManagerPolicy::SingleNumaNode {
        return Some(zones);
    }
    let Some(lowest) = lowest_holding(view, pod) else {
        return Some(zones);
    };
    let below = NumaSet::from_ids(zones.iter().filter(|&id| id <= lowest));
    Some(if below.is_empty() { zones } else { below })
}

/// The NUMA id of the lowest zone of `view` holding `pod`'s one aligned unit, when the
/// kubelet's choice is that zone (see the module documentation).
fn lowest_holding(view: &NodeTopology, pod: &PodRequest) -> Option<u32> {
    if view.prefer_closest() || view.zone_count() != view.numa_ids().len() {
        return None;
    }
    let n = view.zone_count();
    let free = view.free();
    if (0..n).any(|z| view.memory_state(free, z).0 != 1 << z) {
        return None;
    }
    let mut reqs = Reqs::default();
    if view.scope() == TopologyManagerScope::Pod {
        let _ = collect(
            view,
            pod.numa_request(),
            true,
            true,
            &|_| false,
            false,
            &mut reqs,
        );
    } else {
        let containers = pod.containers();
        if containers.iter().any(|c| c.kind == ContainerKind::Init) {
            return None;
        }
        for c in containers {
            let mut own = Reqs::default();
            let _ = collect(
                view,
                &c.resources,
                true,
                c.exclusive_cpu,
                &|_| false,
                false,
                &mut own,
            );
            if own.as_slice().is_empty() {
                continue;
            }
            if !reqs.as_slice().is_empty() {
                return None;
            }
            reqs = own;
        }
    }
    let nres = view.resource_count();
    let zone = (0..n).find(|&z| {
        !reqs.as_slice().is_empty()
            && reqs
                .as_slice()
                .iter()
                .all(|r| free[z * nres + r.res as usize] >= r.need)
    })?;
    Some(view.numa_ids()[zone])
}

/// The union of the masks one unit could be given; `Some(0)` when it aligns nothing.
fn unit_masks(node: &NodeTopology, reqs: &Reqs, single: bool) -> Option<u64> {
    let reqs = reqs.as_slice();
    if reqs.is_empty() {
        return Some(0);
    }
    let n = node.zone_count() as u32;
    let mut width = None;
    for r in reqs {
        let w = group_width(node, reqs, r.group, n).ok()??;
        if single && w != 1 || width.is_some_and(|common| common != w) {
            return None;
        }
        width = Some(w);
    }
    let width = width?;
    if count_masks(n, width) > MAX_MASKS {
        return None;
    }
    let nres = node.resource_count();
    let free = node.free();
    let holds = |mask: u64| {
        reqs.iter().all(|r| {
            let sum = bits(mask).fold(0i64, |acc, z| {
                acc.saturating_add(free[z as usize * nres + r.res as usize])
            });
            sum >= r.need
        })
    };
    Some(
        masks_of_width(n, width)
            .filter(|&m| holds(m))
            .fold(0, |acc, m| acc | m),
    )
}
