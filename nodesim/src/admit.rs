//! Pod admission on one simulated node: the kubelet's Topology Manager with its hint
//! providers, then the node's resource fit.
//!
//! [`NodeState::admit`] follows the kubelet:
//!
//! - scope `container`: init containers first, then app containers; for each, gather the
//!   device, CPU and memory managers' hints, merge them under the policy, reject the pod
//!   if the policy does not admit, else allocate that container before looking at the
//!   next one;
//! - scope `pod`: one merge over the pod's effective requests, then every container is
//!   allocated on the same hint;
//! - policy `none` gathers no hints and allocates every container on "any".
//!
//! A policy refusal is `TopologyAffinityError`; a manager that cannot allocate what it
//! was asked for is `UnexpectedAdmissionError`. Then, as the kubelet's resource-fit
//! check, the pod's effective requests plus those of the admitted pods must fit the
//! node's allocatable amounts (`OutOf<resource>`). A rejected pod holds nothing.

use std::collections::{BTreeMap, BTreeSet};

use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use crate::cpu_manager::CpuManager;
use crate::device_manager::DeviceManager;
use crate::machine::{KubeletSettings, Machine};
use crate::mask::NumaMask;
use crate::memory_manager::{MemoryBlock, MemoryManager};
use crate::request::{ContainerKind, ContainerRequest, PodKey, PodRequest};
use crate::topology_manager::{Decision, ResourceHints, merge};

/// Reason of a pod the Topology Manager refused.
pub const TOPOLOGY_AFFINITY_ERROR: &str = "TopologyAffinityError";
/// The kubelet's message for [`TOPOLOGY_AFFINITY_ERROR`] (its Event note; the pod's
/// status message is this after [`REJECTED_PREFIX`]).
pub const TOPOLOGY_AFFINITY_MESSAGE: &str = "Resources cannot be allocated with Topology locality";
/// Reason of a pod a resource manager failed to allocate for.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";
/// What the kubelet puts before the message in a rejected pod's status.
pub const REJECTED_PREFIX: &str = "Pod was rejected: ";

/// A resource manager could not allocate what it was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationError(pub String);

/// Why a pod was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// CamelCase reason (`TopologyAffinityError`, `OutOfcpu`, ...).
    pub reason: String,
    /// The message (without [`REJECTED_PREFIX`]).
    pub message: String,
}

impl Rejection {
    fn topology() -> Self {
        Self {
            reason: TOPOLOGY_AFFINITY_ERROR.into(),
            message: TOPOLOGY_AFFINITY_MESSAGE.into(),
        }
    }

    fn unexpected(error: AllocationError) -> Self {
        Self {
            reason: UNEXPECTED_ADMISSION_ERROR.into(),
            message: format!("Allocate failed due to {}, which is unexpected", error.0),
        }
    }
}

/// The outcome of [`NodeState::admit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Admitted; its resources are allocated.
    Admitted,
    /// Rejected; it holds nothing.
    Rejected(Rejection),
}

/// What one container of an admitted pod got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerAllocation {
    /// Container name.
    pub name: String,
    /// Init, sidecar or app.
    pub kind: ContainerKind,
    /// Exclusive CPU ids.
    pub cpus: BTreeSet<u32>,
    /// Pinned memory blocks.
    pub memory: Vec<MemoryBlock>,
    /// Devices: resource → ids.
    pub devices: BTreeMap<String, BTreeSet<String>>,
}

#[derive(Debug, Clone)]
struct AdmittedPod {
    request: PodRequest,
    effective: BTreeMap<String, u64>,
}

/// The admission state of one node: its resource managers and its admitted pods.
#[derive(Debug, Clone)]
pub struct NodeState {
    machine: Machine,
    settings: KubeletSettings,
    cpu: CpuManager,
    memory: MemoryManager,
    devices: DeviceManager,
    /// Admitted pods in admission order.
    pods: Vec<AdmittedPod>,
}

impl NodeState {
    /// A node with nothing admitted.
    pub fn new(machine: &Machine, settings: KubeletSettings) -> Self {
        Self {
            machine: machine.clone(),
            settings,
            cpu: CpuManager::new(machine, settings.cpu_manager_policy),
            memory: MemoryManager::new(machine, settings.memory_manager_policy),
            devices: DeviceManager::new(machine),
            pods: Vec::new(),
        }
    }

    /// The hardware.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The kubelet settings.
    pub fn settings(&self) -> KubeletSettings {
        self.settings
    }

    /// The CPU manager (free CPUs, assignments).
    pub fn cpu(&self) -> &CpuManager {
        &self.cpu
    }

    /// The memory manager (free amounts, blocks).
    pub fn memory(&self) -> &MemoryManager {
        &self.memory
    }

    /// The device manager (free devices, assignments).
    pub fn devices(&self) -> &DeviceManager {
        &self.devices
    }

    /// Whether `pod` is admitted.
    pub fn is_admitted(&self, pod: &PodKey) -> bool {
        self.pods.iter().any(|p| &p.request.key == pod)
    }

