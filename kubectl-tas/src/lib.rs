//! `kubectl tas`: a kubectl plugin (a `kubectl-tas` binary on `PATH`) that shows why a
//! pod is Pending on a NUMA level and what the scheduler believes about each node.
//!
//! - [`status`]: the `TopologyAwareScheduling` object's conditions and node groups;
//! - [`nodes`]: each node's zones, free against allocatable, and whether the
//!   scheduler's view matches the node's NodeResourceTopology fingerprint;
//! - [`gather`]: a support bundle (the stack object, NRTs, the scheduler's
//!   reservations and decisions, the operands' objects, Events and logs; never
//!   Secrets), which `status`, `nodes` and `decisions` read back with `--from-bundle`
//!   ([`bundle`]);
//! - [`decisions`]: the scheduler's recent scheduling attempts, live or from a bundle;
//! - [`explain`]: per node, the scheduler's verdict for a pod, computed by the
//!   scheduler's own filters and NUMA fit (the `tas-scheduler` library) on the NRT
//!   objects plus the reservations the scheduler holds.
//!
//! The reservations come from the scheduler's `/debug/reservations` endpoint through
//! the API server's service proxy ([`proxy`]); [`cluster`] reads the rest and rebuilds
//! the scheduler's view; [`connect`] finds the kubeconfig the way kubectl does;
//! [`render`] draws tables and bars; [`cli`] ties the commands together.

pub mod bundle;
pub mod cli;
pub mod cluster;
pub mod connect;
pub mod decisions;
pub mod error;
pub mod explain;
pub mod gather;
pub mod nodes;
pub mod proxy;
pub mod render;
pub mod stack;
pub mod status;

pub use error::Error;
