//! Device plugin resources per zone, counted in devices.
//!
//! Where a device sits is taken from the allocatable list only: a device with NUMA
//! affinity counts in the lowest known zone of its topology (a device attached to two
//! zones, e.g. a NIC on a bridge between sockets, would otherwise be counted twice and
//! the zone totals would exceed the node's), a device without affinity belongs to the
//! node. Containers' allocations are matched to it by resource name and device id, and a
//! device listed for several containers counts once.

use std::collections::BTreeMap;

use super::{AccountingWarning, Amounts, Ledger, Owner, containers, known_zones};
use crate::podresources::v1;
use crate::sysfs::Topology;

/// A device: (resource name, device id).
type DeviceKey<'a> = (&'a str, &'a str);

/// Adds device resources to the zones of `ledger` and returns the node-level amounts of
/// devices without NUMA affinity, by resource name.
pub(super) fn account(
    topology: &Topology,
    allocatable: &[v1::ContainerDevices],
    pods: &[v1::PodResources],
    ledger: &mut Ledger,
    warnings: &mut Vec<AccountingWarning>,
) -> BTreeMap<String, Amounts> {
    // Zone of every allocatable device; `None` for the node.
    let mut placement: BTreeMap<DeviceKey, Option<u32>> = BTreeMap::new();
    for devices in allocatable {
        let zone = known_zones(
            topology,
            devices.topology.as_ref(),
            &Owner::Allocatable,
            warnings,
        )
        .first()
        .copied();
        for id in &devices.device_ids {
            placement
                .entry((devices.resource_name.as_str(), id.as_str()))
                .or_insert(zone);
        }
    }

    let mut node_level: BTreeMap<String, Amounts> = BTreeMap::new();
    for (&(resource, _), &zone) in &placement {
        let entry = amounts(ledger, &mut node_level, resource, zone);
        entry.capacity += 1;
        entry.allocatable += 1;
    }

    let mut allocated: BTreeMap<DeviceKey, Owner> = BTreeMap::new();
    for (owner, container) in containers(pods) {
        for devices in &container.devices {
            for id in &devices.device_ids {
                allocated
                    .entry((devices.resource_name.as_str(), id.as_str()))
                    .or_insert_with(|| owner.clone());
            }
        }
    }
    for (key, owner) in allocated {
        match placement.get(&key) {
            Some(&zone) => amounts(ledger, &mut node_level, key.0, zone).used += 1,
            None => warnings.push(AccountingWarning::DeviceNotAllocatable {
                resource: key.0.to_owned(),
                device_id: key.1.to_owned(),
                owner,
            }),
        }
    }
    node_level
}

