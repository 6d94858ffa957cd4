//! `tas-scheduler`: schedules pods whose `spec.schedulerName` is its configured name onto
//! nodes whose kubelet Topology Manager will admit them.

use anyhow::Context;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use tas_scheduler::config::Settings;

/// NUMA-aware secondary scheduler.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Configuration file (YAML; every field in docs/scheduler-config.md). Without it, the
    /// defaults apply.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Kubeconfig file (default: in-cluster config, or $KUBECONFIG).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    http_address: SocketAddr,
    /// This replica's identity for leader election (default: $POD_NAME, else the host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Namespace of the leader-election Lease when the config does not set one.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, default_value = "json", value_parser = ["json", "text"])]
    log_format: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tas_runtime::telemetry::init_logging(&args.log_level, args.log_format == "json")
        .context("initialising logging")?;
    let settings = match &args.config {
        Some(path) => Settings::load(path)?,
        None => Settings::from_config(&Default::default())?,
    };
    let client = tas_runtime::client::from_kubeconfig(args.kubeconfig.as_deref()).await?;
    let identity = args.identity.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "tas-scheduler".to_owned())
    });
    tracing::info!(scheduler = %settings.scheduler_name, %identity, "tas-scheduler starting");
    tokio::select! {
        r = tas_scheduler::run::run(client, settings, args.http_address, identity, args.namespace) => r?,
        () = tas_runtime::signals::shutdown() => {}
    }
    Ok(())
}
