//! The kubelet podresources v1 gRPC API: what the kubelet can hand out exclusively
//! (`GetAllocatableResources`) and what it has handed out to running pods (`List`).
//!
//! [`client::PodResourcesClient`] is the node agent's side: it dials the kubelet's unix
//! socket lazily, paces its own calls below the kubelet's rate limit, and after a failure
//! drops the connection and redials on a later call with exponential backoff, so a
//! kubelet restart heals without restarting the agent. [`ClientStats`] exposes the
//! connection state and error counts for readiness and metrics.
//!
//! [`fake::FakeKubelet`] serves the same API from memory on a unix socket, for tests and
//! for the end-to-end node simulator.

mod backoff;
pub mod client;
mod error;
pub mod fake;
mod pacing;
mod stats;

pub use client::{ClientConfig, ConnectionState, PodResourcesClient};
pub use error::{ErrorKind, PodResourcesError};
pub use stats::ClientStats;

/// Generated messages, client (`pod_resources_lister_client`) and server
/// (`pod_resources_lister_server`) of package `v1`.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("v1");
}
