//! The hardware and kubelet settings of one simulated node.
//!
//! A [`Machine`] is what sysfs and the device plugins would show: NUMA zones with their
//! logical CPUs, memory, hugepage pools and devices. [`KubeletSettings`] are the parts of
//! the kubelet configuration that decide admission. Both come from a scenario
//! (see [`scenario`](crate::scenario)); the referee runs the kubelet's managers on them
//! ([`referee::convert`](crate::referee::convert)).

use std::collections::{BTreeMap, BTreeSet};

use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use crate::request::{CPU, MEMORY};

/// Most NUMA nodes a simulated node may have (the kubelet's `max-allowable-numa-nodes`
/// default).
pub const MAX_NUMA_NODES: u32 = 8;

/// The kubelet's CPU and memory manager policies, as the NRT attributes name them.
pub use tas_api::nrt::resource_managers::{CpuManagerPolicy, MemoryManagerPolicy};

/// The kubelet settings that shape admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeletSettings {
    /// `topologyManagerPolicy`.
    pub topology_manager_policy: TopologyManagerPolicy,
    /// `topologyManagerScope`.
    pub topology_manager_scope: TopologyManagerScope,
    /// `cpuManagerPolicy`.
    pub cpu_manager_policy: CpuManagerPolicy,
    /// `memoryManagerPolicy`.
    pub memory_manager_policy: MemoryManagerPolicy,
}

/// One NUMA zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// NUMA node id.
    pub id: u32,
    /// Logical CPU ids.
    pub cpus: BTreeSet<u32>,
    /// Regular memory the kubelet may hand out, in bytes (hugepages excluded).
    pub memory: u64,
    /// Hugepage pools: resource name (`hugepages-2Mi`) → bytes.
    pub hugepages: BTreeMap<String, u64>,
    /// Devices: resource name (`example.com/nic`) → device ids.
    pub devices: BTreeMap<String, Vec<String>>,
}

/// The hardware of a simulated node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Zones, ids `0..n` in order.
    pub zones: Vec<Zone>,
    /// `reservedSystemCPUs`: never exclusive, not allocatable.
    pub reserved_cpus: BTreeSet<u32>,
    /// How many pods the node takes.
    pub max_pods: u32,
}

impl Machine {
    /// Number of NUMA zones.
    pub fn zone_count(&self) -> u32 {
        self.zones.len() as u32
    }

    /// CPUs that may be handed out: all but the reserved ones.
    pub fn allocatable_cpus(&self) -> BTreeSet<u32> {
        self.zones
            .iter()
            .flat_map(|z| z.cpus.difference(&self.reserved_cpus).copied())
            .collect()
    }

    /// The node's allocatable resources as the kubelet reports them on the Node:
    /// `cpu` in millicores, bytes of `memory` and hugepages, device counts, `pods`.
    pub fn allocatable(&self) -> BTreeMap<String, u64> {
        let mut total = BTreeMap::from([
            (CPU.to_string(), self.allocatable_cpus().len() as u64 * 1000),
            ("pods".to_string(), u64::from(self.max_pods)),
        ]);
        for zone in &self.zones {
            *total.entry(MEMORY.to_string()).or_default() += zone.memory;
            for (name, bytes) in &zone.hugepages {
                *total.entry(name.clone()).or_default() += bytes;
            }
            for (name, ids) in &zone.devices {
                *total.entry(name.clone()).or_default() += ids.len() as u64;
            }
        }
        total
    }
}
