//! Whole-node scenarios for [`compute`], helpers shared by the per-resource tests, and
//! the invariants every input must keep.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::sysfs::Zone;

pub(crate) const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// Zone 0: CPUs 0-3, 32 GiB, 4 GiB of 1Gi pages, 512 MiB of 2Mi pages.
/// Zone 1: CPUs 4-7, 16 GiB, 2 GiB of 1Gi pages, no 2Mi pages.
pub(super) fn two_zones() -> Topology {
    Topology {
        zones: vec![
            zone(
                0,
                0..=3,
                32 * GIB,
                &[("hugepages-1Gi", 4 * GIB), ("hugepages-2Mi", 512 * MIB)],
            ),
            zone(
                1,
                4..=7,
                16 * GIB,
                &[("hugepages-1Gi", 2 * GIB), ("hugepages-2Mi", 0)],
            ),
        ],
    }
}

pub(crate) fn zone(
    id: u32,
    cpus: std::ops::RangeInclusive<u32>,
    memory_bytes: u64,
    hugepages: &[(&str, u64)],
) -> Zone {
    Zone {
        id,
        cpus: cpus.collect(),
        memory_bytes,
        hugepages: hugepages
            .iter()
            .map(|&(name, bytes)| (name.to_owned(), bytes))
            .collect(),
        distances: BTreeMap::new(),
    }
}

pub(crate) fn pod(name: &str, containers: Vec<v1::ContainerResources>) -> v1::PodResources {
    v1::PodResources {
        name: name.into(),
        namespace: "default".into(),
        containers,
    }
}

pub(crate) fn container(name: &str) -> v1::ContainerResources {
    v1::ContainerResources {
        name: name.into(),
        ..Default::default()
    }
}

fn topology_info(numa_ids: &[i64]) -> v1::TopologyInfo {
    v1::TopologyInfo {
        nodes: numa_ids.iter().map(|&id| v1::NumaNode { id }).collect(),
    }
}

/// A memory block pinned to `numa_ids` (none: no topology at all).
pub(crate) fn block(memory_type: &str, size: u64, numa_ids: &[i64]) -> v1::ContainerMemory {
    v1::ContainerMemory {
        memory_type: memory_type.into(),
        size,
        topology: (!numa_ids.is_empty()).then(|| topology_info(numa_ids)),
    }
}

/// Devices of one resource; `numa_ids: None` has no topology, `Some(&[])` an empty one.
pub(super) fn devices(
    resource: &str,
    ids: &[&str],
    numa_ids: Option<&[i64]>,
) -> v1::ContainerDevices {
    v1::ContainerDevices {
        resource_name: resource.into(),
        device_ids: ids.iter().map(|&id| id.to_owned()).collect(),
        topology: numa_ids.map(topology_info),
    }
}

fn amounts(name: &str, capacity: u64, allocatable: u64, available: u64) -> ResourceAmounts {
    ResourceAmounts {
        name: name.into(),
        capacity,
        allocatable,
        available,
    }
}

/// A node with CPU manager `static`, memory manager `Static` and one GPU per zone.
fn static_node() -> v1::AllocatableResourcesResponse {
    v1::AllocatableResourcesResponse {
        cpu_ids: (1..8).filter(|&cpu| cpu != 4).collect(),
        memory: vec![
            block(MEMORY, 30 * GIB, &[0]),
            block(MEMORY, 15 * GIB, &[1]),
            block("hugepages-1Gi", 4 * GIB, &[0]),
            block("hugepages-1Gi", 2 * GIB, &[1]),
            block("hugepages-2Mi", 512 * MIB, &[0]),
        ],
        devices: vec![
            devices("example.com/gpu", &["gpu0"], Some(&[0])),
            devices("example.com/gpu", &["gpu1"], Some(&[1])),
        ],
    }
}

/// A Guaranteed pod pinned to zone 0: 2 CPUs, 2 GiB, one 1Gi page, 64 MiB of 2Mi pages,
/// the zone's GPU.
fn guaranteed_pod() -> v1::PodResources {
    pod(
        "guaranteed",
        vec![v1::ContainerResources {
            cpu_ids: vec![2, 3],
            memory: vec![
                block(MEMORY, 2 * GIB, &[0]),
                block("hugepages-1Gi", GIB, &[0]),
                block("hugepages-2Mi", 64 * MIB, &[0]),
            ],
            devices: vec![devices("example.com/gpu", &["gpu0"], Some(&[0]))],
            ..container("app")
        }],
    )
}

/// A Burstable pod: the kubelet lists its container, but with nothing exclusive.
fn burstable_pod() -> v1::PodResources {
    pod("burstable", vec![container("web"), container("sidecar")])
}

