//! The referee's request and result types, as its JSON-lines protocol spells them
//! (`nodesim/referee/README.md`). Go writes nil slices and maps as `null`; every such
//! field reads as empty here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Taint;
use serde::{Deserialize, Deserializer, Serialize};

/// A `null` from Go reads as the empty value.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A simulated machine: NUMA zones and devices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// NUMA nodes; ids may be sparse.
    pub zones: Vec<Zone>,
    /// Extended resource name → its devices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, Vec<Device>>,
}

/// One NUMA node of a [`Machine`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zone {
    /// NUMA id.
    pub id: u32,
    /// MemTotal in bytes, hugepages included.
    pub memory: u64,
    /// Hugepage size (`2Mi`, `1Gi`) → number of pages.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hugepages: BTreeMap<String, u64>,
    /// Physical cores with their logical CPUs (SMT siblings).
    #[serde(default)]
    pub cores: Vec<Core>,
    /// This zone's row of the distance matrix, one entry per zone in id order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distances: Vec<u32>,
}

/// A physical core.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    /// Socket id.
    pub socket: u32,
    /// Logical CPU ids of its threads.
    pub cpus: Vec<u32>,
}

/// A device of an extended resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Device id.
    pub id: String,
    /// NUMA zone; `None`: a device without topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<u32>,
}

/// How a node's devices are served to its device manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DevicePlugins {
    /// Plugin objects handed to the device manager directly (cheap; the default).
    #[default]
    InProcess,
    /// The kubelet's stub plugin over the registration socket (a few nodes only).
    Stub,
}

/// The `addNode` request.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddNode {
    /// Node name.
    pub node: String,
    /// Serve the podresources API on `<dir>/kubelet.sock` when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_resources_dir: Option<PathBuf>,
    /// Node labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Device plugin mode.
    pub device_plugins: DevicePlugins,
    /// The hardware.
    pub machine: Machine,
    /// A `KubeletConfiguration` (v1beta1) as JSON; absent fields take the kubelet's defaults.
    pub kubelet: serde_json::Value,
}

/// What the kubelet would publish in the Node status (`addNode`'s result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Node name.
    pub node: String,
    /// The podresources socket, when one is served.
    #[serde(default)]
    pub pod_resources_socket: Option<PathBuf>,
    /// Resource → quantity.
    #[serde(default, deserialize_with = "nullable")]
    pub capacity: BTreeMap<String, String>,
    /// Resource → quantity.
    #[serde(default, deserialize_with = "nullable")]
    pub allocatable: BTreeMap<String, String>,
    /// What the reservations took (cpu, memory).
    #[serde(default, deserialize_with = "nullable")]
    pub reserved: BTreeMap<String, String>,
}

/// The kubelet's verdict on a pod (`admit`'s result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// Whether the kubelet admits it.
    pub admit: bool,
    /// `TopologyAffinityError`, `UnexpectedAdmissionError`, `OutOfcpu`, ... when refused.
    #[serde(default)]
    pub reason: String,
    /// The kubelet's message when refused.
    #[serde(default)]
    pub message: String,
    /// Init containers, then app containers, with what they got, when admitted.
    #[serde(default, deserialize_with = "nullable")]
    pub containers: Vec<ContainerAllocation>,
}

/// What one container got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerAllocation {
    /// Container name.
    pub name: String,
    /// `init`, `sidecar` or `app`.
    pub kind: String,
    /// The Topology Manager's stored hint; `None` under policy none.
    #[serde(default)]
    pub affinity: Option<Affinity>,
    /// Exclusive CPUs.
    #[serde(default, deserialize_with = "nullable")]
    pub cpus: Vec<u32>,
    /// Memory manager blocks.
    #[serde(default, deserialize_with = "nullable")]
    pub memory: Vec<MemoryBlock>,
    /// Devices.
    #[serde(default, deserialize_with = "nullable")]
    pub devices: Vec<DeviceAllocation>,
}

/// A Topology Manager hint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    /// The zones; `None` means any.
    #[serde(default)]
    pub numa_nodes: Option<Vec<u32>>,
    /// Whether the hint is preferred.
    pub preferred: bool,
}

/// A memory manager block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryBlock {
    /// `memory` or `hugepages-<size>`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Bytes.
    pub size: u64,
    /// Zones the block is pinned to.
    #[serde(default, deserialize_with = "nullable")]
    pub numa_nodes: Vec<u32>,
}

/// Devices of one resource given to a container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAllocation {
    /// Resource name.
    pub resource: String,
    /// Device ids.
    #[serde(default, deserialize_with = "nullable")]
    pub ids: Vec<String>,
}

/// The managers' own state: the node's true free resources (`state`'s result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NodeState {
    /// Per NUMA zone.
    #[serde(default, deserialize_with = "nullable")]
    pub zones: Vec<ZoneState>,
    /// Resource → every device.
    #[serde(default, deserialize_with = "nullable")]
    pub devices: BTreeMap<String, Vec<DeviceState>>,
    /// Active pod uids.
    #[serde(default, deserialize_with = "nullable")]
    pub pods: Vec<String>,
}

/// One zone's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ZoneState {
    /// NUMA id.
    pub id: u32,
    /// CPUs the CPU manager may hand out exclusively.
    #[serde(rename = "allocatableCPUs", default, deserialize_with = "nullable")]
    pub allocatable_cpus: Vec<u32>,
    /// Those of them still free.
    #[serde(rename = "freeCPUs", default, deserialize_with = "nullable")]
    pub free_cpus: Vec<u32>,
    /// Memory type → the memory manager's table.
    #[serde(default, deserialize_with = "nullable")]
    pub memory: BTreeMap<String, MemoryState>,
    /// Zones grouped with this one by multi-zone allocations.
    #[serde(default, deserialize_with = "nullable")]
    pub cells: Vec<u32>,
    /// The memory manager's count of allocations here.
    #[serde(default)]
    pub assignments: u32,
}

/// The memory manager's table for one memory type on one zone (bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryState {
    /// Total.
    pub total: u64,
    /// Reserved for the system.
    pub system_reserved: u64,
    /// Allocatable to pods.
    pub allocatable: u64,
    /// Held by pods.
    pub reserved: u64,
    /// Still free.
    pub free: u64,
}

/// One device's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceState {
    /// Device id.
    pub id: String,
    /// Its NUMA zones.
    #[serde(default, deserialize_with = "nullable")]
    pub numa_nodes: Vec<u32>,
    /// Whether no pod holds it.
    pub free: bool,
}
