//! `tas-updater`: keeps this node's NodeResourceTopology object true.

use anyhow::Context;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tas_api::fingerprint::Method;
use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};
use tas_updater::agent::{Agent, AgentConfig};
use tas_updater::http::{self, Readiness};
use tas_updater::metrics::Metrics;
use tas_updater::podresources::{ClientConfig, PodResourcesClient};
use tas_updater::pods_fingerprint::FingerprintPolicy;
use tas_updater::triggers::Mode;

/// Publishes this node's NUMA topology and free resources as a NodeResourceTopology object.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// This node's name (from the downward API in a DaemonSet).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// Where the host's /sys is visible.
    #[arg(long, default_value = "/sys")]
    sysfs_root: PathBuf,
    /// The kubelet's podresources socket.
    #[arg(long, default_value = "/var/lib/kubelet/pod-resources/kubelet.sock")]
    podresources_socket: PathBuf,
    /// The kubelet's configuration file (Topology Manager policy/scope, CPU/memory manager
    /// policies, reserved CPUs). A missing file means kubelet defaults.
    #[arg(long, default_value = "/var/lib/kubelet/config.yaml")]
    kubelet_config: PathBuf,
    /// Publish this Topology Manager policy instead of the kubelet config's.
    #[arg(long, value_parser = parse_policy)]
    topology_manager_policy: Option<TopologyManagerPolicy>,
    /// Publish this Topology Manager scope instead of the kubelet config's.
    #[arg(long, value_parser = parse_scope)]
    topology_manager_scope: Option<TopologyManagerScope>,
    /// What triggers a publish.
    #[arg(long, value_enum, default_value = "periodic-and-events")]
    refresh_mode: Mode,
    /// Interval of the periodic re-check (Go duration).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    refresh_period: Duration,
    /// Coalescing window for pod events (Go duration).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    debounce: Duration,
    /// Re-apply unchanged content this often, repairing edits by others (Go duration).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    reapply_interval: Duration,
    /// Pods covered by the fingerprint: all, with-exclusive-resources or disabled.
    #[arg(long, default_value = "with-exclusive-resources")]
    pods_fingerprint: String,
    /// Pods left out of the fingerprint, `namespace/name` globs (repeatable).
    #[arg(long)]
    exclude_pods: Vec<String>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    http_address: SocketAddr,
    /// Kubeconfig file (default: in-cluster config, or $KUBECONFIG).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, default_value = "json", value_parser = ["json", "text"])]
    log_format: String,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    tas_api::duration::parse(s).map_err(|e| e.to_string())
}
fn parse_policy(s: &str) -> Result<TopologyManagerPolicy, String> {
    s.parse().map_err(|e| format!("{e}"))
}
fn parse_scope(s: &str) -> Result<TopologyManagerScope, String> {
    s.parse().map_err(|e| format!("{e}"))
}

/// One thread: the agent does little work, and a small footprint matters on every node.
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(&args.log_level, &args.log_format);
    let method = match args.pods_fingerprint.as_str() {
        "disabled" => None,
        other => Some(
            other
                .parse::<Method>()
                .map_err(|e| anyhow::anyhow!("--pods-fingerprint: {e}"))?,
        ),
    };
    let fingerprint =
        FingerprintPolicy::new(method, &args.exclude_pods).context("--exclude-pods")?;
    let client = kube_client(args.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::new());
    let readiness = Arc::new(Readiness::new("no NodeResourceTopology published yet"));
    let http_task = tokio::spawn(http::serve(
        args.http_address,
        metrics.clone(),
        readiness.clone(),
    ));
    let podresources = PodResourcesClient::new(ClientConfig::new(&args.podresources_socket));
    let agent = Agent::new(
        AgentConfig {
            node_name: args.node_name.clone(),
            sysfs_root: args.sysfs_root,
            kubelet_config: args.kubelet_config,
            policy_override: args.topology_manager_policy,
            scope_override: args.topology_manager_scope,
            mode: args.refresh_mode,
            period: args.refresh_period,
            debounce: args.debounce,
            reapply_interval: args.reapply_interval,
            fingerprint,
        },
        client,
        podresources,
        metrics,
        readiness,
    );
    tracing::info!(node = %args.node_name, "tas-updater starting");
    tokio::select! {
        () = agent.run() => {}
        r = http_task => {
            r.context("HTTP server task")?.with_context(|| format!("serving HTTP on {}", args.http_address))?;
        }
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
        () = sigterm() => tracing::info!("terminating"),
    }
    Ok(())
}

async fn sigterm() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

async fn kube_client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no in-cluster config and no kubeconfig")?,
    };
    Ok(kube::Client::try_from(config)?)
}

fn init_logging(level: &str, format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}