#[test]
fn guaranteed_pod_on_a_static_node() {
    let node = compute(
        &two_zones(),
        &static_node(),
        &[guaranteed_pod(), burstable_pod()],
        &AccountingOptions::default(),
    );
    let want = NodeResources {
        zones: vec![
            ZoneResources {
                id: 0,
                resources: vec![
                    amounts(CPU, 4, 3, 1),
                    amounts("example.com/gpu", 1, 1, 0),
                    amounts("hugepages-1Gi", 4 * GIB, 4 * GIB, 3 * GIB),
                    amounts("hugepages-2Mi", 512 * MIB, 512 * MIB, 448 * MIB),
                    amounts(MEMORY, 32 * GIB, 30 * GIB, 28 * GIB),
                ],
            },
            ZoneResources {
                id: 1,
                resources: vec![
                    amounts(CPU, 4, 3, 3),
                    amounts("example.com/gpu", 1, 1, 1),
                    amounts("hugepages-1Gi", 2 * GIB, 2 * GIB, 2 * GIB),
                    amounts("hugepages-2Mi", 0, 0, 0),
                    amounts(MEMORY, 16 * GIB, 15 * GIB, 15 * GIB),
                ],
            },
        ],
        unattached_devices: vec![],
        warnings: vec![],
        // The guaranteed pod's memory and hugepages are pinned to zone 0 alone.
        memory_groups: tas_api::nrt::ZoneMemoryGroups([(0, vec![0])].into()),
        init_container_cpus: None,
    };
    assert_eq!(node, want);
}

#[test]
fn burstable_pods_change_nothing() {
    let opts = AccountingOptions::default();
    for allocatable in [static_node(), v1::AllocatableResourcesResponse::default()] {
        let idle = compute(&two_zones(), &allocatable, &[], &opts);
        let busy = compute(&two_zones(), &allocatable, &[burstable_pod()], &opts);
        assert_eq!(busy, idle);
    }
    assert!(!holds_exclusive_resources(&burstable_pod()));
}

#[test]
fn nothing_managed_reports_the_whole_zone_minus_reserved_cpus() {
    // CPU manager `none`, memory manager `None`, no device plugins.
    let opts = AccountingOptions {
        reserved_cpus: BTreeSet::from([0, 4]),
        ..AccountingOptions::default()
    };
    let node = compute(
        &two_zones(),
        &v1::AllocatableResourcesResponse::default(),
        &[burstable_pod()],
        &opts,
    );
    let zone0 = node.zone(0).unwrap();
    assert_eq!(zone0.resource(CPU), Some(&amounts(CPU, 4, 3, 3)));
    assert_eq!(
        zone0.resource(MEMORY),
        Some(&amounts(MEMORY, 32 * GIB, 32 * GIB, 32 * GIB))
    );
    assert_eq!(
        zone0.resource("hugepages-2Mi"),
        Some(&amounts("hugepages-2Mi", 512 * MIB, 512 * MIB, 512 * MIB))
    );
    assert_eq!(node.warnings, []);
}

#[test]
fn sparse_numa_ids() {
    // Zones 0, 1, 4, 5; the kubelet also mentions NUMA node 2, which is not online.
    let topology = Topology {
        zones: vec![
            zone(0, 0..=1, 8 * GIB, &[]),
            zone(1, 2..=3, 8 * GIB, &[]),
            zone(4, 4..=5, 8 * GIB, &[]),
            zone(5, 6..=7, 0, &[]),
        ],
    };
    let allocatable = v1::AllocatableResourcesResponse {
        cpu_ids: (0..8).collect(),
        memory: vec![
            block(MEMORY, 8 * GIB, &[0]),
            block(MEMORY, 8 * GIB, &[1]),
            block(MEMORY, 8 * GIB, &[4]),
        ],
        devices: vec![devices("example.com/nic", &["vf0", "vf1"], Some(&[2, 5]))],
    };
    let pods = [pod(
        "p",
        vec![v1::ContainerResources {
            cpu_ids: vec![5, 6],
            memory: vec![block(MEMORY, 12 * GIB, &[4, 1])],
            devices: vec![devices("example.com/nic", &["vf1"], None)],
            ..container("c")
        }],
    )];
    let node = compute(
        &topology,
        &allocatable,
        &pods,
        &AccountingOptions::default(),
    );
    let ids: Vec<u32> = node.zones.iter().map(|zone| zone.id).collect();
    assert_eq!(ids, [0, 1, 4, 5]);
    let available =
        |id: u32, name: &str| node.zone(id).unwrap().resource(name).map(|r| r.available);
    assert_eq!(available(4, CPU), Some(1));
    assert_eq!(available(5, CPU), Some(1));
    // 12 GiB over zones 1 and 4: zone 1 (lower id) gives all 8, zone 4 the other 4.
    assert_eq!(available(1, MEMORY), Some(0));
    assert_eq!(available(4, MEMORY), Some(4 * GIB));
    assert_eq!(available(5, MEMORY), Some(0));
    // The NICs sit on nodes 2 and 5; 2 is unknown, so they count in zone 5.
    assert_eq!(available(5, "example.com/nic"), Some(1));
    assert_eq!(
        node.warnings,
        [AccountingWarning::UnknownNumaNode {
            numa_id: 2,
            owner: Owner::Allocatable
        }]
    );
}

