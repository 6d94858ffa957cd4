//! Starting the operator: what the binary's `run` and the tests both call.
//!
//! ```text
//! operate(client, Options, shutdown)
//!   ├─ [http]             serve /metrics, /healthz, /readyz
//!   ├─ [leader_election]  wait for the Lease (ready meanwhile: a standby is healthy)
//!   ├─ run_controller     until shutdown, a lost Lease, or the HTTP server stopping
//!   └─ stop everything, let running reconciles finish (≤ DRAIN_LIMIT), give the Lease
//!      up (≤ STEP_DOWN_LIMIT)
//! ```
//!
//! Each shutdown step has its own deadline (`tas_runtime::shutdown::step`), so the
//! whole way out stays well inside the kubelet's 30 s grace period; a step cut short
//! is logged. A reconcile cut short is resumed by the next leader from the object; a
//! Lease not given up expires after its duration.
//!
//! Logging and the OTLP exporters belong to the caller (a process has one global
//! subscriber), so [`Options`] takes the [`Otlp`] the caller set up.

use crate::context::Config;
use crate::controller::run_controller;
use crate::metrics::Metrics;
use crate::telemetry::Otlp;
use kube::Client;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tas_runtime::http::Endpoint;
use tas_runtime::lease::{LeaderElection, LeaderElector, LeaseConfig, LeaseError};
use tas_runtime::shutdown::step;
use tas_runtime::supervise::TaskEnded;
use tokio::sync::watch;
use tokio::task::JoinError;

/// How to run the operator.
pub struct Options {
    /// The operator's settings.
    pub config: Config,
    /// OpenTelemetry export, pointed at the endpoint the object names.
    pub otlp: Otlp,
    /// Its metrics and readiness (keep a clone to read them while it runs).
    pub metrics: Arc<Metrics>,
    /// Serve `/metrics`, `/healthz` and `/readyz` here, so secured; nothing served
    /// when `None`.
    pub http: Option<Endpoint>,
    /// Reconcile only while holding this Lease, so that several replicas can run with
    /// one active; always reconcile when `None`.
    pub leader_election: Option<LeaseConfig>,
}

impl Options {
    /// `config`, exporting over `otlp` with metrics on its meter; no HTTP endpoint, no
    /// leader election.
    pub fn new(config: Config, otlp: Otlp) -> Self {
        let metrics = Arc::new(Metrics::with_meter(&otlp.meter()));
        Self {
            config,
            otlp,
            metrics,
            http: None,
            leader_election: None,
        }
    }
}

