//! The election task: a candidate loop that acquires the lease, a holder loop that
//! renews it against the deadline, and the release on shutdown.
//!
//! Candidate: read the Lease every `retry_period`; create it if missing; write itself
//! in as holder when the record is free, ours, or expired (see [`super::record`]).
//! Holder: renew every `renew_period`, retry failures every `retry_period`, and stop
//! leading when the renew deadline passes or another holder shows up; then be a
//! candidate again. Every write carries the `resourceVersion` it was based on.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::record::{self, Observation, Verdict};
use super::status::Shared;
use super::{LeaseConfig, LeaseError};

/// How holding the lease ended.
enum Hold {
    /// Asked to stop while holding `lease` (the last record written).
    Stopped(Box<Lease>),
    /// Leadership lost; campaign again.
    Lost,
}

/// Why a renewal failed.
enum RenewError {
    /// Another holder took the lease, or it was deleted.
    Lost(Option<String>),
    /// Worth retrying until the deadline.
    Failed(LeaseError),
}

/// The state of one election task.
pub(crate) struct Campaign {
    api: Api<Lease>,
    config: LeaseConfig,
    shared: Arc<Shared>,
    /// Becomes true (or closes) when the task should release the lease and end.
    stop: watch::Receiver<bool>,
}

impl Campaign {
    pub(crate) fn new(
        api: Api<Lease>,
        config: LeaseConfig,
        shared: Arc<Shared>,
        stop: watch::Receiver<bool>,
    ) -> Self {
        Self {
            api,
            config,
            shared,
            stop,
        }
    }

    pub(crate) async fn run(mut self) -> Result<(), LeaseError> {
        loop {
            let Some((lease, written_at)) = self.acquire().await else {
                return Ok(());
            };
            match self.hold(lease, written_at).await {
                Hold::Stopped(lease) => return self.release(*lease).await,
                Hold::Lost => {}
            }
        }
    }

    /// Tries every `retry_period` until this candidate holds the lease: returns the
    /// record written and when the write started. `None` when asked to stop.
    async fn acquire(&mut self) -> Option<(Lease, Instant)> {
        let mut seen = None;
        loop {
            // A stop may cut a write short; if it had succeeded, the lease expires
            // unreleased, which costs a successor one lease duration, nothing more.
            let mut stop = self.stop.clone();
            tokio::select! {
                biased;
                _ = stop_requested(&mut stop) => return None,
                result = self.try_acquire(&mut seen) => match result {
                    Ok(Some(acquired)) => return Some(acquired),
                    Ok(None) => {}
                    Err(e) => warn!(error = %e, "could not check the lease"),
                },
            }
            let next = Instant::now() + self.config.retry_period;
            if self.sleep_or_stop(next).await {
                return None;
            }
        }
    }

