//! `tas-scheduler`: a NUMA-aware secondary scheduler.
//!
//! [`numa`] decides, per node, whether the kubelet's Topology Manager would admit a pod
//! (per the node's policy and scope from its NodeResourceTopology) and scores the
//! placement; [`filter`] holds the node-level filters with kube-scheduler semantics;
//! [`config`] validates the configuration file.

pub mod config;
pub mod filter;
pub mod numa;
