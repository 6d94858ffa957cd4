//! `memory` and `hugepages-<size>` per zone, in bytes.
//!
//! Capacity comes from sysfs, allocatable from the kubelet's single-zone allocatable
//! blocks (or equals capacity under memory manager `None`), and container blocks are
//! charged as the [module documentation](super) describes: single-zone blocks first,
//! then each (type, zone set) group filled lowest zone first. The zone sets of all
//! blocks also give the memory manager's groups.

use std::collections::BTreeMap;

use tas_api::nrt::ZoneMemoryGroups;

use super::{AccountingWarning, Ledger, MEMORY, Owner, containers, known_zones};
use crate::podresources::v1;
use crate::sysfs::Topology;

/// Fills the memory and hugepages entries of every zone; returns the zones holding
/// pinned memory with their groups.
pub(super) fn account(
    topology: &Topology,
    allocatable_blocks: &[v1::ContainerMemory],
    pods: &[v1::PodResources],
    ledger: &mut Ledger,
    warnings: &mut Vec<AccountingWarning>,
) -> ZoneMemoryGroups {
    // Memory manager `None` reports no allocatable blocks and pins nothing: everything
    // the zone has is allocatable.
    let unmanaged = allocatable_blocks.is_empty();
    for zone in &topology.zones {
        let pools = std::iter::once((MEMORY, zone.memory_bytes)).chain(
            zone.hugepages
                .iter()
                .map(|(name, &bytes)| (name.as_str(), bytes)),
        );
        for (name, bytes) in pools {
            let entry = ledger.entry(zone.id, name);
            entry.capacity = bytes;
            if unmanaged {
                entry.allocatable = bytes;
            }
        }
    }

    for block in allocatable_blocks {
        match known_zones(
            topology,
            block.topology.as_ref(),
            &Owner::Allocatable,
            warnings,
        )
        .as_slice()
        {
            [zone] => {
                let entry = ledger.entry(*zone, &block.memory_type);
                entry.allocatable = entry.allocatable.saturating_add(block.size);
            }
            [] => warnings.push(AccountingWarning::MemoryWithoutZone {
                memory_type: block.memory_type.clone(),
                size: block.size,
                owner: Owner::Allocatable,
            }),
            zones => warnings.push(AccountingWarning::AllocatableMemorySpansZones {
                memory_type: block.memory_type.clone(),
                size: block.size,
                zones: zones.to_vec(),
            }),
        }
    }

    // Multi-zone blocks summed per (memory type, zones) so the order of `List` does not
    // matter; the map also fixes the order groups are charged in.
    let mut spanning: BTreeMap<(&str, Vec<u32>), u64> = BTreeMap::new();
    let mut zone_sets: Vec<Vec<u32>> = Vec::new();
    for (owner, container) in containers(pods) {
        for block in &container.memory {
            let zones = known_zones(topology, block.topology.as_ref(), &owner, warnings);
            zone_sets.push(zones.clone());
            match zones.as_slice() {
                [] => warnings.push(AccountingWarning::MemoryWithoutZone {
                    memory_type: block.memory_type.clone(),
                    size: block.size,
                    owner: owner.clone(),
                }),
                [zone] => {
                    let entry = ledger.entry(*zone, &block.memory_type);
                    entry.used = entry.used.saturating_add(block.size);
                }
                _ => {
                    let total = spanning
                        .entry((block.memory_type.as_str(), zones))
                        .or_default();
                    *total = total.saturating_add(block.size);
                }
            }
        }
    }
    for ((memory_type, zones), total) in spanning {
        charge_lowest_first(ledger, memory_type, &zones, total);
    }
    ZoneMemoryGroups::from_blocks(zone_sets.iter().map(Vec::as_slice))
}

