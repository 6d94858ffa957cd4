//! The node simulator: the kubelets of kwok nodes, played by the kubelet's own code.
//!
//! kwok keeps fake nodes Ready but has no resource managers. The simulator adds every
//! node to the [`referee`] (the kubelet's Topology, CPU, memory and device managers from
//! `k8s.io/kubernetes`, one Go process for all nodes), which decides whether a pod bound
//! to the node runs or ends `Failed` with the kubelet's reason and message, and serves
//! the node's podresources API.
//!
//! Data flow: a [`scenario::Scenario`] (YAML) describes nodes — NUMA zones with CPUs,
//! memory, hugepages and devices ([`machine`]) and kubelet settings — and a workload
//! ([`workload`]). [`sysfs`] writes the files a node agent reads; each node becomes a
//! [`node::SimNode`] in the referee. The [`controller::Controller`] watches pods labelled
//! [`NODE_SIM_LABEL`](tas_testcluster::NODE_SIM_LABEL)`=true` on those nodes, has the
//! referee admit or reject each and writes the pod status (see [`status`]), and releases
//! resources when pods finish or go away. [`simulator::Simulator`] runs all of it; the
//! `tas-nodesim` binary wraps it.
//!
//! The referee is the only model of the kubelet here: a verdict ([`verdict`]) is always
//! the kubelet's own code's. [`kubelet_server`] is a podresources server whose answers a
//! test sets, for the updater's tests of failure paths a real kubelet cannot produce on
//! demand.
//!
//! [`dra_referee`] is the same idea for DRA: kube-scheduler's own structured-parameters
//! allocator as a child process, which judges whether claims can be allocated on a node.
//! [`dra_driver`] builds what a DRA driver publishes for such nodes (device classes,
//! ResourceSlices per NUMA zone with the standard attributes) and the claims for them.

pub mod controller;
pub mod dra_driver;
pub mod dra_referee;
pub mod kubelet_server;
pub mod machine;
pub mod node;
pub mod referee;
pub mod request;
pub mod runner;
pub mod scenario;
pub mod simulator;
pub mod status;
pub mod sysfs;
pub mod verdict;
pub mod workload;

#[cfg(test)]
mod tests;

pub use node::SimNode;
pub use scenario::{NodeSpec, Scenario, ScenarioError};
pub use simulator::{Simulator, SimulatorError};
pub use verdict::{
    Admission, REJECTED_PREFIX, Rejection, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE,
    UNEXPECTED_ADMISSION_ERROR,
};
pub use workload::{WORKLOAD_LABEL, WorkloadTemplate};
