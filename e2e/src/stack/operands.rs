//! The operator's operands, run in-process with exactly what the operator rendered: one
//! updater per simulated node from its DaemonSet pod's command line, and the scheduler
//! from its Deployment's arguments and ConfigMap.

use super::StackError;
use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ListParams;
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tas_nodesim::Simulator;
use tas_runtime::http::Readiness;
use tas_updater::agent::Agent;
use tas_updater::metrics::Metrics;
use tas_updater::podresources::{ClientConfig, PodResourcesClient};
use tokio::task::JoinHandle;

/// One node's updater.
pub struct UpdaterHandle {
    /// The flags it runs with (as rendered, host paths mapped into the simulated node).
    pub args: Vec<String>,
    task: JoinHandle<()>,
}

/// The running operands.
pub struct Operands {
    client: Client,
    namespace: String,
    /// Updaters by node.
    pub updaters: BTreeMap<String, UpdaterHandle>,
    /// The scheduler's validated settings, from the operator's ConfigMap.
    pub scheduler_settings: tas_scheduler::config::Settings,
    scheduler: Option<JoinHandle<()>>,
    generation: u32,
}

impl Drop for Operands {
    fn drop(&mut self) {
        for u in self.updaters.values() {
            u.task.abort();
        }
        if let Some(s) = &self.scheduler {
            s.abort();
        }
    }
}

/// Map a host path of a simulated node into its directory.
fn host_to_sim(host: &str, node_dir: &Path) -> PathBuf {
    if host == "/sys" || host.starts_with("/sys/") {
        return node_dir.join(host.trim_start_matches('/'));
    }
    if let Some(i) = host.find("/pod-resources") {
        // The directory, or a file in it (the socket).
        return node_dir.join(host[i..].trim_start_matches('/'));
    }
    if host.ends_with("config.yaml") {
        return node_dir.join("config.yaml");
    }
    node_dir.join(host.trim_start_matches('/'))
}

/// The container's flags with every path under a hostPath mount rewritten to the
/// simulated node's files; `--http-address` dropped (in-process agents serve no HTTP).
fn updater_args(pod: &Pod, node_dir: &Path) -> Result<Vec<String>, StackError> {
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| StackError("updater pod without spec".into()))?;
    let container = spec
        .containers
        .first()
        .ok_or_else(|| StackError("updater pod without containers".into()))?;
    let mut mounts: Vec<(String, String)> = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let host = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == m.name)
            .and_then(|v| v.host_path.as_ref())
            .map(|h| h.path.clone());
        if let Some(host) = host {
            mounts.push((m.mount_path.clone(), host));
        }
    }
    let mut out = Vec::new();
    for arg in container.args.iter().flatten() {
        if arg.starts_with("--http-address") {
            continue;
        }
        let mapped = match arg.split_once('=') {
            Some((flag, value)) => match mounts.iter().find(|(m, _)| value.starts_with(m.as_str()))
            {
                Some((m, host)) => {
                    let host_path = format!("{host}{}", &value[m.len()..]);
                    format!("{flag}={}", host_to_sim(&host_path, node_dir).display())
                }
                None => arg.clone(),
            },
            None => arg.clone(),
        };
        out.push(mapped);
    }
    Ok(out)
}

impl Operands {
    /// Wait for the operator's operands and start them for every simulated node.
    pub async fn start(
        client: &Client,
        sim: &Simulator,
        namespace: &str,
        work_dir: &Path,
    ) -> Result<Self, StackError> {
        let settings = scheduler_settings(client, namespace, work_dir).await?;
        let mut operands = Self {
            client: client.clone(),
            namespace: namespace.to_owned(),
            updaters: BTreeMap::new(),
            scheduler_settings: settings,
            scheduler: None,
            generation: 0,
        };
        for node in sim.nodes().keys() {
            operands.start_updater(sim, node).await?;
        }
        operands.start_scheduler();
        Ok(operands)
    }