/// The amounts of `resource` in `zone`, or at node level for `None`.
fn amounts<'a>(
    ledger: &'a mut Ledger,
    node_level: &'a mut BTreeMap<String, Amounts>,
    resource: &str,
    zone: Option<u32>,
) -> &'a mut Amounts {
    match zone {
        Some(zone) => ledger.entry(zone, resource),
        None => node_level.entry(resource.to_owned()).or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{container, devices, pod, two_zones};
    use super::super::{AccountingOptions, NodeResources, ResourceAmounts, compute};
    use super::*;

    const GPU: &str = "example.com/gpu";
    const NIC: &str = "example.com/nic";

    fn compute_devices(
        allocatable: Vec<v1::ContainerDevices>,
        pods: &[v1::PodResources],
    ) -> NodeResources {
        let allocatable = v1::AllocatableResourcesResponse {
            devices: allocatable,
            ..Default::default()
        };
        compute(
            &two_zones(),
            &allocatable,
            pods,
            &AccountingOptions::default(),
        )
    }

    fn device_pod(name: &str, held: Vec<v1::ContainerDevices>) -> v1::PodResources {
        pod(
            name,
            vec![v1::ContainerResources {
                devices: held,
                ..container("main")
            }],
        )
    }

    fn amounts(name: &str, capacity: u64, available: u64) -> ResourceAmounts {
        ResourceAmounts {
            name: name.into(),
            capacity,
            allocatable: capacity,
            available,
        }
    }

    /// Zone resources other than cpu and memory.
    fn zone_devices(node: &NodeResources, zone: u32) -> Vec<ResourceAmounts> {
        node.zone(zone)
            .unwrap()
            .resources
            .iter()
            .filter(|resource| resource.name.contains('/'))
            .cloned()
            .collect()
    }

    #[test]
    fn devices_count_in_their_zone_and_allocations_reduce_available() {
        let allocatable = vec![
            devices(GPU, &["gpu0", "gpu1"], Some(&[0])),
            devices(GPU, &["gpu2"], Some(&[1])),
            devices(NIC, &["vf0", "vf1", "vf2"], Some(&[1])),
        ];
        let pods = [
            device_pod("a", vec![devices(GPU, &["gpu1"], Some(&[0]))]),
            // Topology on the allocation is not needed: placement comes from allocatable.
            device_pod("b", vec![devices(NIC, &["vf0", "vf2"], None)]),
        ];
        let node = compute_devices(allocatable, &pods);
        assert_eq!(zone_devices(&node, 0), [amounts(GPU, 2, 1)]);
        assert_eq!(
            zone_devices(&node, 1),
            [amounts(GPU, 1, 1), amounts(NIC, 3, 1)]
        );
        assert_eq!(node.unattached_devices, []);
        assert_eq!(node.warnings, []);
    }

    #[test]
    fn devices_without_topology_belong_to_the_node() {
        let allocatable = vec![
            devices(GPU, &["gpu0"], Some(&[0])),
            devices("example.com/fpga", &["f0", "f1"], None),
            devices("example.com/fpga", &["f2"], Some(&[])),
        ];
        let pods = [device_pod(
            "a",
            vec![devices("example.com/fpga", &["f1"], None)],
        )];
        let node = compute_devices(allocatable, &pods);
        assert_eq!(node.unattached_devices, [amounts("example.com/fpga", 3, 2)]);
        assert_eq!(zone_devices(&node, 0), [amounts(GPU, 1, 1)]);
        assert_eq!(zone_devices(&node, 1), []);
    }

    #[test]
    fn a_device_on_several_zones_counts_in_the_lowest() {
        let allocatable = vec![devices(NIC, &["vf0"], Some(&[1, 0]))];
        let node = compute_devices(allocatable, &[]);
        assert_eq!(zone_devices(&node, 0), [amounts(NIC, 1, 1)]);
        assert_eq!(zone_devices(&node, 1), []);
    }

    #[test]
    fn unknown_devices_and_zones_are_skipped_and_reported() {
        let allocatable = vec![
            devices(GPU, &["gpu0"], Some(&[0])),
            // NUMA node 3 is not online: the device falls back to the node.
            devices(GPU, &["gpu9"], Some(&[3])),
        ];
        let pods = [
            device_pod("a", vec![devices(GPU, &["gpu0", "ghost"], Some(&[0]))]),
            // The same device listed for a second container counts once.
            device_pod("b", vec![devices(GPU, &["gpu0"], Some(&[0]))]),
        ];
        let node = compute_devices(allocatable, &pods);
        assert_eq!(zone_devices(&node, 0), [amounts(GPU, 1, 0)]);
        assert_eq!(node.unattached_devices, [amounts(GPU, 1, 1)]);
        assert_eq!(
            node.warnings,
            [
                AccountingWarning::UnknownNumaNode {
                    numa_id: 3,
                    owner: Owner::Allocatable
                },
                AccountingWarning::DeviceNotAllocatable {
                    resource: GPU.into(),
                    device_id: "ghost".into(),
                    owner: Owner::container(&pods[0], &container("main")),
                },
            ]
        );
    }
}