#[test]
fn which_pods_hold_exclusive_resources() {
    let with = |resources: v1::ContainerResources| pod("p", vec![container("a"), resources]);
    let cases = [
        (guaranteed_pod(), true),
        (
            with(v1::ContainerResources {
                cpu_ids: vec![3],
                ..container("b")
            }),
            true,
        ),
        (
            with(v1::ContainerResources {
                memory: vec![block("hugepages-2Mi", 2 * MIB, &[1])],
                ..container("b")
            }),
            true,
        ),
        (
            with(v1::ContainerResources {
                devices: vec![devices("example.com/gpu", &["g"], Some(&[0]))],
                ..container("b")
            }),
            true,
        ),
        (burstable_pod(), false),
        (pod("empty", vec![]), false),
        (
            with(v1::ContainerResources {
                memory: vec![block(MEMORY, GIB, &[])],
                devices: vec![
                    devices("example.com/fpga", &["f"], None),
                    devices("example.com/fpga", &["f"], Some(&[])),
                    devices("example.com/gpu", &[], Some(&[0])),
                ],
                ..container("b")
            }),
            false,
        ),
    ];
    for (pod, want) in cases {
        assert_eq!(holds_exclusive_resources(&pod), want, "{pod:?}");
    }
}

/// Pods holding random CPUs (some outside every zone), memory blocks over random zone
/// sets (some unknown) and random GPUs (some not allocatable).
fn arbitrary_pods() -> impl Strategy<Value = Vec<v1::PodResources>> {
    let memory = (
        0..3usize,
        0..40 * GIB,
        prop::collection::vec(-1..3i64, 0..3),
    );
    let container = (
        prop::collection::vec(-1..10i64, 0..4),
        prop::collection::vec(memory, 0..3),
        prop::collection::vec(0..4usize, 0..3),
    )
        .prop_map(|(cpu_ids, memory, gpus)| v1::ContainerResources {
            cpu_ids,
            memory: memory
                .into_iter()
                .map(|(kind, size, zones)| {
                    let kind = [MEMORY, "hugepages-1Gi", "hugepages-2Mi"][kind];
                    block(kind, size, &zones)
                })
                .collect(),
            devices: gpus
                .into_iter()
                .map(|gpu| {
                    devices(
                        "example.com/gpu",
                        &[["gpu0", "gpu1", "gpu2", "gpu3"][gpu]],
                        None,
                    )
                })
                .collect(),
            ..container("c")
        });
    prop::collection::vec(prop::collection::vec(container, 1..3), 0..6).prop_map(|pods| {
        pods.into_iter()
            .enumerate()
            .map(|(i, containers)| pod(&format!("pod-{i}"), containers))
            .collect()
    })
}

proptest! {
    #[test]
    fn available_never_exceeds_allocatable_and_ignores_pod_order(
        pods in arbitrary_pods(),
        unmanaged in any::<bool>(),
    ) {
        let allocatable = if unmanaged {
            v1::AllocatableResourcesResponse::default()
        } else {
            static_node()
        };
        let opts = AccountingOptions {
            reserved_cpus: BTreeSet::from([0]),
            ..AccountingOptions::default()
        };
        let node = compute(&two_zones(), &allocatable, &pods, &opts);
        for resource in node.zones.iter().flat_map(|zone| &zone.resources) {
            prop_assert!(resource.available <= resource.allocatable, "{resource:?}");
        }
        let mut reversed = pods.clone();
        reversed.reverse();
        let other = compute(&two_zones(), &allocatable, &reversed, &opts);
        prop_assert_eq!(&other.zones, &node.zones);
        prop_assert_eq!(&other.unattached_devices, &node.unattached_devices);
        let ids: Vec<u32> = node.zones.iter().map(|zone| zone.id).collect();
        prop_assert_eq!(ids, [0, 1]);
    }
}
