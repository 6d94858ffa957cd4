//! `tas-nodesim`: plays the kubelet for the kwok nodes of a scenario until SIGTERM.
//!
//! Creates the scenario's Nodes, writes each node's sysfs tree and kubelet config under
//! `<work-dir>/<node>/`, serves its podresources API on
//! `<work-dir>/<node>/pod-resources/kubelet.sock`, then admits or rejects the pods
//! labelled `tas.dev/node-sim=true` bound to those nodes. Prints
//! `tas-nodesim ready: <n> nodes` on stdout once it has handled the existing pods.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tas_nodesim::{Scenario, Simulator};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// Plays the kubelet for the simulated NUMA nodes of a scenario, on a cluster where kwok
/// manages the nodes.
///
/// Creates the scenario's Nodes (kwok-managed), writes each node's sysfs tree and kubelet
/// configuration under <work-dir>/<node>/, serves its kubelet podresources API on
/// <work-dir>/<node>/pod-resources/kubelet.sock, and admits or rejects the pods labelled
/// tas.dev/node-sim=true that are bound to those nodes as the kubelet's Topology, CPU,
/// memory and device managers would (rejected: Failed, TopologyAffinityError). Prints
/// "tas-nodesim ready: <n> nodes" once it has handled the existing pods, then runs until
/// SIGTERM or Ctrl-C. Scenario format: nodesim/README.md.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Scenario file (YAML).
    #[arg(long)]
    scenario: PathBuf,
    /// Kubeconfig; without it, `$KUBECONFIG`, `~/.kube/config` or the in-cluster config.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Directory for the nodes' files and sockets.
    #[arg(long)]
    work_dir: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let scenario = Scenario::load(&args.scenario)?;
    let client = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            let config =
                Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
            Client::try_from(config)?
        }
        None => Client::try_default().await?,
    };
    std::fs::create_dir_all(&args.work_dir)
        .with_context(|| format!("creating {}", args.work_dir.display()))?;

    let mut terminate = signal(SignalKind::terminate())?;
    let simulator = Simulator::start(client, &scenario, &args.work_dir).await?;
    println!("tas-nodesim ready: {} nodes", simulator.nodes().len());
    std::io::stdout().flush()?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    simulator.shutdown().await;
    Ok(())
}
