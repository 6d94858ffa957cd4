//! What [`compute`](super::compute) skipped or clamped, for the caller to log.
//!
//! None of these stop the computation: the kubelet and sysfs are read at different
//! times and may briefly disagree (a CPU taken offline, a device plugin re-registering),
//! and publishing a slightly conservative object beats publishing none.

use std::fmt;

use crate::podresources::v1;

/// Where an input came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// The kubelet's `GetAllocatableResources` answer.
    Allocatable,
    /// A container in the kubelet's `List` answer.
    Container {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
    },
}

impl Owner {
    pub(super) fn container(pod: &v1::PodResources, container: &v1::ContainerResources) -> Self {
        Self::Container {
            namespace: pod.namespace.clone(),
            pod: pod.name.clone(),
            container: container.name.clone(),
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Allocatable => f.write_str("allocatable resources"),
            Self::Container {
                namespace,
                pod,
                container,
            } => write!(f, "container {namespace}/{pod}/{container}"),
        }
    }
}

/// An input skipped, or an amount clamped, while computing zone resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountingWarning {
    /// A CPU id that no zone holds; it was not counted.
    CpuOutsideZones {
        /// The CPU id as reported by the kubelet.
        cpu: i64,
        /// Who reported it.
        owner: Owner,
    },
    /// A NUMA id that sysfs does not list as online; the zones that do exist were used.
    UnknownNumaNode {
        /// The NUMA id as reported by the kubelet.
        numa_id: i64,
        /// Who reported it.
        owner: Owner,
    },
    /// A memory block with no NUMA affinity to a known zone; it was not counted.
    MemoryWithoutZone {
        /// `memory` or `hugepages-<size>`.
        memory_type: String,
        /// Bytes.
        size: u64,
        /// Who reported it.
        owner: Owner,
    },
    /// An allocatable memory block pinned to several zones; the kubelet reports one
    /// zone per allocatable block, so it was not counted.
    AllocatableMemorySpansZones {
        /// `memory` or `hugepages-<size>`.
        memory_type: String,
        /// Bytes.
        size: u64,
        /// The zones it names.
        zones: Vec<u32>,
    },
    /// A device a container holds that is not among the allocatable devices; it was
    /// not counted.
    DeviceNotAllocatable {
        /// Device plugin resource name.
        resource: String,
        /// Device id.
        device_id: String,
        /// Who holds it.
        owner: Owner,
    },
    /// Containers hold more than is allocatable; `available` was clamped to 0.
    Oversubscribed {
        /// The zone, or `None` for devices without NUMA affinity.
        zone: Option<u32>,
        /// Resource name.
        resource: String,
        /// What is allocatable.
        allocatable: u64,
        /// What containers hold.
        used: u64,
    },
    /// The shared pool holds CPUs `List` reports as exclusive: it is stale, or the
    /// agent's container does not run on it. Init containers' CPUs were not counted.
    SharedPoolStale {
        /// The CPUs in both, sorted.
        cpus: Vec<u32>,
    },
    /// The kubelet reports more allocatable than sysfs shows capacity.
    AllocatableAboveCapacity {
        /// The zone, or `None` for devices without NUMA affinity.
        zone: Option<u32>,
        /// Resource name.
        resource: String,
        /// Capacity from sysfs.
        capacity: u64,
        /// Allocatable from the kubelet.
        allocatable: u64,
    },
}

/// `zone 1` or `node` (for amounts that belong to no zone).
struct Place(Option<u32>);

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(id) => write!(f, "zone {id}"),
            None => f.write_str("node"),
        }
    }
}

impl fmt::Display for AccountingWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CpuOutsideZones { cpu, owner } => {
                write!(f, "CPU {cpu} from {owner} is in no NUMA zone; ignored")
            }
            Self::UnknownNumaNode { numa_id, owner } => {
                write!(f, "NUMA node {numa_id} from {owner} is not online; ignored")
            }
            Self::MemoryWithoutZone {
                memory_type,
                size,
                owner,
            } => write!(
                f,
                "{memory_type} block of {size} bytes from {owner} has no known NUMA zone; ignored"
            ),
            Self::AllocatableMemorySpansZones {
                memory_type,
                size,
                zones,
            } => write!(
                f,
                "allocatable {memory_type} block of {size} bytes spans zones {zones:?}; ignored"
            ),
            Self::DeviceNotAllocatable {
                resource,
                device_id,
                owner,
            } => write!(
                f,
                "{resource} device {device_id:?} held by {owner} is not allocatable; ignored"
            ),
            Self::Oversubscribed {
                zone,
                resource,
                allocatable,
                used,
            } => write!(
                f,
                "{resource} in {}: containers hold {used} of {allocatable} allocatable; \
                 available clamped to 0",
                Place(*zone)
            ),
            Self::SharedPoolStale { cpus } => write!(
                f,
                "the shared CPU pool holds CPUs {cpus:?} that containers hold exclusively \
                 (stale, or this container is not on the shared pool); CPUs kept by init \
                 containers not counted"
            ),
            Self::AllocatableAboveCapacity {
                zone,
                resource,
                capacity,
                allocatable,
            } => write!(
                f,
                "{resource} in {}: {allocatable} allocatable exceeds capacity {capacity}",
                Place(*zone)
            ),
        }
    }
}
