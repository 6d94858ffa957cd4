//! The public face of an election: [`LeaderElector`] validates the configuration and
//! spawns the [campaign](super::campaign) task; [`LeaderElection`] is the handle to
//! the running task, to read leadership from and to stop it.

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{Instrument as _, info_span};

use super::campaign::Campaign;
use super::status::{LeaderStatus, Shared};
use super::{LeaseConfig, LeaseError, WriteFence};

/// Contends for one Lease as one identity. See the [module docs](super).
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
}

impl LeaderElector {
    /// An elector for `config`'s Lease; fails if the configuration breaks a timing rule.
    pub fn new(client: Client, config: LeaseConfig) -> Result<Self, LeaseError> {
        config.validate()?;
        Ok(Self {
            api: Api::namespaced(client, &config.namespace),
            config,
        })
    }

    /// Spawns the election task on the current tokio runtime.
    pub fn run(self) -> LeaderElection {
        let shared = Shared::new();
        let (stop, stop_rx) = watch::channel(false);
        let span = info_span!(
            "leader_election",
            lease = %format_args!("{}/{}", self.config.namespace, self.config.name),
            identity = %self.config.identity,
        );
        let margin = self.config.write_margin();
        let campaign = Campaign::new(self.api, self.config, shared.clone(), stop_rx);
        LeaderElection {
            status: LeaderStatus::new(shared),
            margin,
            stop,
            task: tokio::spawn(campaign.run().instrument(span)),
        }
    }
}

/// A running election. Dropping it stops the task in the background (releasing the
/// lease if held); [`step_down`](Self::step_down) does so and waits for the release.
pub struct LeaderElection {
    status: LeaderStatus,
    /// The config's write margin, for [`fence`](Self::fence).
    margin: std::time::Duration,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), LeaseError>>,
}

impl LeaderElection {
    /// A cloneable view of this elector's leadership.
    pub fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// The fence for writes only the leader may make, with the config's
    /// [write margin](LeaseConfig::write_margin).
    pub fn fence(&self) -> WriteFence {
        WriteFence::new(self.status(), self.margin)
    }

    /// Shorthand for [`LeaderStatus::is_leader`].
    pub fn is_leader(&self) -> bool {
        self.status.is_leader()
    }

    /// Stops leading at once, clears `holderIdentity` if this process holds the lease
    /// (so a successor takes over without waiting), and ends the task.
    pub async fn step_down(self) -> Result<(), LeaseError> {
        // A send error means the task is gone already; joining it tells how it ended.
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(LeaseError::Task(e.to_string())),
        }
    }

    /// Kills the task without releasing the lease, as a crash would: this process
    /// stays leader only until its current renew deadline, and other candidates take
    /// over once the lease expires.
    pub fn abort(self) {
        self.task.abort();
    }
}
