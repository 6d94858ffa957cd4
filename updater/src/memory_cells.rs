//! The memory manager's groups as the kubelet keeps them, from one `List` to the next.
//!
//! The memory manager `Static` keeps, per NUMA zone, the group (`Cells`) of the last
//! allocation that touched the zone, until the zone holds no allocation at all. A
//! snapshot of the blocks containers hold does not always say which group that is: a
//! single-zone allocation may land on a zone of a multi-zone group (under the Topology
//! Manager's `best-effort` or `none`, the memory manager checks the grouping rules
//! only for multi-zone allocations), and the zone keeps counting as single after that
//! container is gone, as long as the group's own blocks remain on it. The kubelet then
//! refuses to extend the group over that zone, while the blocks alone still show the
//! group.
//!
//! [`MemoryCells`] follows the containers from one `List` to the next and keeps, per
//! zone, the group of the newest allocation seen on it:
//! - a container seen for the first time sets the group of every zone its blocks touch
//!   (a single-zone block wins over a multi-zone one seen in the same `List`: the
//!   memory manager never extends a group over a zone holding single-zone allocations,
//!   so the single one came last);
//! - a zone no block touches any more is forgotten (the kubelet resets it then).
//!
//! On the first `List` every container is new, so the groups are those the blocks
//! give ([`ZoneMemoryGroups::from_blocks`]).
//!
//! An allocation that comes and goes between two `List`s is not seen; nor are regular
//! init containers', which podresources does not report.

use std::collections::{BTreeMap, BTreeSet};

use tas_api::nrt::ZoneMemoryGroups;

use crate::podresources::v1;
use crate::sysfs::Topology;

/// A container: namespace, pod name, container name.
type ContainerKey = (String, String, String);

/// Per zone, the group of the newest allocation seen on it. Owned by the agent's
/// publish loop; one per node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryCells {
    seen: BTreeSet<ContainerKey>,
    cells: BTreeMap<u32, Vec<u32>>,
}

impl MemoryCells {
    /// Takes the pods of one `List` and returns the groups of the zones holding pinned
    /// memory.
    pub fn observe(&mut self, topology: &Topology, pods: &[v1::PodResources]) -> ZoneMemoryGroups {
        let current = container_zone_sets(topology, pods);
        let touched: BTreeSet<u32> = current.values().flatten().flatten().copied().collect();
        self.cells.retain(|zone, _| touched.contains(zone));
        // Per zone, the groups of the allocations new since the last `List`.
        let mut newest: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for sets in current
            .iter()
            .filter(|(key, _)| !self.seen.contains(*key))
            .map(|(_, sets)| sets)
        {
            for set in sets {
                for &zone in set {
                    newest
                        .entry(zone)
                        .and_modify(|group| {
                            if newer_than(set, group) {
                                group.clone_from(set);
                            }
                        })
                        .or_insert_with(|| set.clone());
                }
            }
        }
        // Every zone touched now is touched by a new container or kept from before
        // (blocks of a container never change), so it has a group.
        self.cells.extend(newest);
        self.seen = current.into_keys().collect();
        ZoneMemoryGroups(self.cells.clone())
    }
}

/// Of two groups seen new on one zone in the same `List`, whether `candidate` is the one
/// the kubelet wrote last: a single zone beats a group; among groups, the lowest by ids,
/// as [`ZoneMemoryGroups::from_blocks`] picks.
fn newer_than(candidate: &[u32], current: &[u32]) -> bool {
    match (candidate.len() == 1, current.len() == 1) {
        (true, false) => true,
        (false, true) => false,
        _ => candidate < current,
    }
}

/// Every container holding pinned memory, with the zone sets of its blocks (sorted ids
/// of zones the topology has; blocks on none left out).
fn container_zone_sets(
    topology: &Topology,
    pods: &[v1::PodResources],
) -> BTreeMap<ContainerKey, Vec<Vec<u32>>> {
    let mut out = BTreeMap::new();
    for pod in pods {
        for container in &pod.containers {
            let sets: Vec<Vec<u32>> = container
                .memory
                .iter()
                .map(|block| {
                    let zones: BTreeSet<u32> = block
                        .topology
                        .iter()
                        .flat_map(|t| &t.nodes)
                        .filter_map(|n| u32::try_from(n.id).ok())
                        .filter(|&id| topology.zone(id).is_some())
                        .collect();
                    zones.into_iter().collect()
                })
                .filter(|zones: &Vec<u32>| !zones.is_empty())
                .collect();
            if !sets.is_empty() {
                let key = (
                    pod.namespace.clone(),
                    pod.name.clone(),
                    container.name.clone(),
                );
                out.insert(key, sets);
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "memory_cells_tests.rs"]
mod tests;