    /// (Re)start the updater of `node` from its DaemonSet pod.
    pub async fn start_updater(&mut self, sim: &Simulator, node: &str) -> Result<(), StackError> {
        if let Some(old) = self.updaters.remove(node) {
            old.task.abort();
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = ListParams::default()
            .labels("app.kubernetes.io/name=tas-updater")
            .fields(&format!("spec.nodeName={node}"));
        let pod = tas_testcluster::wait_for(
            format!("the updater pod on {node}"),
            Duration::from_secs(60),
            || async { Ok::<_, kube::Error>(pods.list(&lp).await?.items.into_iter().next()) },
        )
        .await
        .map_err(StackError::ctx("waiting for the DaemonSet"))?;
        let args = updater_args(&pod, &sim.node_dir(node))?;
        let mut argv = vec!["tas-updater".to_owned()];
        argv.extend(args.iter().cloned());
        argv.push(format!("--node-name={node}"));
        let parsed = tas_updater::cli::Args::try_parse_from(&argv)
            .map_err(|e| StackError(format!("the DaemonSet's flags {args:?} do not parse: {e}")))?;
        let config = parsed
            .agent_config()
            .map_err(StackError::ctx("the DaemonSet's flags"))?;
        let podres = PodResourcesClient::new(ClientConfig::new(&parsed.podresources_socket));
        let agent = Agent::new(
            config,
            self.client.clone(),
            podres,
            Arc::new(Metrics::new()),
            Readiness::not_ready("starting"),
        );
        self.updaters.insert(
            node.to_owned(),
            UpdaterHandle {
                args,
                task: tokio::spawn(agent.run()),
            },
        );
        Ok(())
    }

    /// Stop the updater of `node` (a node agent crash).
    pub fn stop_updater(&mut self, node: &str) {
        if let Some(u) = self.updaters.remove(node) {
            u.task.abort();
        }
    }

    /// (Re)start the scheduler; a restart drops every in-memory state, as a crash would.
    pub fn start_scheduler(&mut self) {
        if let Some(old) = self.scheduler.take() {
            old.abort();
        }
        self.generation += 1;
        let (client, settings) = (self.client.clone(), self.scheduler_settings.clone());
        let identity = format!("e2e-scheduler-{}", self.generation);
        let namespace = self.namespace.clone();
        self.scheduler = Some(tokio::spawn(async move {
            let addr = ([127, 0, 0, 1], 0).into();
            if let Err(e) =
                tas_scheduler::run::run(client, settings, addr, identity, namespace).await
            {
                tracing::error!(error = %e, "the in-process scheduler stopped");
            }
        }));
    }
}

/// The scheduler's settings, read the way the Deployment's pod would: the `--config`
/// argument resolved through its ConfigMap volume.
async fn scheduler_settings(
    client: &Client,
    namespace: &str,
    work_dir: &Path,
) -> Result<tas_scheduler::config::Settings, StackError> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployment = tas_testcluster::wait_for(
        "the scheduler Deployment",
        Duration::from_secs(60),
        || async { deployments.get_opt("tas-scheduler").await },
    )
    .await
    .map_err(StackError::ctx("waiting for the scheduler"))?;
    let pod_spec = deployment
        .spec
        .and_then(|s| s.template.spec)
        .ok_or_else(|| StackError("scheduler Deployment without a pod template".into()))?;
    let container = pod_spec
        .containers
        .first()
        .ok_or_else(|| StackError("scheduler Deployment without containers".into()))?;
    let config_arg = container
        .args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix("--config="))
        .ok_or_else(|| StackError("the scheduler Deployment passes no --config".into()))?;
    let (mount, volume) = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| config_arg.starts_with(&m.mount_path))
        .map(|m| (m.mount_path.clone(), m.name.clone()))
        .ok_or_else(|| StackError(format!("no volume holds {config_arg}")))?;
    let cm_name = pod_spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == volume)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
        .ok_or_else(|| StackError(format!("volume {volume} is not a ConfigMap")))?;
    let key = config_arg[mount.len()..].trim_start_matches('/');
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = cms
        .get(&cm_name)
        .await
        .map_err(StackError::ctx("reading the scheduler ConfigMap"))?;
    let text = cm
        .data
        .and_then(|d| d.get(key).cloned())
        .ok_or_else(|| StackError(format!("ConfigMap {cm_name} has no key {key}")))?;
    let path = work_dir.join("scheduler").join(key);
    std::fs::create_dir_all(work_dir.join("scheduler"))
        .map_err(StackError::ctx("scheduler dir"))?;
    std::fs::write(&path, text).map_err(StackError::ctx("writing the scheduler config"))?;
    tas_scheduler::config::Settings::load(&path)
        .map_err(StackError::ctx("the rendered scheduler config"))
}
