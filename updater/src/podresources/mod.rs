//! The kubelet podresources v1 gRPC API: what the kubelet can hand out exclusively
//! (`GetAllocatableResources`) and what it has handed out to running pods (`List`).
//!
//! [`client::PodResourcesClient`] is the node agent's side: it dials the kubelet's unix
//! socket lazily, paces its own calls below the kubelet's rate limit, and after a failure
//! drops the connection and redials on a later call with exponential backoff, so a
//! kubelet restart heals without restarting the agent. [`ClientStats`] exposes the
//! connection state and error counts for readiness and metrics. [`ListDigest`] tells
//! whether two `List` answers differ, for the agent's poll of the pods on its node.
//!
//! The messages and the generated client come from `tas-podresources`; the node
//! simulator (`tas-nodesim`) serves the same API for tests.

mod backoff;
pub mod client;
mod digest;
mod error;
mod pacing;
mod stats;

pub use client::{ClientConfig, ConnectionState, PodResourcesClient};
pub use digest::ListDigest;
pub use error::{ErrorKind, PodResourcesError};
pub use stats::ClientStats;

/// Generated messages and client of the kubelet's package `v1`.
pub use tas_podresources::v1;
