//! Per-zone capacity, allocatable and available amounts for the NRT object.
//!
//! [`compute`] is a pure function of three observations: the NUMA [`Topology`] from
//! sysfs, the kubelet's `GetAllocatableResources` answer and its `List` of pods. It
//! builds one ledger entry per (zone, resource) holding capacity, allocatable and the
//! amount pods use exclusively, then reports `available = allocatable - used`, never
//! below 0 (an oversubscription is reported as a warning instead).
//!
//! - `cpu` (`cpu.rs`): capacity is the zone's CPU count from sysfs; allocatable the
//!   zone's CPUs in the allocatable `cpu_ids`, or, when that list is empty (CPU manager
//!   `none`), the zone's CPUs minus [`AccountingOptions::reserved_cpus`]. `List` reports
//!   only exclusive CPUs, so shared-pool pods change nothing. With the CPU manager's
//!   shared pool ([`AccountingOptions::shared_pool`]) the CPUs regular init containers
//!   keep are known too and counted as used.
//! - `memory`, `hugepages-<size>` (`memory.rs`): capacity from sysfs; allocatable the sum
//!   of allocatable blocks of that type pinned to exactly that zone, or the capacity when
//!   there are no allocatable blocks at all (memory manager `None`).
//! - device plugin resources (`devices.rs`): one unit per allocatable device, placed in
//!   the lowest NUMA zone of its topology; devices without topology belong to the node,
//!   not to a zone, and are returned in [`NodeResources::unattached_devices`].
//!
//! # Memory blocks spanning several zones
//!
//! A container pinned to several NUMA zones gets one block carrying the total size; the
//! API does not say how much of it each zone holds. This module charges it the way the
//! kubelet's memory manager reserves it: the zones of the block are filled in ascending
//! id order, each up to what it has left, and whatever does not fit anywhere is charged
//! to the lowest zone (which then saturates at 0 and is reported). Two details make the
//! result independent of the order `List` returns pods in, so the published object does
//! not churn:
//!
//! - single-zone blocks are charged first. The memory manager refuses a single-zone
//!   allocation on a zone that already belongs to a multi-zone group, so those blocks
//!   were in place before the group formed, exactly as charged here;
//! - blocks with the same memory type and zone set are summed and charged as one;
//!   filling lowest-first makes that equal to charging them one by one, in any order.
//!
//! An even split was the alternative, but it reports memory free on the lowest zone
//! that the kubelet has in fact handed out, and a scheduler would send pods there.
//!
//! The zone sets of the blocks also say how the memory manager grouped the zones
//! ([`NodeResources::memory_groups`], see `tas_api::nrt::memory_groups`): a block on
//! several zones makes them a group, a block on one zone marks it as holding
//! single-zone allocations. Regular init containers are not reported by `List`, so the
//! blocks they keep until their pod ends (on zones their app containers may not use)
//! are missing from both the amounts and the groups.
//!
//! Inputs that disagree with sysfs (a CPU id or NUMA id no zone has, a device in use
//! that is not allocatable) are skipped and listed in [`NodeResources::warnings`].

mod cpu;
mod devices;
mod memory;
#[cfg(test)]
pub(crate) mod tests;
mod warnings;

use std::collections::{BTreeMap, BTreeSet};

pub use warnings::{AccountingWarning, Owner};

use tas_api::nrt::ZoneMemoryGroups;

use crate::podresources::v1;
use crate::sysfs::Topology;

/// Resource name of logical CPUs.
pub const CPU: &str = "cpu";
/// Resource name of ordinary memory.
pub const MEMORY: &str = "memory";