/// Why the operator stopped other than by `shutdown`.
#[derive(Debug, thiserror::Error)]
pub enum OperateError {
    /// The HTTP address could not be bound.
    #[error("binding {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP server failed.
    #[error("the metrics server failed: {0}")]
    Http(#[source] tas_runtime::http::ServeError),
    /// The HTTP server stopped on its own.
    #[error("the metrics server stopped")]
    HttpStopped,
    /// Leader election could not start or step down.
    #[error("leader election: {0}")]
    Lease(#[from] LeaseError),
    /// Another replica took the Lease over.
    #[error("lost the leader Lease; exiting so that a restart campaigns again")]
    LostLease,
    /// A task of the operator panicked.
    #[error("the {task} task failed: {source}")]
    Task {
        /// Which task.
        task: &'static str,
        /// Its panic.
        #[source]
        source: JoinError,
    },
    /// A task that runs for the life of the operator ended or panicked.
    #[error(transparent)]
    Ended(#[from] TaskEnded),
}

/// Longest the running reconciles get to finish after shutdown.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// Longest giving the Lease up may take (a renewal in flight, then the release).
pub const STEP_DOWN_LIMIT: Duration = Duration::from_secs(8);

/// Runs the operator until `shutdown` completes (then returns `Ok` once running
/// reconciles finished and the Lease is given up), or until it cannot go on.
pub async fn operate(
    client: Client,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), OperateError> {
    let Options {
        config,
        otlp,
        metrics,
        http,
        leader_election,
    } = options;
    tokio::pin!(shutdown);

    // One stop signal for every task: shutdown, a lost Lease, or a failed server.
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            // Err: the sender is gone, which also means stop.
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };

    let http = match http {
        Some(Endpoint { address, security }) => {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|source| OperateError::Bind { address, source })?;
            let rendered = metrics.clone();
            Some(tokio::spawn(tas_runtime::http::serve_on(
                listener,
                security,
                tas_runtime::http::Metrics::from_fn(move || rendered.render()),
                metrics.readiness(),
                stopped(),
            )))
        }
        None => None,
    };

    let election = match leader_election {
        Some(lease) => {
            let (name, namespace) = (lease.name.clone(), lease.namespace.clone());
            let election = LeaderElector::new(client.clone(), lease)?.run();
            // A standby is healthy: ready, with nothing to sync until it leads.
            metrics.set_ready();
            tracing::info!(lease = %name, %namespace, "waiting to become leader");
            let status = election.status();
            tokio::select! {
                () = status.until_leader() => tracing::info!("leading"),
                () = &mut shutdown => {
                    stop_tx.send_replace(true);
                    return step_down(election).await;
                }
            }
            Some(election)
        }
        None => None,
    };
    let lost = election.as_ref().map(|e| e.status().subscribe());

    let mut controller = tokio::spawn(run_controller(client, config, metrics, otlp, stopped()));
    let mut controller_ended = false;
    let leadership_lost = async move {
        match lost {
            Some(mut rx) => {
                let _ = rx.wait_for(|leading| !*leading).await;
            }
            None => std::future::pending().await,
        }
    };
    let http_ended = async move {
        match http {
            Some(task) => task.await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        () = &mut shutdown => Ok(()),
        () = leadership_lost => Err(OperateError::LostLease),
        served = http_ended => match served {
            Err(source) => Err(OperateError::Task { task: "metrics server", source }),
            Ok(Err(e)) => Err(OperateError::Http(e)),
            Ok(Ok(())) => Err(OperateError::HttpStopped),
        },
        // The controller runs until told to stop: ending or panicking before is fatal.
        joined = &mut controller => {
            controller_ended = true;
            Err(TaskEnded::from_join("controller", joined).into())
        }
    };
    stop_tx.send_replace(true);
    if !controller_ended {
        match step("controller drain", DRAIN_LIMIT, &mut controller).await {
            Some(joined) => joined.map_err(|source| OperateError::Task {
                task: "controller",
                source,
            })?,
            // Abandoned reconciles are redone by whoever leads next.
            None => controller.abort(),
        }
    }
    if let Some(election) = election {
        step_down(election).await?;
    }
    outcome
}

/// Gives the Lease up within [`STEP_DOWN_LIMIT`]; cut short, the Lease expires on its
/// own after its duration, which only delays a successor.
async fn step_down(election: LeaderElection) -> Result<(), OperateError> {
    match step("lease step-down", STEP_DOWN_LIMIT, election.step_down()).await {
        Some(result) => result.map_err(OperateError::from),
        None => Ok(()),
    }
}

/// The operator running as a task on the caller's runtime (tests, the demo): the same
/// [`operate`] the binary runs, with a handle to stop it.
pub struct InProcess {
    /// Its metrics and readiness.
    pub metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), OperateError>>,
}

impl InProcess {
    /// Spawns [`operate`] with `options` on the current runtime.
    pub fn spawn(client: Client, options: Options) -> Self {
        let (stop, mut rx) = watch::channel(false);
        let metrics = options.metrics.clone();
        let shutdown = async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let task = tokio::spawn(operate(client, options, shutdown));
        Self {
            metrics,
            stop,
            task,
        }
    }

    /// Stops it and waits up to `timeout` for running reconciles to finish.
    pub async fn stop(self, timeout: std::time::Duration) -> Result<(), StopError> {
        self.stop.send_replace(true);
        match tokio::time::timeout(timeout, self.task).await {
            Err(_) => Err(StopError::Timeout(timeout)),
            Ok(Err(source)) => Err(StopError::Operate(OperateError::Task {
                task: "operator",
                source,
            })),
            Ok(Ok(outcome)) => outcome.map_err(StopError::Operate),
        }
    }
}

/// Why [`InProcess::stop`] did not end cleanly.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// Still running after the timeout.
    #[error("the operator did not stop within {0:?}")]
    Timeout(std::time::Duration),
    /// It stopped with an error.
    #[error(transparent)]
    Operate(#[from] OperateError),
}
