//! The node simulator: the referee that plays the kubelet for kwok nodes.
//!
//! kwok keeps fake nodes Ready but has no resource managers; the simulator decides, as
//! the kubelet's Topology Manager would, whether a pod bound to a simulated node runs or
//! ends `Failed` with `TopologyAffinityError`. It is written from the kubelet's
//! behaviour (`topology-manager.md`), independently of the scheduler's NUMA model, so it
//! can judge it.
//!
//! Data flow: a [`scenario::Scenario`] (YAML) describes nodes — NUMA zones with CPUs,
//! memory, hugepages and devices ([`machine`]) and kubelet settings — and a workload
//! ([`workload`]). Each node becomes a [`node::SimNode`]: an [`admit::NodeState`] built
//! from the [`cpu_manager`], [`memory_manager`] and [`device_manager`] hint providers and
//! the [`topology_manager`] merge, plus a fake kubelet serving the podresources API
//! (`GetAllocatableResources`, `List`) from its allocations. [`sysfs`] writes the files a
//! node agent reads. The [`controller::Controller`] watches pods labelled
//! [`NODE_SIM_LABEL`](tas_testcluster::NODE_SIM_LABEL)`=true` on those nodes, reads each into a
//! [`request::PodRequest`], admits or rejects it and writes the pod status (see
//! [`status`]), and releases resources when pods finish or go away.
//! [`simulator::Simulator`] runs all of it; the `tas-nodesim` binary wraps it.

pub mod admit;
pub mod controller;
pub mod cpu_manager;
pub mod device_manager;
pub mod kubelet_server;
pub mod machine;
pub mod mask;
pub mod memory_manager;
pub mod node;
pub mod referee;
pub mod request;
pub mod scenario;
pub mod simulator;
pub mod status;
pub mod sysfs;
pub mod topology_manager;
pub mod workload;

#[cfg(test)]
mod tests;

pub use admit::{
    Admission, NodeState, REJECTED_PREFIX, Rejection, TOPOLOGY_AFFINITY_ERROR,
    TOPOLOGY_AFFINITY_MESSAGE, UNEXPECTED_ADMISSION_ERROR,
};
pub use node::SimNode;
pub use scenario::{NodeSpec, Scenario, ScenarioError};
pub use simulator::{Simulator, SimulatorError};
pub use workload::{WORKLOAD_LABEL, WorkloadTemplate};
