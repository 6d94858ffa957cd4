//! `tas-updater`: keeps this node's NodeResourceTopology object true.

use anyhow::Context;
use clap::Parser;
use std::sync::Arc;
use tas_runtime::http::{self, Readiness};
use tas_runtime::supervise::Supervisor;
use tas_runtime::telemetry::Otlp;
use tas_updater::agent::Agent;
use tas_updater::cli::Args;
use tas_updater::metrics::Metrics;
use tas_updater::podresources::{ClientConfig, PodResourcesClient};

/// `service.name` of what the agent exports over OTLP.
const SERVICE_NAME: &str = "tas-updater";

/// One thread runs the agent: it does little work, and a small footprint matters on
/// every node. File reads (sysfs, the kubelet config) run on at most one more.
/// Tasks still running once `run` returns (a blocking file read, a connection drain)
/// get a second, not forever.
fn main() -> anyhow::Result<()> {
    tas_runtime::shutdown::block_on_bounded(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(1)
            .build()
            .context("starting the async runtime")?,
        run(Args::parse()),
    )
}

async fn run(args: Args) -> anyhow::Result<()> {
    let otlp = args
        .common
        .init_telemetry(SERVICE_NAME)
        .context("initialising logging")?;
    let outcome = agent(args, otlp.as_ref()).await;
    // What was recorded but not yet exported goes out before the process ends.
    if let Some(otlp) = otlp {
        otlp.shutdown().await;
    }
    outcome
}

async fn agent(args: Args, otlp: Option<&Otlp>) -> anyhow::Result<()> {
    let config = args.agent_config()?;
    let client = args.common.client().await?;
    let metrics = Arc::new(otlp.map_or_else(Metrics::new, |o| Metrics::with_meter(&o.meter())));
    let readiness = Readiness::not_ready("no NodeResourceTopology published yet");
    let address = args.common.http_address;
    let rendered = metrics.clone();
    let mut tasks = Supervisor::new();
    tasks.spawn_fallible(
        format!("http server on {address}"),
        args.common.endpoint(&client).serve(
            http::Metrics::from_fn(move || rendered.render()),
            readiness.clone(),
        ),
    );
    let podresources = PodResourcesClient::new(ClientConfig::new(&args.podresources_socket));
    let agent = Agent::new(config, client, podresources, metrics, readiness);
    let identity = args.common.identity();
    tracing::info!(node = %args.node_name, %identity, "tas-updater starting");
    // Any task ending (the agent's own or the HTTP server) exits non-zero, naming it.
    tokio::select! {
        ended = agent.run() => Err(ended.into()),
        ended = tasks.wait() => Err(ended.into()),
        () = tas_runtime::signals::shutdown() => Ok(()),
    }
}