/// Node facts that do not come from the kubelet's API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountingOptions {
    /// The kubelet's `reservedSystemCPUs`; subtracted from allocatable CPUs only when the
    /// kubelet reports no allocatable CPUs (CPU manager `none`).
    pub reserved_cpus: BTreeSet<u32>,
    /// The CPU manager's shared pool ([`crate::shared_pool`]), when it is known to
    /// reflect the pods `List` reports: allocatable CPUs outside it that no listed
    /// container holds are counted as kept by init containers
    /// ([`NodeResources::init_container_cpus`]).
    pub shared_pool: Option<BTreeSet<u32>>,
}

/// The amounts of every resource of a node, per NUMA zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeResources {
    /// One entry per zone of the topology, sorted by id.
    pub zones: Vec<ZoneResources>,
    /// Device plugin resources whose devices have no NUMA affinity, sorted by name.
    pub unattached_devices: Vec<ResourceAmounts>,
    /// Inputs that were skipped or amounts that had to be clamped.
    pub warnings: Vec<AccountingWarning>,
    /// The zones holding pinned memory and the memory manager's grouping of them
    /// (`memory.rs`), published as the zone attribute `memoryManagerGroup`.
    pub memory_groups: ZoneMemoryGroups,
    /// Per zone, the CPUs regular init containers keep, already left out of
    /// `available` (published as `initContainerCpus`, [`tas_api::nrt::init_cpus`]);
    /// `None` when not counted (no shared pool given, CPU manager `none`, or a pool
    /// that disagrees with `List`, see [`AccountingWarning::SharedPoolStale`]).
    pub init_container_cpus: Option<BTreeMap<u32, u64>>,
}

/// The resources of one NUMA zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneResources {
    /// The NUMA node id.
    pub id: u32,
    /// Its resources, sorted by name.
    pub resources: Vec<ResourceAmounts>,
}

/// The amounts of one resource: CPUs, bytes or devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAmounts {
    /// Resource name: `cpu`, `memory`, `hugepages-2Mi`, `example.com/gpu`.
    pub name: String,
    /// What the hardware has.
    pub capacity: u64,
    /// What the kubelet may hand out.
    pub allocatable: u64,
    /// What is left of `allocatable` after exclusive allocations.
    pub available: u64,
}

impl NodeResources {
    /// The resources of zone `id`, if it exists.
    pub fn zone(&self, id: u32) -> Option<&ZoneResources> {
        self.zones.iter().find(|zone| zone.id == id)
    }
}

impl ZoneResources {
    /// The amounts of resource `name` in this zone, if it has any.
    pub fn resource(&self, name: &str) -> Option<&ResourceAmounts> {
        self.resources.iter().find(|resource| resource.name == name)
    }
}

/// Computes per-zone amounts from sysfs and the kubelet's podresources answers.
pub fn compute(
    topology: &Topology,
    allocatable: &v1::AllocatableResourcesResponse,
    pods: &[v1::PodResources],
    opts: &AccountingOptions,
) -> NodeResources {
    let mut ledger = Ledger::new(topology);
    let mut warnings = Vec::new();
    let init_container_cpus = cpu::account(
        topology,
        &allocatable.cpu_ids,
        pods,
        &opts.reserved_cpus,
        opts.shared_pool.as_ref(),
        &mut ledger,
        &mut warnings,
    );
    let memory_groups = memory::account(
        topology,
        &allocatable.memory,
        pods,
        &mut ledger,
        &mut warnings,
    );
    let unattached = devices::account(
        topology,
        &allocatable.devices,
        pods,
        &mut ledger,
        &mut warnings,
    );
    let unattached_devices = unattached
        .into_iter()
        .map(|(name, amounts)| amounts.finish(name, None, &mut warnings))
        .collect();
    let zones = ledger
        .zones
        .into_iter()
        .map(|(id, resources)| ZoneResources {
            id,
            resources: resources
                .into_iter()
                .map(|(name, amounts)| amounts.finish(name, Some(id), &mut warnings))
                .collect(),
        })
        .collect();
    NodeResources {
        zones,
        unattached_devices,
        warnings,
        memory_groups,
        init_container_cpus,
    }
}

