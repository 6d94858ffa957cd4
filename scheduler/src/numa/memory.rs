//! The memory manager's own admission check under the Topology Manager policies that
//! never refuse a pod themselves (`none`, `best-effort`).
//!
//! With the memory manager `Static`, every container of a Guaranteed pod gets its memory
//! and hugepages pinned to NUMA zones even when the Topology Manager has no opinion: the
//! memory manager then takes its own best hint (the narrowest set of zones with enough
//! free, the lowest first) or extends the Topology Manager's hint to such a set, and
//! refuses the pod (`UnexpectedAdmissionError`: "no NUMA nodes with enough memory",
//! "failed to find NUMA nodes to extend the current topology hint", "preferred hint
//! violates NUMA node allocation") when there is none. This pass walks the containers
//! in admission order like the memory manager does, so one container's allocation
//! narrows the next one's choice. Regular init containers are not subtracted: app
//! containers reuse their memory.

use std::borrow::Cow;

use super::align::{MEMORY_GROUP, Reqs, allocate, narrowest};
use super::fit::{collect, container_unfit, not_reported};
use super::request::{ContainerKind, PodRequest};
use super::resources::Amount;
use super::topology::NodeTopology;
use super::unfit::{Unfit, UnfitReason};

/// `Err` when the memory manager would refuse `pod` on `node`; see the module docs.
pub(crate) fn check(node: &NodeTopology, pod: &PodRequest) -> Result<(), Unfit> {
    if !node.static_memory() || !pod.is_guaranteed() {
        return Ok(());
    }
    let nres = node.resource_count();
    let mut free = Cow::Borrowed(node.free());
    let mut reqs = Reqs::default();
    let containers = pod.containers();
    for (i, c) in containers.iter().enumerate() {
        let fail = |reason| container_unfit(node.policy(), c, reason);
        reqs.clear();
        collect(
            node,
            &c.resources,
            true,
            false,
            &|_| false,
            false,
            &mut reqs,
        )
        .map_err(|pos| fail(not_reported(&c.resources, pos)))?;
        let memory = reqs.only(MEMORY_GROUP);
        if memory.as_slice().is_empty() {
            continue;
        }
        let Some(mask) = narrowest(node, &free, memory.as_slice(), 0) else {
            let r = memory.as_slice()[0];
            let entry = &c.resources.entries()[r.pos as usize];
            let width = node.zone_count() as u32;
            let best_free = (0..node.zone_count())
                .filter(|&z| node.memory_untouched(&free, z) || width == 1)
                .map(|z| free[z * nres + r.res as usize])
                .max()
                .unwrap_or(0);
            return Err(fail(UnfitReason::Insufficient {
                resource: entry.name.clone(),
                need: Amount {
                    kind: entry.kind,
                    value: entry.amount,
                },
                best_free: Amount {
                    kind: entry.kind,
                    value: best_free,
                },
                width: 1,
            }));
        };
        if c.kind != ContainerKind::Init && i + 1 < containers.len() {
            allocate(free.to_mut(), nres, mask, memory.as_slice());
        }
    }
    Ok(())
}
