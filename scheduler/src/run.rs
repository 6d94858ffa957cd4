//! Wires the scheduler together: watches, reserve-cache resync, leader election, the
//! HTTP endpoints (with the debug routes) and the scheduling loop.

use crate::cache::{CacheConfig, CacheMetrics, ResyncOutcome, TopologyCache};
use crate::config::Settings;
use crate::metrics::Metrics;
use crate::scheduler::{self, LeaderCheck};
use crate::shared::Shared;
use crate::telemetry::Telemetry;
use crate::watch;
use crate::writer::Writer;
use kube::Client;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tas_runtime::http::{self, Endpoint, Readiness};
use tas_runtime::lease::{LeaderElector, LeaderStatus, LeaseConfig};
use tas_runtime::shutdown::step;
use tas_runtime::supervise::Supervisor;
use tas_runtime::telemetry::Otlp;

/// Field manager and Event reporter name.
pub const COMPONENT: &str = "tas-scheduler";

/// How long giving the Lease up on the way out may take; cut short, the Lease expires
/// on its own, which only delays a successor.
const STEP_DOWN_LIMIT: Duration = Duration::from_secs(5);

/// Run until an unrecoverable error: invalid lease settings, or the first supervised
/// task to end (a watch, a loop, the HTTP server) or the lease lost. Never returns
/// `Ok`: every way out is a reason for the process to exit non-zero and restart.
pub async fn run(
    client: Client,
    settings: Settings,
    http: Endpoint,
    identity: String,
    default_namespace: String,
) -> anyhow::Result<()> {
    let never = std::future::pending();
    run_until(
        client,
        settings,
        http,
        identity,
        default_namespace,
        None,
        never,
    )
    .await
}

/// [`run`], exporting spans and metrics through `otlp` when given, until `shutdown`
/// resolves (SIGTERM), which returns `Ok`.
///
/// Either way out, the Lease is handed over rather than left to expire: the write
/// fence closes (no bind or eviction is sent from then on), the margin passes (every
/// write sent before has ended), and the Lease is released, so a standby takes over
/// at its next check instead of after the lease duration.
pub async fn run_until(
    client: Client,
    settings: Settings,
    http: Endpoint,
    identity: String,
    default_namespace: String,
    otlp: Option<Otlp>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut metrics = Metrics::new();
    let cache = TopologyCache::new(
        CacheConfig::from_settings(&settings),
        CacheMetrics::register(&mut metrics.registry),
    );
    // Every API write leaves from the writer task (spawned below, fenced once the
    // election runs).
    let (writer, writer_task) = Writer::new(
        client.clone(),
        COMPONENT,
        Some(identity.clone()),
        settings.leader_election.write_timeout(),
    );
    let events = writer.events();
    let leader_settings = settings.leader_election.clone();
    let registry = std::mem::take(&mut metrics.registry);
    let telemetry = otlp.map_or_else(Telemetry::off, |o| Telemetry::new(&o, &metrics));
    let shared = Shared::new(settings, cache, metrics, events.clone(), telemetry);

    let readiness = Readiness::not_ready("watches have not listed yet");
    let mut tasks = Supervisor::new();
    tasks.spawn_fallible(
        "http server",
        http.serve_with(
            http::Metrics::from_registry(Arc::new(registry)),
            readiness.clone(),
            crate::debug::router(shared.clone()),
        ),
    );

    watch::spawn_all(&client, &shared, &mut tasks);
    tasks.spawn("resync loop", resync_loop(shared.clone()));
    tasks.spawn("readiness", readiness_loop(shared.clone(), readiness));

    // Always elected, one replica too: see `LeaderElectionSettings`.
    let write_timeout = leader_settings.write_timeout();
    let config = LeaseConfig {
        lease_duration: leader_settings.lease_duration,
        renew_period: leader_settings.renew_period,
        ..LeaseConfig::new(
            leader_settings.lease_namespace.unwrap_or(default_namespace),
            leader_settings.lease_name,
            identity,
        )
    };
    let election = LeaderElector::new(client.clone(), config)?.run();
    let status = election.status();
    tasks.spawn("leader gauge", leader_gauge(status.clone(), shared.clone()));
    tasks.spawn_fallible("leadership", {
        let status = status.clone();
        async move {
            status.lost().await;
            // Every write was fenced to end before the renew deadline; exit so the
            // restarted process starts from a clean cache as a candidate.
            Err::<(), _>("lost the lease")
        }
    });
    // Binds and evictions are sent only through the fence; their timeout is its margin.
    let fence = election.fence();
    debug_assert_eq!(fence.margin(), write_timeout);
    let is_leader: LeaderCheck = Arc::new({
        let fence = fence.clone();
        move || fence.is_open()
    });
    writer.fence_with(is_leader);
    tasks.spawn("writer", writer_task.run());
    tasks.spawn("scheduling loop", scheduler::run(shared, events, writer));

    let outcome = tokio::select! {
        ended = tasks.wait() => Err(ended.into()),
        () = shutdown => Ok(()),
    };
    // No write from now on; those already sent end within the margin.
    step("write fence", write_timeout * 2, fence.close()).await;
    drop(tasks);
    if step("lease step-down", STEP_DOWN_LIMIT, election.step_down())
        .await
        .is_none()
    {
        tracing::warn!("the lease was not released in time; it will expire");
    }
    outcome
}

/// Keeps the `leader` gauge in step with leadership.
async fn leader_gauge(status: LeaderStatus, shared: Arc<Shared>) {
    let mut rx = status.subscribe();
    loop {
        shared
            .metrics
            .leader
            .set(i64::from(*rx.borrow_and_update()));
        if rx.changed().await.is_err() {
            // The sender lives as long as `status`: never happens.
            std::future::pending::<()>().await;
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

/// Ready once every watch has listed, whether leading or standing by (as
/// kube-scheduler does): a standby is healthy and ready to take over, and readiness
/// gates nothing else (no Service routes to the scheduler). A replica that can no
/// longer do its job — a task ended, the lease lost — exits instead of reporting
/// not ready. Runs for the life of the process, like the other supervised tasks.
async fn readiness_loop(shared: Arc<Shared>, readiness: Readiness) {
    while !shared.synced.all() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    readiness.set_ready();
    tracing::info!("caches synced: ready");
    std::future::pending::<()>().await;
}
