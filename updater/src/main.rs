//! `tas-updater`: keeps this node's NodeResourceTopology object true.

use anyhow::Context;
use clap::Parser;
use std::sync::Arc;
use tas_updater::agent::Agent;
use tas_updater::cli::Args;
use tas_updater::http::{self, Readiness};
use tas_updater::metrics::Metrics;
use tas_updater::podresources::{ClientConfig, PodResourcesClient};

/// One thread: the agent does little work, and a small footprint matters on every node.
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(&args.log_level, &args.log_format);
    let config = args.agent_config()?;
    let client = kube_client(args.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::new());
    let readiness = Arc::new(Readiness::new("no NodeResourceTopology published yet"));
    let http_task = tokio::spawn(http::serve(
        args.http_address,
        metrics.clone(),
        readiness.clone(),
    ));
    let podresources = PodResourcesClient::new(ClientConfig::new(&args.podresources_socket));
    let agent = Agent::new(config, client, podresources, metrics, readiness);
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
