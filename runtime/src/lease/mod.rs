//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Run several replicas of a component; one of them — the leader — acts, the others
//! wait to take over. [`LeaderElector::run`] spawns the election task and returns a
//! [`LeaderElection`] whose [`LeaderStatus::is_leader`] is cheap enough to check
//! before every action only the leader may take (binding a pod).
//!
//! How it stays safe, i.e. never two leaders at once:
//! - every write (create, acquire, renew, release) is conditional on the
//!   `resourceVersion` last read, so of two candidates writing the same record one
//!   gets a conflict and loses;
//! - a candidate takes a held lease only after seeing the same record unchanged for
//!   the record's `leaseDurationSeconds` on its own monotonic clock. `renewTime` is
//!   written as a `MicroTime` but not compared with the local wall clock: a clock
//!   running ahead of the holder's would take over while the holder still leads;
//! - a holder counts itself leader only until the renew deadline — two thirds of the
//!   lease duration after the *start* of its last successful write — even if it cannot
//!   reach the API server or its task is stuck. A candidate cannot have seen that write
//!   before it started, so it waits at least the full lease duration from then;
//! - a holder that finds the record changed under it by another holder (a conflict,
//!   then another name in it), or deleted, stops at once.
//!
//! Whoever loses the lease goes back to being a candidate. On shutdown,
//! [`LeaderElection::step_down`] stops leading first and then clears
//! `holderIdentity`, so a successor takes over without waiting out the lease.
//! `leaseTransitions` counts acquisitions from another holder (or from nobody after a
//! release).
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), tas_runtime::lease::LeaseError> {
//! use tas_runtime::lease::{LeaderElector, LeaseConfig};
//!
//! let config = LeaseConfig::new("tas-system", "tas-scheduler", "tas-scheduler-7d9f-x2k4p");
//! let election = LeaderElector::new(client, config)?.run();
//! let leader = election.status();
//! leader.until_leader().await;
//! // ... and right before every bind:
//! if leader.is_leader() { /* bind */ }
//! // On SIGTERM: stop leading and hand over at once.
//! election.step_down().await?;
//! # Ok(()) }
//! ```

mod campaign;
mod config;
mod elector;
mod fence;
mod record;
mod status;

use std::time::Duration;

pub use config::LeaseConfig;
pub use elector::{LeaderElection, LeaderElector};
pub use fence::{FenceError, WriteFence};
pub use status::LeaderStatus;

/// The margin of the [`WriteFence`] for a lease of `lease_duration`: a sixth of it
/// (2.5 s for 15 s). A write is sent only while the holder leads for longer than this
/// and is given up after it, so it ends before the renew deadline (two thirds of the
/// lease duration after the last successful renewal started), well before another
/// candidate may take over. A sixth leaves writes open for most of the time between
/// renewals with renew periods up to half the lease duration (the default is a third).
pub fn write_margin(lease_duration: Duration) -> Duration {
    lease_duration / 6
}

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The configuration breaks a timing rule; permanent.
    #[error("invalid leader election config: {0}")]
    InvalidConfig(String),
    /// A request to the API server failed.
    #[error("lease request failed: {0}")]
    Api(#[source] kube::Error),
    /// A request to the API server did not answer in time.
    #[error("lease request timed out after {0:?}")]
    Timeout(Duration),
    /// The lease kept changing between reading and writing it.
    #[error("the lease kept changing between reading and writing it")]
    Contended,
    /// The election task panicked or was cancelled.
    #[error("the election task ended abnormally: {0}")]
    Task(String),
}

impl LeaseError {
    /// Whether retrying may succeed (API errors and timeouts) rather than needing a
    /// change of configuration.
    pub fn is_transient(&self) -> bool {
        match self {
            LeaseError::InvalidConfig(_) | LeaseError::Task(_) => false,
            LeaseError::Api(kube::Error::Api(status)) => {
                // Forbidden or unknown kind: RBAC or the cluster must change first.
                !matches!(status.code, 401 | 403 | 404 | 422)
            }
            LeaseError::Api(_) | LeaseError::Timeout(_) | LeaseError::Contended => true,
        }
    }
}
