//! `tas-scheduler`: a NUMA-aware secondary scheduler.
//!
//! Data flows from [`watch`] (nodes, bound pods, our pending pods, NodeResourceTopology
//! objects) into [`state`] (node usage), the [`cache`] (per-node NUMA views with
//! pessimistic reservations) and the [`queue`]. The loop in [`scheduler`] pops a pod,
//! runs one [`cycle`] — node-level [`filter`]s, then the [`numa`] fit of the node's
//! Topology Manager policy and scope, then scoring — assumes the pod and binds it in the
//! background; [`explain`] and [`events`] tell users why a pod waits. [`run`] wires it
//! together with leader election and the HTTP endpoints ([`metrics`]); [`config`]
//! validates the configuration file.

pub mod cache;
pub mod config;
pub mod cycle;
pub mod events;
pub mod explain;
pub mod filter;
pub mod metrics;
pub mod numa;
pub mod queue;
pub mod run;
pub mod scheduler;
pub mod shared;
pub mod state;
pub mod watch;
