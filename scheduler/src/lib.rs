//! `tas-scheduler`: a NUMA-aware secondary scheduler.
//!
//! [`numa`] decides, per node, whether the kubelet's Topology Manager would admit a pod
//! (per the node's policy and scope from its NodeResourceTopology) and scores the
//! placement.

pub mod config;
pub mod cycle;
pub mod explain;
pub mod filter;
pub mod numa;
pub mod queue;
pub mod state;
