//! Wires the scheduler together: watches, reserve-cache resync, leader election, the
//! HTTP endpoints (with the debug routes) and the scheduling loop.

use crate::cache::{CacheConfig, CacheMetrics, ResyncOutcome, TopologyCache};
use crate::config::Settings;
use crate::events::EventSender;
use crate::metrics::Metrics;
use crate::scheduler::{self, LeaderCheck};
use crate::shared::Shared;
use crate::telemetry::Telemetry;
use crate::watch;
use kube::Client;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tas_runtime::http::{self, Endpoint, Readiness};
use tas_runtime::lease::{LeaderElector, LeaseConfig};
use tas_runtime::telemetry::Otlp;

/// Field manager and Event reporter name.
pub const COMPONENT: &str = "tas-scheduler";

/// Run until an unrecoverable error (HTTP bind failure, invalid lease settings).
pub async fn run(
    client: Client,
    settings: Settings,
    http: Endpoint,
    identity: String,
    default_namespace: String,
) -> anyhow::Result<()> {
    run_with_otlp(client, settings, http, identity, default_namespace, None).await
}

/// [`run`], exporting spans and metrics through `otlp` when given.
pub async fn run_with_otlp(
    client: Client,
    settings: Settings,
    http: Endpoint,
    identity: String,
    default_namespace: String,
    otlp: Option<Otlp>,
) -> anyhow::Result<()> {
    let mut metrics = Metrics::new();
    let cache = TopologyCache::new(
        CacheConfig {
            scheduler_name: settings.scheduler_name.clone(),
            resync_period: settings.resync_period,
            max_staleness: settings.max_staleness,
            foreign_pods: settings.foreign_pods,
            informer_mode: settings.informer_mode,
        },
        CacheMetrics::register(&mut metrics.registry),
    );
    let events = EventSender::spawn(client.clone(), COMPONENT, Some(identity.clone()));
    let leader_settings = settings.leader_election.clone();
    let registry = std::mem::take(&mut metrics.registry);
    let telemetry = otlp.map_or_else(Telemetry::off, |o| Telemetry::new(&o, &metrics));
    let shared = Shared::new(settings, cache, metrics, events.clone(), telemetry);

    let readiness = Readiness::not_ready("watches have not listed yet");
    let server = tokio::spawn(http.serve_with(
        http::Metrics::from_registry(Arc::new(registry)),
        readiness.clone(),
        crate::debug::router(shared.clone()),
    ));

    watch::spawn_all(&client, &shared);
    tokio::spawn(resync_loop(shared.clone()));
    tokio::spawn(readiness_loop(shared.clone(), readiness));

    let (is_leader, _election): (LeaderCheck, _) = match leader_settings {
        None => {
            shared.metrics.leader.set(1);
            (Arc::new(|| true), None)
        }
        Some(le) => {
            let config = LeaseConfig {
                lease_duration: le.lease_duration,
                renew_period: le.renew_period,
                ..LeaseConfig::new(
                    le.lease_namespace.unwrap_or(default_namespace),
                    le.lease_name,
                    identity,
                )
            };
            let election = LeaderElector::new(client.clone(), config)?.run();
            let status = election.status();
            let gauge_status = status.clone();
            let gauge = shared.metrics.leader.clone();
            tokio::spawn(async move {
                let mut rx = gauge_status.subscribe();
                loop {
                    gauge.set(i64::from(*rx.borrow_and_update()));
                    if rx.changed().await.is_err() {
                        return;
                    }
                }
            });
            (Arc::new(move || status.is_leader()), Some(election))
        }
    };

    tokio::select! {
        () = scheduler::run(client, shared, events, is_leader) => Ok(()),
        r = server => {
            r??;
            Ok(())
        }
    }
}

/// Re-check nodes with reservations against their NRT every resync period.
async fn resync_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.settings.resync_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let report = shared.cache.resync(Instant::now());
        for node in &report.nodes {
            // These outcomes rebuilt the view from the latest NRT object.
            if matches!(
                node.outcome,
                ResyncOutcome::Match | ResyncOutcome::NoFingerprint | ResyncOutcome::Forced
            ) {
                shared.topology_accepted(&node.node);
            }
        }
        if report.count(ResyncOutcome::Mismatch) < report.nodes.len() {
            shared.cluster_event();
        }
    }
}

async fn readiness_loop(shared: Arc<Shared>, readiness: Readiness) {
    while !shared.synced.all() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    readiness.set_ready();
    tracing::info!("caches synced: ready");
}
