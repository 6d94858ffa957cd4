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

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::kubelet_server::{FakeKubelet, FakeKubeletError, FakeKubeletHandle};
use k8s_openapi::api::core::v1::Pod;
use tas_podresources::v1;

use crate::admit::{
    Admission, ContainerAllocation, NodeState, Rejection, UNEXPECTED_ADMISSION_ERROR,
};
use crate::machine::{CpuManagerPolicy, KubeletSettings, Machine, MemoryManagerPolicy};
use crate::mask::NumaMask;
use crate::referee::{self, AddNode, NodeStatus, Referee, RefereeError};
use crate::request::{ContainerKind, PodKey, PodRequest};

/// A simulated node: who judges its pods, and what its kubelet serves.
#[derive(Debug)]
pub struct SimNode {
    name: String,
    judge: Judge,
}

#[derive(Debug)]
enum Judge {
    /// The Rust model of the kubelet's managers, with a fake podresources server.
    Model {
        state: Mutex<NodeState>,
        kubelet: FakeKubelet,
    },
    /// The kubelet's own managers in the referee, which also serves podresources.
    Referee {
        referee: Arc<Referee>,
        /// The zone of every CPU and device, to report where a pod landed.
        zone_of: BTreeMap<String, u32>,
        /// Admitted pods → the zones their exclusive resources are on.
        pods: Mutex<BTreeMap<PodKey, BTreeSet<u32>>>,
        status: NodeStatus,
    },
}

impl SimNode {
    /// A node judged by the Rust model with nothing admitted; its fake kubelet already
    /// answers `GetAllocatableResources`.
    pub fn new(name: impl Into<String>, machine: &Machine, settings: KubeletSettings) -> Self {
        let state = NodeState::new(machine, settings);
        let kubelet = FakeKubelet::new();
        kubelet.set_allocatable(allocatable_resources(&state));
        Self {
            name: name.into(),
            judge: Judge::Model {
                state: Mutex::new(state),
                kubelet,
            },
        }
    }

    /// A node judged by the kubelet's own managers in `referee`, which serves its
    /// podresources API on `<pod_resources_dir>/kubelet.sock`. `labels` are the Node's
    /// (the kubelet checks a pod's node selector and affinity against them).
    pub async fn with_referee(
        referee: Arc<Referee>,
        name: impl Into<String>,
        machine: &Machine,
        settings: KubeletSettings,
        labels: BTreeMap<String, String>,
        pod_resources_dir: PathBuf,
    ) -> Result<Self, RefereeError> {
        let name = name.into();
        let status = referee
            .add_node(&AddNode {
                node: name.clone(),
                pod_resources_dir: Some(pod_resources_dir),
                labels,
                machine: referee::convert::machine(machine),
                kubelet: referee::convert::kubelet_config(machine, &settings),
                ..AddNode::default()
            })
            .await?;
        let mut zone_of = BTreeMap::new();
        for zone in &machine.zones {
            zone_of.extend(zone.cpus.iter().map(|cpu| (format!("cpu/{cpu}"), zone.id)));
            for ids in zone.devices.values() {
                zone_of.extend(ids.iter().map(|id| (format!("device/{id}"), zone.id)));
            }
        }
        Ok(Self {
            name,
            judge: Judge::Referee {
                referee,
                zone_of,
                pods: Mutex::default(),
                status,
            },
        })
    }

    /// The node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fake kubelet of a node judged by the model.
    pub fn kubelet(&self) -> Option<&FakeKubelet> {
        match &self.judge {
            Judge::Model { kubelet, .. } => Some(kubelet),
            Judge::Referee { .. } => None,
        }
    }

    /// What the referee's kubelet publishes in the Node status (referee nodes only).
    pub fn referee_status(&self) -> Option<&NodeStatus> {
        match &self.judge {
            Judge::Model { .. } => None,
            Judge::Referee { status, .. } => Some(status),
        }
    }

    /// Serves the model's podresources API on a unix socket at `path`; referee nodes
    /// are served by the referee (`None`).
    pub fn serve(
        &self,
        path: impl Into<PathBuf>,
    ) -> Result<Option<FakeKubeletHandle>, FakeKubeletError> {
        match &self.judge {
            Judge::Model { kubelet, .. } => kubelet.serve(path).map(Some),
            Judge::Referee { .. } => Ok(None),
        }
    }

