//! The two NRT views of a node the scheduler is judged on: what the updater publishes
//! from the referee's podresources server, and what the managers' true state says.

use std::collections::{BTreeMap, BTreeSet};

use tas_api::nrt::ZoneMemoryGroups;
use tas_api::nrt::cpu_layout::CpuLayout;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_nodesim::referee::{Machine, NodeState};
use tas_updater::accounting::{self, AccountingOptions, NodeResources, ResourceAmounts};
use tas_updater::kubelet_config::{CpuManagerPolicy, KubeletConfig};
use tas_updater::memory_cells::MemoryCells;
use tas_updater::nrt_object::{self, NodeRef, Observed};
use tas_updater::podresources::v1;
use tas_updater::sysfs::cpu_layout::layout_of_cores;
use tas_updater::sysfs::{Topology, Zone};

/// What the updater reads from sysfs, for the referee's machine.
pub fn topology(machine: &Machine) -> Topology {
    let ids: Vec<u32> = machine.zones.iter().map(|z| z.id).collect();
    Topology {
        zones: machine
            .zones
            .iter()
            .map(|z| Zone {
                id: z.id,
                cpus: z
                    .cores
                    .iter()
                    .flat_map(|c| c.cpus.iter().copied())
                    .collect(),
                memory_bytes: z.memory,
                hugepages: z
                    .hugepages
                    .iter()
                    .map(|(size, pages)| {
                        let bytes = if size == "1Gi" { 1 << 30 } else { 2 << 20 };
                        (format!("hugepages-{size}"), pages * bytes)
                    })
                    .collect(),
                distances: ids
                    .iter()
                    .copied()
                    .zip(z.distances.iter().copied())
                    .collect(),
            })
            .collect(),
    }
}

/// What the updater reads of the referee's machine's CPU layout from sysfs (threads
/// per core, each zone's socket).
pub fn cpu_layout(machine: &Machine) -> CpuLayout {
    layout_of_cores(
        machine
            .zones
            .iter()
            .flat_map(|z| z.cores.iter().map(move |c| (z.id, c.socket, c.cpus.len()))),
    )
}

/// The object the updater builds (its accounting and its object builder, with the
/// attributes it derives from the kubelet config and the CPU layout).
pub fn publish(
    node: &str,
    kubelet_version: &str,
    topology: &Topology,
    layout: &CpuLayout,
    kubelet: &KubeletConfig,
    resources: &NodeResources,
) -> NodeResourceTopology {
    let nrt = nrt_object::build(&Observed {
        node: &NodeRef {
            name: node.to_owned(),
            uid: String::new(),
        },
        topology,
        resources,
        topology_manager: kubelet.topology_manager_config(),
        resource_managers: &kubelet.resource_managers_config(),
        fingerprint: None,
    });
    let nrt = nrt_object::with_kubelet_version(nrt, Some(kubelet_version));
    nrt_object::with_cpu_layout(nrt, layout)
}

/// View 1: the updater's accounting of the podresources answers.
pub fn from_podresources(
    topology: &Topology,
    kubelet: &KubeletConfig,
    allocatable: &v1::AllocatableResourcesResponse,
    pods: &[v1::PodResources],
    shared_pool: Option<BTreeSet<u32>>,
    cells: &mut MemoryCells,
) -> NodeResources {
    let opts = AccountingOptions {
        shared_pool,
        ..options(kubelet)
    };
    let mut resources = accounting::compute(topology, allocatable, pods, &opts);
    resources.memory_groups = cells.observe(topology, pods);
    resources
}

/// The cpuset of a shared-pool container, as the updater reads it from its own
/// `/proc/self/status`: the CPU manager's default set, i.e. its free CPUs and the
/// reserved ones.
pub fn shared_pool(kubelet: &KubeletConfig, state: &NodeState) -> BTreeSet<u32> {
    let mut pool = kubelet.reserved_system_cpus.clone();
    pool.extend(state.zones.iter().flat_map(|z| z.free_cpus.iter().copied()));
    pool
}

fn options(kubelet: &KubeletConfig) -> AccountingOptions {
    AccountingOptions {
        reserved_cpus: kubelet.reserved_system_cpus.clone(),
        ..AccountingOptions::default()
    }
}

/// View 2: the updater's view of an empty node, with what is free replaced by the
/// managers' own state (free exclusive CPUs, the memory manager's free and allocatable
/// per zone, free devices) and the memory manager's groups its own (the `Cells` of each
/// zone holding memory, init containers' included).
pub fn from_state(
    topology: &Topology,
    kubelet: &KubeletConfig,
    allocatable: &v1::AllocatableResourcesResponse,
    machine: &Machine,
    state: &NodeState,
) -> NodeResources {
    let mut resources = accounting::compute(topology, allocatable, &[], &options(kubelet));
    let mut free_devices: BTreeMap<(u32, &str), u64> = BTreeMap::new();
    for (name, devices) in &state.devices {
        for d in devices.iter().filter(|d| d.free) {
            if let Some(&zone) = d.numa_nodes.iter().min() {
                *free_devices.entry((zone, name.as_str())).or_default() += 1;
            }
        }
    }
    resources.memory_groups = ZoneMemoryGroups(
        state
            .zones
            .iter()
            .filter(|z| z.assignments > 0)
            .map(|z| {
                let mut cells = z.cells.clone();
                cells.sort_unstable();
                (z.id, cells)
            })
            .collect(),
    );
    for zone in &mut resources.zones {
        let Some(truth) = state.zones.iter().find(|z| z.id == zone.id) else {
            continue;
        };
        for r in &mut zone.resources {
            if r.name == accounting::CPU {
                if kubelet.cpu_manager_policy == CpuManagerPolicy::Static {
                    set(
                        r,
                        truth.allocatable_cpus.len() as u64,
                        truth.free_cpus.len() as u64,
                    );
                }
            } else if let Some(m) = truth.memory.get(&r.name) {
                set(r, m.allocatable, m.free);
            } else if machine.devices.contains_key(&r.name) {
                let free = free_devices.get(&(zone.id, r.name.as_str())).copied();
                r.available = free.unwrap_or(0);
            }
        }
    }
    resources
}

fn set(r: &mut ResourceAmounts, allocatable: u64, free: u64) {
    r.allocatable = allocatable;
    r.available = free;
}
