//! `tas-scheduler`: a NUMA-aware secondary scheduler.
//!
//! Data flows from [`watch`] (nodes, bound pods, our pending pods, NodeResourceTopology
//! objects, namespaces, PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses, ResourceSlices, DeviceClasses, ResourceClaims), whose tasks only
//! forward their streams to one index task, the single writer of what they feed:
//! [`state`] (node usage and who runs where, as [`pod_meta`]), the [`cache`] (per-node
//! NUMA views with pessimistic reservations), the [`dra_state`] (devices per node,
//! claims, devices in use) and the [`queue`], stamping each changed node with a
//! [`generation`].
//! The loop in [`scheduler`] pops a pod, brings its [`snapshot`] up to date (only the
//! nodes changed since the last decision) and runs one [`cycle`] — node-level
//! [`filter`]s, topology [`spread`], inter-pod [`affinity`], then the [`numa`] fit of
//! the node's Topology Manager policy and scope, the allocation of the pod's resource
//! claims inside the zones it chose ([`dra`], `cycle/dra.rs`), then scoring —
//! [`reserve`]s the pod and [`bind`]s it in the background (claim writes first). A pod that fits nowhere may [`preempt`] lower-priority pods, NUMA-aware. Every API write
//! (binds, evictions, status patches, Events) leaves from one task, the [`writer`],
//! which checks the lease in one place. [`explain`] and [`events`] tell users why a pod
//! waits; [`debug`] serves the reserve cache to
//! `kubectl tas`. [`run`] wires it together with leader election, the HTTP endpoints
//! ([`metrics`]) and the OTLP spans and metrics ([`telemetry`]); [`config`] validates
//! the configuration file. Label selectors are matched by `tas_api::labels`.

pub mod affinity;
pub mod bind;
pub mod cache;
pub mod config;
pub mod cycle;
pub mod debug;
pub mod decision_trace;
pub mod decisions;
pub mod dra;
pub mod dra_state;
pub mod event_series;
pub mod events;
pub mod explain;
pub mod filter;
pub mod generation;
pub mod metrics;
pub mod numa;
pub mod pod_meta;
pub mod preempt;
pub mod queue;
pub mod reserve;
pub mod run;
pub mod schedule_one;
pub mod scheduler;
pub mod shared;
pub mod snapshot;
pub mod spread;
pub mod state;
pub mod telemetry;
pub mod watch;
pub mod writer;

#[cfg(test)]
mod test_support;
