//! `tas-scheduler`: schedules pods whose `spec.schedulerName` is its configured name onto
//! nodes whose kubelet Topology Manager will admit them.

use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use tas_runtime::cli::CommonArgs;
use tas_scheduler::config::Settings;

/// NUMA-aware secondary scheduler.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Configuration file (YAML; every field in docs/scheduler-config.md). Without it, the
    /// defaults apply.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Namespace of the leader-election Lease when the config does not set one.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    #[command(flatten)]
    common: CommonArgs,
}

/// Tasks still running once `run` returns (connection drains, a flush cut short) get
/// a second, not forever.
fn main() -> anyhow::Result<()> {
    tas_runtime::shutdown::block_on_bounded(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?,
        run(),
    )
}

async fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    let otlp = args
        .common
        .init_telemetry(tas_scheduler::telemetry::SERVICE_NAME)
        .context("initialising logging")?;
    let settings = match &args.config {
        Some(path) => Settings::load(path)?,
        None => Settings::from_config(&Default::default())?,
    };
    let client = args.common.client().await?;
    let identity = args.common.identity();
    tracing::info!(scheduler = %settings.scheduler_name, %identity, "tas-scheduler starting");
    // `run_until` returns `Ok` on SIGTERM or SIGINT, an error otherwise (a supervised
    // task ended, the lease was lost): `main` then exits non-zero, naming it. Either
    // way it has released the Lease, once no write of its own can still be in flight.
    let http = args.common.endpoint(&client);
    let outcome = tas_scheduler::run::run_until(
        client,
        settings,
        http,
        identity,
        args.namespace,
        otlp.clone(),
        tas_runtime::signals::shutdown(),
    )
    .await;
    // What was recorded but not yet exported goes out before the process ends.
    if let Some(otlp) = otlp {
        otlp.shutdown().await;
    }
    outcome
}
