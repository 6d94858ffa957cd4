//! `tas-updater`: the node agent that keeps its node's NodeResourceTopology true.
//!
//! Data flow: [`sysfs`] (zones, CPUs, memory, hugepages, distances) and
//! [`kubelet_config`] (Topology Manager policy/scope, CPU/memory manager policies) are read
//! at every publish, off the async thread ([`node_files`]); [`podresources`] (the kubelet's gRPC API) gives allocatable resources and the
//! exclusive allocations of running pods; [`accounting`] turns both into per-zone
//! capacity / allocatable / available; [`nrt_object`] builds the object and [`publish`]
//! writes it only when it changed. [`agent`] runs that on [`triggers`] (periodic, pod
//! events, edits of the object) and reports through [`metrics`] and a readiness, both
//! served by `tas_runtime::http`. [`cli`] holds the flags, the common ones from
//! `tas_runtime::cli`.

pub mod accounting;
pub mod agent;
pub mod bounded;
pub mod cli;
pub mod kubelet_config;
pub mod kubelet_source;
pub mod memory_cells;
pub mod metrics;
pub mod node_files;
pub mod nrt_object;
pub mod numa_placement;
pub mod podresources;
pub mod pods_fingerprint;
pub mod problem_report;
pub mod publish;
pub mod shared_pool;
pub mod sysfs;
pub mod triggers;
