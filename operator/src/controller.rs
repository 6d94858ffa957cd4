//! The controller: build the context and the watches, then reconcile the
//! TopologyAwareScheduling object on every relevant change until shutdown.
//!
//! ```text
//! watches::controller(client) ─► Controller + Stores ─┬─ readiness once every cache synced
//!                                                     └─ run(reconcile, error_policy, Context)
//! ```

use crate::context::{Config, Context, Stores};
use crate::metrics::Metrics;
use crate::reconcile::{error_policy, reconcile};
use crate::telemetry::Otlp;
use crate::watches;
use futures::StreamExt;
use kube::Client;
use kube::runtime::controller;
use kube::runtime::events::{Recorder, Reporter};
use std::future::Future;
use std::sync::Arc;

/// `reportingController` of the operator's Events.
pub const REPORTER: &str = "tas-operator";

/// Runs the controller until `shutdown` completes, then lets running reconciles finish.
///
/// Readiness (`metrics.is_ready()`) turns true once the watch caches are synced. Each
/// reconcile points `otlp` at the endpoint the object names.
pub async fn run_controller(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    otlp: Otlp,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (controller, stores) = watches::controller(&client);
    spawn_readiness(stores.clone(), metrics.clone());
    let reporter = Reporter {
        controller: REPORTER.to_owned(),
        instance: config.instance.clone(),
    };
    let debounce = config.debounce;
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        config,
        stores,
        metrics,
        otlp,
        backoffs: Default::default(),
    });

    controller
        .with_config(controller::Config::default().debounce(debounce))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::trace!(%object, "reconcile done"),
                Err(controller::Error::ObjectNotFound(object)) => {
                    tracing::debug!(%object, "triggered for an object that is gone")
                }
                // Logged with its context by the reconcile itself.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => tracing::warn!(error = %e, "controller"),
            }
        })
        .await;
    tracing::info!("controller stopped");
}

/// Marks the operator ready once every cache is synced.
fn spawn_readiness(stores: Stores, metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        if stores.synced().await.is_ok() {
            tracing::info!("caches synced; ready");
            metrics.set_ready();
        }
    });
}
