//! A lighter stack for the tests that put one scheduling question to the kubelet's
//! own code: simulated nodes (the node simulator, the referee as kubelet), one updater
//! agent per node publishing from the referee's podresources socket, and a scheduler
//! of its own name, all in this process and without the operator. Each round gets a
//! namespace and a node group of its own, so rounds on the shared control plane never
//! see each other's pods or nodes.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::{Api, Client};
use tas_nodesim::{Scenario, Simulator};
use tas_testcluster::{free_ports, unique_name, unique_namespace, wait_for};

use crate::stack::StackError;

/// How long the stack waits for every node's NodeResourceTopology.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(180);

/// One round's stack; see the module documentation.
pub struct InProcessStack {
    /// The round's namespace (the scheduler's Lease lives there too).
    pub ns: String,
    /// The node group: scenarios label their nodes with it.
    pub group: String,
    /// The scheduler's name (`spec.schedulerName` of the round's pods).
    pub scheduler: String,
    /// The simulated nodes.
    pub sim: Simulator,
    /// The updater agent of each node.
    updaters: Vec<(String, tokio::task::JoinHandle<()>)>,
    scheduler_task: tokio::task::JoinHandle<()>,
    _work: tempfile::TempDir,
}

impl InProcessStack {
    /// Starts the nodes `scenario(group)` describes, an updater per node, waits for
    /// every NodeResourceTopology, then starts a scheduler whose configuration is
    /// `config` (JSON of the scheduler's config file) with its name and Lease
    /// namespace filled in.
    pub async fn start(
        client: &Client,
        prefix: &str,
        scenario: impl Fn(&str) -> Scenario,
        config: serde_json::Value,
    ) -> Result<Self, StackError> {
        let ns = unique_namespace(client, prefix)
            .await
            .map_err(StackError::ctx("creating the namespace"))?;
        let group = unique_name(prefix);
        let scheduler = unique_name("tas");
        let work = tempfile::tempdir().map_err(StackError::ctx("creating a work dir"))?;
        let sim = Simulator::start(client.clone(), &scenario(&group), work.path())
            .await
            .map_err(StackError::ctx("starting the node simulator"))?;
        let nodes: Vec<String> = sim.nodes().keys().cloned().collect();
        let mut updaters = Vec::new();
        for node in &nodes {
            updaters.push((node.clone(), start_updater(client, &sim, node)?));
        }
        let nrts: Api<tas_api::nrt::v1alpha2::NodeResourceTopology> = Api::all(client.clone());
        for n in &nodes {
            wait_for(format!("the NRT of {n}"), PUBLISH_TIMEOUT, || async {
                Ok::<_, kube::Error>(nrts.get_opt(n).await?.map(|_| ()))
            })
            .await
            .map_err(StackError::ctx("waiting for the NRT objects"))?;
        }
        let mut config = config;
        config["schedulerName"] = scheduler.clone().into();
        config["leaderElection"]["leaseNamespace"] = ns.clone().into();
        let scheduler_task = start_scheduler(client, config, prefix)?;
        Ok(Self {
            ns,
            group,
            scheduler,
            sim,
            updaters,
            scheduler_task,
            _work: work,
        })
    }

    /// Stops the updater agent of `node`: its NodeResourceTopology stays as last
    /// published (the scheduler sees the pods bound since only through its own
    /// reservations) until [`Self::resume_updater`].
    pub fn pause_updater(&mut self, node: &str) {
        self.updaters.retain(|(n, task)| {
            if n == node {
                task.abort();
            }
            n != node
        });
    }

    /// Starts the updater agent of `node` again (after [`Self::pause_updater`]).
    pub fn resume_updater(&mut self, client: &Client, node: &str) -> Result<(), StackError> {
        self.pause_updater(node);
        let task = start_updater(client, &self.sim, node)?;
        self.updaters.push((node.to_owned(), task));
        Ok(())
    }

    /// Stops the scheduler, the updaters and the simulated nodes.
    pub async fn stop(self) {
        self.scheduler_task.abort();
        for (_, u) in self.updaters {
            u.abort();
        }
        self.sim.shutdown().await;
    }
}

/// One updater agent for `node`, with the flags the operator renders by default.
fn start_updater(
    client: &Client,
    sim: &Simulator,
    node: &str,
) -> Result<tokio::task::JoinHandle<()>, StackError> {
    let dir = sim.node_dir(node);
    let args = tas_updater::cli::Args::try_parse_from([
        "tas-updater".to_owned(),
        format!("--node-name={node}"),
        format!("--sysfs-root={}", dir.join("sys").display()),
        format!("--kubelet-config={}", dir.join("config.yaml").display()),
        format!("--podresources-socket={}", sim.socket_path(node).display()),
        // What the pod runner shows a container of the node as its own status.
        format!(
            "--shared-cpus-from={}",
            tas_nodesim::sysfs::shared_pool_status_path(&dir).display()
        ),
        "--debounce=100ms".to_owned(),
        "--refresh-period=5s".to_owned(),
    ])
    .map_err(StackError::ctx("updater flags"))?;
    let config = args
        .agent_config()
        .map_err(StackError::ctx("updater config"))?;
    let podresources = tas_updater::podresources::PodResourcesClient::new(
        tas_updater::podresources::ClientConfig::new(sim.socket_path(node)),
    );
    let agent = tas_updater::agent::Agent::new(
        config,
        client.clone(),
        podresources,
        Arc::new(tas_updater::metrics::Metrics::new()),
        tas_runtime::http::Readiness::not_ready("starting"),
    );
    Ok(tokio::spawn(async move {
        agent.run().await;
    }))
}

/// The scheduler with `config`, its HTTP endpoints on a free local port.
fn start_scheduler(
    client: &Client,
    config: serde_json::Value,
    instance: &str,
) -> Result<tokio::task::JoinHandle<()>, StackError> {
    let parsed = serde_json::from_value(config).map_err(StackError::ctx("scheduler config"))?;
    let settings = tas_scheduler::config::Settings::from_config(&parsed)
        .map_err(StackError::ctx("scheduler settings"))?;
    let port = free_ports(1).map_err(StackError::ctx("a free port"))?[0];
    let http = tas_runtime::http::Endpoint::insecure((std::net::Ipv4Addr::LOCALHOST, port).into());
    let client = client.clone();
    let instance = instance.to_owned();
    Ok(tokio::spawn(async move {
        if let Err(e) =
            tas_scheduler::run::run(client, settings, http, instance, "default".into()).await
        {
            panic!("scheduler stopped: {e}");
        }
    }))
}