    async fn try_acquire(
        &self,
        seen: &mut Option<Observation>,
    ) -> Result<Option<(Lease, Instant)>, LeaseError> {
        let name = &self.config.name;
        let timeout = self.config.lease_duration;
        let Some(current) = with_timeout(timeout, self.api.get_opt(name)).await? else {
            return self.create().await;
        };
        let spec = current.spec.clone().unwrap_or_default();
        let previous_holder = seen
            .as_ref()
            .and_then(Observation::holder)
            .map(str::to_owned);
        let observation = Observation::update(seen.take(), &spec, Instant::now());
        let verdict = observation.judge(self.config.lease_duration, Instant::now());
        // Kept even when taking over: if the write fails for a transient reason, the
        // next round need not wait out the lease again.
        *seen = Some(observation);
        if let Verdict::Held { holder, .. } = &verdict {
            if previous_holder.as_deref() != Some(holder.as_str()) {
                if *holder == self.config.identity {
                    info!(%holder, "lease held by an earlier process of this identity; waiting for it to expire");
                } else {
                    info!(%holder, "lease held by another candidate; waiting");
                }
            }
            return Ok(None);
        }
        if let Verdict::Expired { holder } = &verdict {
            info!(%holder, "the holder stopped renewing; taking over");
        }
        let new_spec = record::acquired(
            Some(&spec),
            &self.config.identity,
            self.config.lease_duration_seconds(),
            Timestamp::now(),
        );
        let attempt = Lease {
            metadata: current.metadata,
            spec: Some(new_spec),
        };
        let started = Instant::now();
        match with_timeout(
            timeout,
            self.api.replace(name, &PostParams::default(), &attempt),
        )
        .await
        {
            Ok(lease) => {
                self.announce(&lease, &verdict);
                Ok(Some((lease, started)))
            }
            // Someone else wrote first: their record is read on the next round.
            Err(LeaseError::Api(e)) if status_code(&e) == Some(409) => {
                debug!("lost the race to acquire the lease");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    async fn create(&self) -> Result<Option<(Lease, Instant)>, LeaseError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record::acquired(
                None,
                &self.config.identity,
                self.config.lease_duration_seconds(),
                Timestamp::now(),
            )),
        };
        let started = Instant::now();
        let timeout = self.config.lease_duration;
        match with_timeout(timeout, self.api.create(&PostParams::default(), &lease)).await {
            Ok(lease) => {
                self.announce(&lease, &Verdict::Free);
                Ok(Some((lease, started)))
            }
            Err(LeaseError::Api(e)) if status_code(&e) == Some(409) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn announce(&self, lease: &Lease, verdict: &Verdict) {
        let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions);
        let previous_holder = match verdict {
            Verdict::Expired { holder } | Verdict::Held { holder, .. } => Some(holder.as_str()),
            Verdict::Free => None,
        };
        info!(previous_holder, transitions, "became leader");
    }

    /// Renews until asked to stop or leadership is lost. `written_at` is when the
    /// write that made this process holder started.
    async fn hold(&mut self, mut lease: Lease, written_at: Instant) -> Hold {
        let renew_deadline = self.config.renew_deadline();
        let mut deadline = written_at + renew_deadline;
        self.shared.lead_until(deadline);
        let mut next = written_at + self.config.renew_period;
        loop {
            if self.sleep_or_stop(next).await {
                return Hold::Stopped(Box::new(lease));
            }
            let started = Instant::now();
            if started >= deadline {
                return self.lose("the renew deadline passed", None);
            }
            match tokio::time::timeout_at(deadline, self.renew(&mut lease)).await {
                Ok(Ok(())) => {
                    deadline = started + renew_deadline;
                    self.shared.lead_until(deadline);
                    next = started + self.config.renew_period;
                }
                Ok(Err(RenewError::Lost(holder))) => {
                    return self.lose("another holder took the lease", holder.as_deref());
                }
                Ok(Err(RenewError::Failed(e))) => {
                    warn!(error = %e, "renewing the lease failed; retrying");
                    next = (Instant::now() + self.config.retry_period).min(deadline);
                }
                Err(_elapsed) => {
                    return self.lose("no renewal succeeded before the renew deadline", None);
                }
            }
        }
    }

    fn lose(&self, why: &str, holder: Option<&str>) -> Hold {
        self.shared.stop_leading();
        warn!(new_holder = holder, "lost leadership: {why}");
        Hold::Lost
    }

    /// One renewal, conditional on the record last written. A conflict is retried
    /// once against a fresh read if the record still names us (someone edited, say,
    /// a label); any other holder means the lease is lost.
    async fn renew(&self, lease: &mut Lease) -> Result<(), RenewError> {
        let name = &self.config.name;
        for _ in 0..2 {
            let spec = lease.spec.clone().unwrap_or_default();
            let attempt = Lease {
                metadata: lease.metadata.clone(),
                spec: Some(record::renewed(&spec, Timestamp::now())),
            };
            match self
                .api
                .replace(name, &PostParams::default(), &attempt)
                .await
            {
                Ok(written) => {
                    *lease = written;
                    return Ok(());
                }
                Err(e) if status_code(&e) == Some(409) => {
                    *lease = self.still_ours().await?;
                }
                Err(e) if status_code(&e) == Some(404) => return Err(RenewError::Lost(None)),
                Err(e) => return Err(RenewError::Failed(LeaseError::Api(e))),
            }
        }
        Err(RenewError::Failed(LeaseError::Contended))
    }

    /// The current record if it still names this process.
    async fn still_ours(&self) -> Result<Lease, RenewError> {
        match self.api.get_opt(&self.config.name).await {
            Ok(Some(current)) => match record::holder(current.spec.as_ref()) {
                Some(h) if h == self.config.identity => Ok(current),
                other => Err(RenewError::Lost(other.map(str::to_owned))),
            },
            Ok(None) => Err(RenewError::Lost(None)),
            Err(e) => Err(RenewError::Failed(LeaseError::Api(e))),
        }
    }

    /// Stops leading, then clears `holderIdentity` in `lease` (the last record
    /// written), re-reading it once on a conflict.
    async fn release(&self, lease: Lease) -> Result<(), LeaseError> {
        self.shared.stop_leading();
        let name = &self.config.name;
        let release = async {
            let mut current = lease;
            for _ in 0..2 {
                let spec = current.spec.clone().unwrap_or_default();
                let attempt = Lease {
                    metadata: current.metadata.clone(),
                    spec: Some(record::released(&spec, Timestamp::now())),
                };
                match self
                    .api
                    .replace(name, &PostParams::default(), &attempt)
                    .await
                {
                    Ok(_) => {
                        info!("released the lease");
                        return Ok(());
                    }
                    Err(e) if status_code(&e) == Some(409) => match self.still_ours().await {
                        Ok(fresh) => current = fresh,
                        // Someone else holds it, or it is gone: nothing to release.
                        Err(RenewError::Lost(_)) => return Ok(()),
                        Err(RenewError::Failed(e)) => return Err(e),
                    },
                    Err(e) if status_code(&e) == Some(404) => return Ok(()),
                    Err(e) => return Err(LeaseError::Api(e)),
                }
            }
            Err(LeaseError::Contended)
        };
        let limit = self.config.renew_deadline();
        let result = match tokio::time::timeout(limit, release).await {
            Ok(result) => result,
            Err(_elapsed) => Err(LeaseError::Timeout(limit)),
        };
        if let Err(e) = &result {
            warn!(error = %e, "could not release the lease; it will expire");
        }
        result
    }

    /// Sleeps until `until`; true if a stop was requested meanwhile.
    async fn sleep_or_stop(&mut self, until: Instant) -> bool {
        tokio::select! {
            biased;
            _ = stop_requested(&mut self.stop) => true,
            _ = tokio::time::sleep_until(until) => false,
        }
    }
}

/// Resolves when a stop is requested or the [`LeaderElection`](super::LeaderElection)
/// is dropped.
async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

async fn with_timeout<T>(
    limit: Duration,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, LeaseError> {
    match tokio::time::timeout(limit, request).await {
        Ok(result) => result.map_err(LeaseError::Api),
        Err(_elapsed) => Err(LeaseError::Timeout(limit)),
    }
}