    /// Admits or rejects `pod` (`request` is its parsed form, for the model).
    pub async fn admit(&self, pod: &Pod, request: &PodRequest) -> Admission {
        match &self.judge {
            Judge::Model { state, kubelet } => {
                let mut state = lock(state);
                let admission = state.admit(request);
                if admission == Admission::Admitted {
                    kubelet.set_pods(pod_resources(&state));
                }
                admission
            }
            Judge::Referee {
                referee,
                zone_of,
                pods,
                ..
            } => {
                match referee.admit(&self.name, pod).await {
                    Ok(verdict) if verdict.admit => {
                        let zones =
                            verdict
                                .containers
                                .iter()
                                .flat_map(|c| {
                                    let cpus = c.cpus.iter().map(|cpu| format!("cpu/{cpu}"));
                                    let devices = c.devices.iter().flat_map(|d| {
                                        d.ids.iter().map(|id| format!("device/{id}"))
                                    });
                                    cpus.chain(devices).collect::<Vec<_>>()
                                })
                                .filter_map(|key| zone_of.get(&key).copied())
                                .chain(verdict.containers.iter().flat_map(|c| {
                                    c.memory.iter().flat_map(|m| m.numa_nodes.clone())
                                }))
                                .collect();
                        lock(pods).insert(request.key.clone(), zones);
                        Admission::Admitted
                    }
                    Ok(verdict) => Admission::Rejected(Rejection {
                        reason: verdict.reason,
                        message: verdict.message,
                    }),
                    Err(error) => Admission::Rejected(Rejection {
                        reason: UNEXPECTED_ADMISSION_ERROR.into(),
                        message: format!("the referee failed: {error}"),
                    }),
                }
            }
        }
    }

    /// Releases `pod`'s resources; returns whether it was admitted.
    pub async fn release(&self, pod: &PodKey) -> bool {
        match &self.judge {
            Judge::Model { state, kubelet } => {
                let mut state = lock(state);
                let released = state.release(pod);
                if released {
                    kubelet.set_pods(pod_resources(&state));
                }
                released
            }
            Judge::Referee { referee, pods, .. } => {
                if lock(pods).remove(pod).is_none() {
                    return false;
                }
                if let Err(error) = referee.remove(&self.name, &pod.uid).await {
                    tracing::warn!(node = %self.name, pod = %pod.name, %error, "referee: remove failed");
                }
                true
            }
        }
    }

    /// Whether `pod` is admitted here.
    pub fn is_admitted(&self, pod: &PodKey) -> bool {
        match &self.judge {
            Judge::Model { state, .. } => lock(state).is_admitted(pod),
            Judge::Referee { pods, .. } => lock(pods).contains_key(pod),
        }
    }

    /// Keys of the admitted pods.
    pub fn admitted(&self) -> Vec<PodKey> {
        match &self.judge {
            Judge::Model { state, .. } => lock(state).admitted().map(|p| p.key.clone()).collect(),
            Judge::Referee { pods, .. } => lock(pods).keys().cloned().collect(),
        }
    }

    /// The zones holding `pod`'s exclusive CPUs, pinned memory and devices.
    pub fn pod_zones(&self, pod: &PodKey) -> BTreeSet<u32> {
        match &self.judge {
            Judge::Model { state, .. } => {
                let state = lock(state);
                let machine = state.machine();
                state
                    .allocation(pod)
                    .unwrap_or_default()
                    .iter()
                    .flat_map(|c| {
                        let cpus = c.cpus.iter().filter_map(|cpu| machine.zone_of_cpu(*cpu));
                        cpus.chain(c.memory.iter().flat_map(|m| m.affinity.ids()))
                            .collect::<Vec<_>>()
                    })
                    .collect()
            }
            Judge::Referee { pods, .. } => lock(pods).get(pod).cloned().unwrap_or_default(),
        }
    }

    /// A copy of the model's admission state (model nodes only).
    pub fn snapshot(&self) -> Option<NodeState> {
        match &self.judge {
            Judge::Model { state, .. } => Some(lock(state).clone()),
            Judge::Referee { .. } => None,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