/// Whether a pod holds anything NUMA-pinned: exclusive CPUs, a memory block with NUMA
/// affinity, or a device with NUMA affinity. Only such pods change what a zone has
/// available, so the `with-exclusive-resources` fingerprint method covers only them.
/// An empty topology counts as none.
pub fn holds_exclusive_resources(pod: &v1::PodResources) -> bool {
    pod.containers.iter().any(|container| {
        !container.cpu_ids.is_empty()
            || container
                .memory
                .iter()
                .any(|block| block.size > 0 && has_numa_affinity(block.topology.as_ref()))
            || container.devices.iter().any(|devices| {
                !devices.device_ids.is_empty() && has_numa_affinity(devices.topology.as_ref())
            })
    })
}

fn has_numa_affinity(topology: Option<&v1::TopologyInfo>) -> bool {
    topology.is_some_and(|info| !info.nodes.is_empty())
}

/// The zones of `topology` named by a podresources `TopologyInfo`, sorted and without
/// duplicates. NUMA ids no zone has are reported in `warnings` and left out.
fn known_zones(
    topology: &Topology,
    info: Option<&v1::TopologyInfo>,
    owner: &Owner,
    warnings: &mut Vec<AccountingWarning>,
) -> Vec<u32> {
    let mut zones = BTreeSet::new();
    for node in info.map(|info| info.nodes.as_slice()).unwrap_or_default() {
        match u32::try_from(node.id)
            .ok()
            .filter(|&id| topology.zone(id).is_some())
        {
            Some(id) => {
                zones.insert(id);
            }
            None => warnings.push(AccountingWarning::UnknownNumaNode {
                numa_id: node.id,
                owner: owner.clone(),
            }),
        }
    }
    zones.into_iter().collect()
}

/// Every container of every pod, with who owns it for warnings.
fn containers(pods: &[v1::PodResources]) -> impl Iterator<Item = (Owner, &v1::ContainerResources)> {
    pods.iter().flat_map(|pod| {
        pod.containers
            .iter()
            .map(move |container| (Owner::container(pod, container), container))
    })
}

/// Running totals of one resource in one place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Amounts {
    capacity: u64,
    allocatable: u64,
    /// Held exclusively by containers; may exceed `allocatable` until [`Amounts::finish`].
    used: u64,
}

impl Amounts {
    /// The final amounts, clamping `available` at 0 and warning about inconsistencies.
    fn finish(
        self,
        name: String,
        zone: Option<u32>,
        warnings: &mut Vec<AccountingWarning>,
    ) -> ResourceAmounts {
        if self.allocatable > self.capacity {
            warnings.push(AccountingWarning::AllocatableAboveCapacity {
                zone,
                resource: name.clone(),
                capacity: self.capacity,
                allocatable: self.allocatable,
            });
        }
        if self.used > self.allocatable {
            warnings.push(AccountingWarning::Oversubscribed {
                zone,
                resource: name.clone(),
                allocatable: self.allocatable,
                used: self.used,
            });
        }
        ResourceAmounts {
            available: self.allocatable.saturating_sub(self.used),
            name,
            capacity: self.capacity,
            allocatable: self.allocatable,
        }
    }
}

/// Amounts per zone and resource name; maps keep both sorted.
#[derive(Debug, Default)]
struct Ledger {
    zones: BTreeMap<u32, BTreeMap<String, Amounts>>,
}

impl Ledger {
    /// A ledger with every zone of `topology` and no resources yet.
    fn new(topology: &Topology) -> Self {
        Self {
            zones: topology
                .zones
                .iter()
                .map(|zone| (zone.id, BTreeMap::new()))
                .collect(),
        }
    }

    /// The amounts of `resource` in `zone`, created at zero.
    fn entry(&mut self, zone: u32, resource: &str) -> &mut Amounts {
        self.zones
            .entry(zone)
            .or_default()
            .entry(resource.to_owned())
            .or_default()
    }
}