    /// Admitted pods, in admission order.
    pub fn admitted(&self) -> impl Iterator<Item = &PodRequest> {
        self.pods.iter().map(|p| &p.request)
    }

    /// What each container of admitted `pod` got, init containers included.
    pub fn allocation(&self, pod: &PodKey) -> Option<Vec<ContainerAllocation>> {
        let admitted = self.pods.iter().find(|p| &p.request.key == pod)?;
        let containers = admitted
            .request
            .containers
            .iter()
            .map(|c| ContainerAllocation {
                name: c.name.clone(),
                kind: c.kind,
                cpus: self.cpu.assigned(pod, &c.name).cloned().unwrap_or_default(),
                memory: self.memory.assigned(pod, &c.name).to_vec(),
                devices: self.devices.assigned(pod, &c.name),
            })
            .collect();
        Some(containers)
    }

    /// Admits `pod` and allocates its resources, or rejects it. Admitting a pod that is
    /// already admitted changes nothing.
    pub fn admit(&mut self, pod: &PodRequest) -> Admission {
        if self.is_admitted(&pod.key) {
            return Admission::Admitted;
        }
        let allocated = if self.settings.topology_manager_policy == TopologyManagerPolicy::None {
            self.allocate_all(pod, None)
        } else {
            match self.settings.topology_manager_scope {
                TopologyManagerScope::Container => self.admit_containers(pod),
                TopologyManagerScope::Pod => self.admit_pod(pod),
            }
        };
        let effective = pod.effective_amounts();
        let result = allocated.and_then(|()| self.fit(&effective));
        match result {
            Ok(()) => {
                self.pods.push(AdmittedPod {
                    request: pod.clone(),
                    effective,
                });
                Admission::Admitted
            }
            Err(rejection) => {
                self.free(&pod.key);
                Admission::Rejected(rejection)
            }
        }
    }

    fn admit_containers(&mut self, pod: &PodRequest) -> Result<(), Rejection> {
        for container in &pod.containers {
            let providers = [
                self.devices.container_hints(pod, container),
                self.cpu.container_hints(pod, container),
                self.memory.container_hints(pod, container),
            ];
            let decision = self.merge(&providers);
            if !decision.admit {
                return Err(Rejection::topology());
            }
            self.allocate(pod, container, decision.hint.affinity)?;
        }
        Ok(())
    }

    fn admit_pod(&mut self, pod: &PodRequest) -> Result<(), Rejection> {
        let providers = [
            self.devices.pod_hints(pod),
            self.cpu.pod_hints(pod),
            self.memory.pod_hints(pod),
        ];
        let decision = self.merge(&providers);
        if !decision.admit {
            return Err(Rejection::topology());
        }
        self.allocate_all(pod, decision.hint.affinity)
    }

    fn merge(&self, providers: &[ResourceHints]) -> Decision {
        merge(
            self.settings.topology_manager_policy,
            self.machine.zone_count(),
            providers,
        )
    }

    fn allocate_all(
        &mut self,
        pod: &PodRequest,
        affinity: Option<NumaMask>,
    ) -> Result<(), Rejection> {
        for container in &pod.containers {
            self.allocate(pod, container, affinity)?;
        }
        Ok(())
    }

    fn allocate(
        &mut self,
        pod: &PodRequest,
        container: &ContainerRequest,
        affinity: Option<NumaMask>,
    ) -> Result<(), Rejection> {
        self.devices
            .allocate(pod, container, affinity)
            .and_then(|()| self.cpu.allocate(pod, container, affinity))
            .and_then(|()| self.memory.allocate(pod, container, affinity))
            .map_err(Rejection::unexpected)
    }

    /// The kubelet's resource fit: requests of admitted pods plus this one within
    /// the node's allocatable amounts, and room for one more pod.
    fn fit(&self, effective: &BTreeMap<String, u64>) -> Result<(), Rejection> {
        let allocatable = self.machine.allocatable();
        let wanted = effective
            .iter()
            .map(|(name, &amount)| (name.as_str(), amount))
            .chain([("pods", 1)]);
        for (name, requested) in wanted {
            let used: u64 = if name == "pods" {
                self.pods.len() as u64
            } else {
                self.pods.iter().filter_map(|p| p.effective.get(name)).sum()
            };
            let capacity = allocatable.get(name).copied().unwrap_or(0);
            if used + requested > capacity {
                return Err(Rejection {
                    reason: format!("OutOf{name}"),
                    message: format!(
                        "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Releases everything `pod` holds; returns whether it was admitted.
    pub fn release(&mut self, pod: &PodKey) -> bool {
        let before = self.pods.len();
        self.pods.retain(|p| &p.request.key != pod);
        self.free(pod);
        self.pods.len() != before
    }

    fn free(&mut self, pod: &PodKey) {
        self.cpu.release(pod);
        self.memory.release(pod);
        self.devices.release(pod);
    }
}