/// Charges `size` bytes to `zones` (sorted, not empty) in ascending order, each up to
/// what it has left; what fits nowhere goes to the lowest zone, to be reported there.
fn charge_lowest_first(ledger: &mut Ledger, memory_type: &str, zones: &[u32], size: u64) {
    let mut left = size;
    for &zone in zones {
        let entry = ledger.entry(zone, memory_type);
        let taken = entry.allocatable.saturating_sub(entry.used).min(left);
        entry.used += taken;
        left -= taken;
    }
    if let Some(&lowest) = zones.first().filter(|_| left > 0) {
        let entry = ledger.entry(lowest, memory_type);
        entry.used = entry.used.saturating_add(left);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{GIB, block, container, pod, two_zones};
    use super::super::{AccountingOptions, NodeResources, compute};
    use super::*;

    fn compute_memory(
        allocatable: Vec<v1::ContainerMemory>,
        pods: &[v1::PodResources],
    ) -> NodeResources {
        let allocatable = v1::AllocatableResourcesResponse {
            memory: allocatable,
            ..Default::default()
        };
        compute(
            &two_zones(),
            &allocatable,
            pods,
            &AccountingOptions::default(),
        )
    }

    /// `(capacity, allocatable, available)` of `name` in `zone`.
    fn amounts(node: &NodeResources, zone: u32, name: &str) -> (u64, u64, u64) {
        let resource = node.zone(zone).unwrap().resource(name).unwrap();
        (resource.capacity, resource.allocatable, resource.available)
    }

    /// The allocatable blocks of a static memory manager on [`two_zones`]: 30 GiB of
    /// 32 (zone 0) and 14 of 16 (zone 1) for memory, all hugepages.
    fn static_allocatable() -> Vec<v1::ContainerMemory> {
        vec![
            block(MEMORY, 30 * GIB, &[0]),
            block(MEMORY, 14 * GIB, &[1]),
            block("hugepages-1Gi", 4 * GIB, &[0]),
            block("hugepages-1Gi", 2 * GIB, &[1]),
        ]
    }

    fn memory_pod(name: &str, blocks: Vec<v1::ContainerMemory>) -> v1::PodResources {
        pod(
            name,
            vec![v1::ContainerResources {
                memory: blocks,
                ..container("main")
            }],
        )
    }

    #[test]
    fn memory_manager_none_makes_capacity_allocatable() {
        let node = compute_memory(vec![], &[]);
        assert_eq!(amounts(&node, 0, MEMORY), (32 * GIB, 32 * GIB, 32 * GIB));
        assert_eq!(
            amounts(&node, 1, "hugepages-1Gi"),
            (2 * GIB, 2 * GIB, 2 * GIB)
        );
        assert_eq!(node.warnings, []);
    }

    #[test]
    fn single_zone_blocks_are_charged_to_their_zone() {
        let pods = [
            memory_pod(
                "a",
                vec![
                    block(MEMORY, 4 * GIB, &[0]),
                    block("hugepages-1Gi", 3 * GIB, &[0]),
                ],
            ),
            memory_pod("b", vec![block(MEMORY, GIB, &[1])]),
        ];
        let node = compute_memory(static_allocatable(), &pods);
        assert_eq!(amounts(&node, 0, MEMORY), (32 * GIB, 30 * GIB, 26 * GIB));
        assert_eq!(amounts(&node, 0, "hugepages-1Gi"), (4 * GIB, 4 * GIB, GIB));
        assert_eq!(amounts(&node, 1, MEMORY), (16 * GIB, 14 * GIB, 13 * GIB));
        assert_eq!(node.warnings, []);
    }

    #[test]
    fn spanning_blocks_fill_the_lowest_zone_first() {
        // 34 GiB across both zones after 10 GiB pinned to zone 0: zone 0 has 20 left and
        // takes them, zone 1 takes the other 14, all it has.
        let pods = [
            memory_pod("big", vec![block(MEMORY, 34 * GIB, &[1, 0])]),
            memory_pod("small", vec![block(MEMORY, 10 * GIB, &[0])]),
        ];
        let node = compute_memory(static_allocatable(), &pods);
        assert_eq!(amounts(&node, 0, MEMORY), (32 * GIB, 30 * GIB, 0));
        assert_eq!(amounts(&node, 1, MEMORY), (16 * GIB, 14 * GIB, 0));
        assert_eq!(node.warnings, []);

        let pods = [memory_pod("mid", vec![block(MEMORY, 31 * GIB, &[0, 1])])];
        let node = compute_memory(static_allocatable(), &pods);
        assert_eq!(amounts(&node, 0, MEMORY).2, 0);
        assert_eq!(amounts(&node, 1, MEMORY).2, 13 * GIB);
    }

    #[test]
    fn spanning_charge_does_not_depend_on_pod_order() {
        let mut pods = vec![
            memory_pod("x", vec![block(MEMORY, 20 * GIB, &[0, 1])]),
            memory_pod("y", vec![block(MEMORY, 5 * GIB, &[0])]),
            memory_pod("z", vec![block(MEMORY, 12 * GIB, &[0, 1])]),
        ];
        let forward = compute_memory(static_allocatable(), &pods);
        pods.reverse();
        assert_eq!(compute_memory(static_allocatable(), &pods), forward);
        assert_eq!(amounts(&forward, 0, MEMORY).2, 0);
        assert_eq!(amounts(&forward, 1, MEMORY).2, 7 * GIB);
    }

    #[test]
    fn block_zone_sets_give_the_memory_managers_groups() {
        let three = Topology {
            zones: (0..3)
                .map(|id| crate::sysfs::Zone {
                    id,
                    memory_bytes: 16 * GIB,
                    ..crate::sysfs::Zone::default()
                })
                .collect(),
        };
        let allocatable = v1::AllocatableResourcesResponse {
            memory: (0..3).map(|z| block(MEMORY, 14 * GIB, &[z])).collect(),
            ..Default::default()
        };
        let mut pods = vec![
            // A group on zones 1 and 2 whose memory all comes from zone 1.
            memory_pod("wide", vec![block(MEMORY, 10 * GIB, &[2, 1])]),
            memory_pod(
                "narrow",
                vec![block(MEMORY, GIB, &[0]), block("hugepages-1Gi", 0, &[0])],
            ),
        ];
        let groups = |pods: &[v1::PodResources]| {
            compute(&three, &allocatable, pods, &AccountingOptions::default()).memory_groups
        };
        let got = groups(&pods);
        assert_eq!(
            got.0,
            BTreeMap::from([(0, vec![0]), (1, vec![1, 2]), (2, vec![1, 2])])
        );
        // Zone 2 still looks untouched: only the group says it is taken.
        let node = compute(&three, &allocatable, &pods, &AccountingOptions::default());
        assert_eq!(amounts(&node, 2, MEMORY).2, 14 * GIB);
        pods.reverse();
        assert_eq!(groups(&pods), got);
        assert_eq!(groups(&[]).0, BTreeMap::new());
    }

    #[test]
    fn what_fits_nowhere_is_reported_on_the_lowest_zone() {
        let pods = [memory_pod("huge", vec![block(MEMORY, 50 * GIB, &[0, 1])])];
        let node = compute_memory(static_allocatable(), &pods);
        assert_eq!(amounts(&node, 0, MEMORY).2, 0);
        assert_eq!(amounts(&node, 1, MEMORY).2, 0);
        assert_eq!(
            node.warnings,
            [AccountingWarning::Oversubscribed {
                zone: Some(0),
                resource: MEMORY.into(),
                allocatable: 30 * GIB,
                used: 36 * GIB,
            }]
        );
    }

    #[test]
    fn blocks_without_a_known_zone_are_skipped_and_reported() {
        let pods = [memory_pod(
            "a",
            vec![
                block(MEMORY, GIB, &[]),
                block(MEMORY, GIB, &[7]),
                block(MEMORY, GIB, &[0, 7]),
            ],
        )];
        let allocatable = vec![
            block(MEMORY, 30 * GIB, &[0]),
            block(MEMORY, 8 * GIB, &[0, 1]),
        ];
        let node = compute_memory(allocatable, &pods);
        // Only the [0, 7] block counts, on zone 0.
        assert_eq!(amounts(&node, 0, MEMORY).2, 29 * GIB);
        assert_eq!(amounts(&node, 1, MEMORY), (16 * GIB, 0, 0));
        let kinds: Vec<String> = node.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(kinds.len(), 5, "{kinds:#?}");
        assert!(kinds[0].contains("spans zones [0, 1]"), "{kinds:#?}");
        assert!(kinds[1].contains("no known NUMA zone"), "{kinds:#?}");
        assert!(kinds[2].contains("NUMA node 7"), "{kinds:#?}");
        assert!(kinds[3].contains("no known NUMA zone"), "{kinds:#?}");
        assert!(kinds[4].contains("NUMA node 7"), "{kinds:#?}");
    }
}
