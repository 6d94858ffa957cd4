//! One simulated node: its admission state and the podresources API its kubelet serves.
//!
//! Every admission or release republishes what the fake kubelet answers, as the kubelet
//! would report it:
//!
//! - `GetAllocatableResources`: the allocatable CPU ids (policy `static`; none with
//!   `none`), one memory block per zone and memory type (policy `Static`; none with
//!   `None`), one entry per device with its NUMA node;
//! - `List`: every admitted pod with its app containers and sidecars (init containers
//!   that ran to completion are not reported): exclusive CPU ids only, memory blocks with
//!   the NUMA nodes they are pinned to, devices with their NUMA node.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::kubelet_server::{FakeKubelet, FakeKubeletError, FakeKubeletHandle};
use tas_podresources::v1;

use crate::admit::{Admission, ContainerAllocation, NodeState};
use crate::machine::{CpuManagerPolicy, KubeletSettings, Machine, MemoryManagerPolicy};
use crate::mask::NumaMask;
use crate::request::{ContainerKind, PodKey, PodRequest};

/// A simulated node: admission state plus its fake kubelet.
#[derive(Debug)]
pub struct SimNode {
    name: String,
    state: Mutex<NodeState>,
    kubelet: FakeKubelet,
}

impl SimNode {
    /// A node with nothing admitted; its kubelet already answers
    /// `GetAllocatableResources`.
    pub fn new(name: impl Into<String>, machine: &Machine, settings: KubeletSettings) -> Self {
        let state = NodeState::new(machine, settings);
        let kubelet = FakeKubelet::new();
        kubelet.set_allocatable(allocatable_resources(&state));
        Self {
            name: name.into(),
            state: Mutex::new(state),
            kubelet,
        }
    }

    /// The node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fake kubelet (what its podresources API answers).
    pub fn kubelet(&self) -> &FakeKubelet {
        &self.kubelet
    }

    /// Serves the podresources API on a unix socket at `path`.
    pub fn serve(&self, path: impl Into<PathBuf>) -> Result<FakeKubeletHandle, FakeKubeletError> {
        self.kubelet.serve(path)
    }

    /// Admits or rejects `pod`; on admission its allocations show in `List`.
    pub fn admit(&self, pod: &PodRequest) -> Admission {
        let mut state = self.state();
        let admission = state.admit(pod);
        if admission == Admission::Admitted {
            self.kubelet.set_pods(pod_resources(&state));
        }
        admission
    }

    /// Releases `pod`'s resources; returns whether it was admitted.
    pub fn release(&self, pod: &PodKey) -> bool {
        let mut state = self.state();
        let released = state.release(pod);
        if released {
            self.kubelet.set_pods(pod_resources(&state));
        }
        released
    }

    /// Whether `pod` is admitted here.
    pub fn is_admitted(&self, pod: &PodKey) -> bool {
        self.state().is_admitted(pod)
    }

    /// Keys of the admitted pods.
    pub fn admitted(&self) -> Vec<PodKey> {
        self.state().admitted().map(|p| p.key.clone()).collect()
    }

    /// A copy of the admission state.
    pub fn snapshot(&self) -> NodeState {
        self.state().clone()
    }

    fn state(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn topology(mask: NumaMask) -> Option<v1::TopologyInfo> {
    Some(v1::TopologyInfo {
        nodes: mask
            .ids()
            .map(|id| v1::NumaNode { id: i64::from(id) })
            .collect(),
    })
}

fn device_entry(resource: &str, id: &str, zone: Option<u32>) -> v1::ContainerDevices {
    v1::ContainerDevices {
        resource_name: resource.to_string(),
        device_ids: vec![id.to_string()],
        topology: zone.and_then(|z| topology(NumaMask::of([z]))),
    }
}

/// The `GetAllocatableResources` answer for `state`'s node.
pub fn allocatable_resources(state: &NodeState) -> v1::AllocatableResourcesResponse {
    let machine = state.machine();
    let settings = state.settings();
    let cpu_ids = match settings.cpu_manager_policy {
        CpuManagerPolicy::None => Vec::new(),
        CpuManagerPolicy::Static => machine
            .allocatable_cpus()
            .into_iter()
            .map(i64::from)
            .collect(),
    };
    let mut memory = Vec::new();
    if settings.memory_manager_policy == MemoryManagerPolicy::Static {
        for zone in &machine.zones {
            for (memory_type, size) in machine.memory_of(zone) {
                if size > 0 {
                    memory.push(v1::ContainerMemory {
                        memory_type,
                        size,
                        topology: topology(NumaMask::of([zone.id])),
                    });
                }
            }
        }
    }
    let devices = machine
        .zones
        .iter()
        .flat_map(|zone| {
            zone.devices.iter().flat_map(move |(resource, ids)| {
                ids.iter()
                    .map(move |id| device_entry(resource, id, Some(zone.id)))
            })
        })
        .collect();
    v1::AllocatableResourcesResponse {
        devices,
        cpu_ids,
        memory,
    }
}

/// The `List` answer for `state`'s node.
pub fn pod_resources(state: &NodeState) -> Vec<v1::PodResources> {
    state
        .admitted()
        .map(|pod| {
            let containers = state
                .allocation(&pod.key)
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.kind != ContainerKind::Init)
                .map(|c| container_resources(state, c))
                .collect();
            v1::PodResources {
                name: pod.key.name.clone(),
                namespace: pod.key.namespace.clone(),
                containers,
            }
        })
        .collect()
}

fn container_resources(
    state: &NodeState,
    container: ContainerAllocation,
) -> v1::ContainerResources {
    let devices = container
        .devices
        .iter()
        .flat_map(|(resource, ids)| {
            ids.iter()
                .map(|id| device_entry(resource, id, state.devices().zone_of(resource, id)))
        })
        .collect();
    let memory = container
        .memory
        .into_iter()
        .map(|block| v1::ContainerMemory {
            memory_type: block.resource,
            size: block.size,
            topology: topology(block.affinity),
        })
        .collect();
    v1::ContainerResources {
        name: container.name,
        devices,
        cpu_ids: container.cpus.into_iter().map(i64::from).collect(),
        memory,
        dynamic_resources: Vec::new(),
    }
}
