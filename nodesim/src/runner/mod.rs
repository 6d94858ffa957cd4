//! The pod runner: TAS's own pods, bound to simulated nodes, run as real processes
//! started from their pod specs, as a kubelet with a container runtime would run them.
//!
//! Data flow: [`Runner::start`] gives every simulated node a network namespace
//! ([`network`]) and watches all pods. A pod bound to one of its nodes whose image is
//! TAS's ([`images`]; kwok leaves those alone) gets a worker ([`pod`]) that materialises
//! its volumes in a sandbox ([`volumes`], [`sandbox`]: ConfigMaps, the pod's own
//! ServiceAccount token by TokenRequest, hostPaths into the node's files) and a
//! supervisor per container ([`container`]) that starts the binary cargo built in the
//! pod's own network namespace and a private mount namespace rooted in the sandbox, with the
//! container's command, args, env ([`env`]) and user; follows its readiness and liveness
//! probes ([`probe`]); restarts it with the kubelet's back-off; and on deletion stops it
//! gracefully and removes the pod. The pod status follows the process ([`status`]).
//! Problems with the spec become waiting reasons, never a panic.
//!
//! Tests get process controls by pod: [`Runner::signal`] (kill, freeze, resume),
//! [`Runner::log`], [`Runner::metrics`], [`Runner::processes`]. Every process's pid,
//! and each namespace holder's, is appended to the test cluster's watchdog file, so
//! nothing outlives the test process.

pub mod container;
pub mod env;
pub mod images;
pub mod network;
pub mod pod;
pub mod probe;
pub mod sandbox;
pub mod status;
pub mod volumes;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use images::{Images, is_runner_pod};
use status::{ContainerView, PodView, State};

/// Why the runner could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Setting up a pod's network.
    #[error("node network: {0}")]
    Network(String),
    /// Recording a pid for the watchdog.
    #[error("recording a pid for the watchdog: {0}")]
    Pids(std::io::Error),
}

/// A problem with a pod's spec or what it refers to, shown as the container's waiting
/// reason (`CreateContainerConfigError`, `ErrImagePull`, ...) and message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct PodConfigError {
    /// CamelCase reason.
    pub reason: String,
    /// What to fix.
    pub message: String,
}

impl PodConfigError {
    /// A reason and message.
    pub fn new(reason: &str, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A volume that cannot be set up (the kubelet's `FailedMount`).
    pub fn mount(volume: &str, message: impl std::fmt::Display) -> Self {
        Self::new(
            "CreateContainerConfigError",
            format!("MountVolume.SetUp failed for volume \"{volume}\": {message}"),
        )
    }

    /// A volume type the runner does not support.
    pub fn unsupported(volume: &str, kind: &str) -> Self {
        Self::new(
            "CreateContainerConfigError",
            format!(
                "volume \"{volume}\": type {kind} is not supported by the tas-nodesim pod runner"
            ),
        )
    }
}

/// Appends `pid` to the watchdog's file.
pub fn track_pid(file: &Path, pid: u32) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    writeln!(f, "{pid}")
}

/// How to run pods.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The API server (pods reach it through their own forwarder).
    pub api_server: SocketAddr,
    /// Binaries by image name.
    pub images: Images,
    /// The test cluster's watchdog file (`TestCluster::watchdog_pids_file`).
    pub pids_file: Option<PathBuf>,
    /// The nodes: name and directory (as the simulator wrote it).
    pub nodes: Vec<(String, PathBuf)>,
    /// Services on the test host that every pod reaches by name.
    pub services: Vec<HostService>,
    /// Pods that reach the API server somewhere else than `api_server` (the first
    /// route matching a pod's labels wins).
    pub api_routes: Vec<ApiRoute>,
}

/// Pods whose labels include every one of `labels` reach the API server at `target`
/// instead of the runner's `api_server` — a fault proxy in front of it, say. Their
/// forwarder connects there; nothing else changes for them (the same host name,
/// certificate and token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRoute {
    /// Labels a pod must carry, all of them.
    pub labels: BTreeMap<String, String>,
    /// Where those pods' API connections go.
    pub target: SocketAddr,
}

impl ApiRoute {
    /// Whether a pod with `labels` takes this route.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    }
}

/// A server on the test host that pods reach by name, as they would reach a cluster
/// Service through its DNS name: `name` resolves to the pod's gateway (its
/// `/etc/hosts`), where a forwarder listening on `port` passes the bytes on to `target`
/// (typically a loopback address, which no pod's namespace reaches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostService {
    /// The host name pods use (e.g. `otel-collector.monitoring`).
    pub name: String,
    /// The port pods connect to on it.
    pub port: u16,
    /// Where the connections go.
    pub target: SocketAddr,
}

/// A simulated node as the runner sees it.
#[derive(Debug, Clone)]
pub struct NodeCtx {
    /// Its files.
    pub dir: PathBuf,
}

/// What every worker shares.
pub struct Ctx {
    /// Admin client (the kubelet's role: read ConfigMaps, request tokens, write status).
    pub client: Client,
    /// Binaries.
    pub images: Images,
    /// Watchdog file.
    pub pids_file: Option<PathBuf>,
    /// Nodes by name; [`Runner::add_node`] and [`Runner::remove_node`] change them.
    pub nodes: RwLock<BTreeMap<String, NodeCtx>>,
    /// The API server, for the pods' forwarders.
    pub api_server: SocketAddr,
    /// Host services, for the pods' forwarders and `/etc/hosts`.
    pub services: Vec<HostService>,
    /// Pods that reach the API server elsewhere.
    pub api_routes: Vec<ApiRoute>,
    /// The runner's `10.<subnet>.0.0/16`.
    pub subnet: u8,
    /// Pod networks handed out so far.
    pub next_network: std::sync::atomic::AtomicUsize,
}

impl Ctx {
    /// Where `pod` reaches the API server: the first matching route's target, or the
    /// API server itself.
    pub fn api_server_for(&self, pod: &Pod) -> SocketAddr {
        let labels = pod.metadata.labels.as_ref();
        self.api_routes
            .iter()
            .find(|r| r.matches(labels))
            .map_or(self.api_server, |r| r.target)
    }

    /// The node `name`, while it is the runner's.
    pub fn node(&self, name: &str) -> Option<NodeCtx> {
        self.nodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }
}

struct PodHandle {
    view: Arc<Mutex<PodView>>,
    updates: watch::Sender<Pod>,
    task: JoinHandle<()>,
}

type Pods = Arc<Mutex<BTreeMap<String, PodHandle>>>;

/// A process the runner started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Node.
    pub node: String,
    /// Container.
    pub container: String,
    /// OS pid.
    pub pid: u32,
}

/// Signals tests send to a pod's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGKILL: a crash.
    Kill,
    /// SIGSTOP: a frozen process.
    Freeze,
    /// SIGCONT.
    Resume,
    /// SIGTERM.
    Terminate,
}

/// The running pod runner. Dropping it kills every process and frees the namespaces.
pub struct Runner {
    ctx: Arc<Ctx>,
    pods: Pods,
    watch: JoinHandle<()>,
}

impl Runner {
    /// Picks the runner's subnet and starts running pods.
    pub async fn start(client: Client, config: RunnerConfig) -> Result<Self, RunnerError> {
        let subnet = network::pick_subnet().await?;
        let nodes = config
            .nodes
            .iter()
            .map(|(name, dir)| (name.clone(), NodeCtx { dir: dir.clone() }))
            .collect();
        let ctx = Arc::new(Ctx {
            client,
            images: config.images,
            pids_file: config.pids_file,
            nodes: RwLock::new(nodes),
            api_server: config.api_server,
            services: config.services,
            api_routes: config.api_routes,
            subnet,
            next_network: Default::default(),
        });
        let pods: Pods = Arc::default();
        let watch = tokio::spawn(watch_pods(ctx.clone(), pods.clone()));
        Ok(Self { ctx, pods, watch })
    }

    /// Runs the pods bound to node `name` (files under `dir`) from now on, starting
    /// with those bound to it already (a node registering again under its name runs
    /// the pods the API server still binds to it, as a kubelet does). Call it before
    /// the Node is created, so that no pod bound to it in between is missed.
    pub async fn add_node(&self, name: &str, dir: &Path) -> Result<(), kube::Error> {
        self.ctx
            .nodes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                name.to_owned(),
                NodeCtx {
                    dir: dir.to_owned(),
                },
            );
        let api: Api<Pod> = Api::all(self.ctx.client.clone());
        let params = kube::api::ListParams::default().fields(&format!("spec.nodeName={name}"));
        for pod in api.list(&params).await?.items {
            upsert(&self.ctx, &self.pods, pod);
        }
        Ok(())
    }

    /// Forgets node `name` as a machine that is gone: every process of the pods bound
    /// to it dies at once (SIGKILL, no graceful stop, no status written), and later
    /// pods bound to that name are ignored until [`Runner::add_node`].
    pub async fn remove_node(&self, name: &str) {
        self.ctx
            .nodes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
        let gone: Vec<PodHandle> = {
            let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            let uids: Vec<String> = pods
                .iter()
                .filter(|(_, h)| h.view.lock().unwrap_or_else(PoisonError::into_inner).node == name)
                .map(|(uid, _)| uid.clone())
                .collect();
            uids.iter().filter_map(|uid| pods.remove(uid)).collect()
        };
        for h in gone {
            // Aborting a worker drops its supervisors' children, which kills them.
            h.task.abort();
            let _ = h.task.await;
        }
    }

    fn find(&self, namespace: &str, pod: &str) -> Option<Arc<Mutex<PodView>>> {
        let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        pods.values().map(|h| h.view.clone()).find(|v| {
            let v = v.lock().unwrap_or_else(PoisonError::into_inner);
            v.namespace == namespace && v.name == pod
        })
    }

    /// Every running process.
    pub fn processes(&self) -> Vec<Process> {
        let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for h in pods.values() {
            let v = h.view.lock().unwrap_or_else(PoisonError::into_inner);
            for c in &v.containers {
                if let Some(pid) = c.pid {
                    out.push(Process {
                        namespace: v.namespace.clone(),
                        pod: v.name.clone(),
                        node: v.node.clone(),
                        container: c.name.clone(),
                        pid,
                    });
                }
            }
        }
        out.sort_by(|a, b| (&a.namespace, &a.pod).cmp(&(&b.namespace, &b.pod)));
        out
    }

    /// The pid of the pod's first running container.
    pub fn pid(&self, namespace: &str, pod: &str) -> Option<u32> {
        let view = self.find(namespace, pod)?;
        let v = view.lock().unwrap_or_else(PoisonError::into_inner);
        v.containers.iter().find_map(|c| c.pid)
    }

    /// Sends `signal` to the pod's running containers.
    pub async fn signal(&self, namespace: &str, pod: &str, signal: Signal) -> Result<(), String> {
        let view = self
            .find(namespace, pod)
            .ok_or_else(|| format!("the runner has no pod {namespace}/{pod}"))?;
        let pids: Vec<u32> = view
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .containers
            .iter()
            .filter_map(|c| c.pid)
            .collect();
        if pids.is_empty() {
            return Err(format!("pod {namespace}/{pod} has no running process"));
        }
        let name = match signal {
            Signal::Kill => "KILL",
            Signal::Freeze => "STOP",
            Signal::Resume => "CONT",
            Signal::Terminate => "TERM",
        };
        for pid in pids {
            container::signal(pid, name).await?;
        }
        Ok(())
    }

    /// The pod's log (every container, every run).
    pub fn log(&self, namespace: &str, pod: &str) -> Result<String, String> {
        let view = self
            .find(namespace, pod)
            .ok_or_else(|| format!("the runner has no pod {namespace}/{pod}"))?;
        let logs: Vec<PathBuf> = view
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .containers
            .iter()
            .map(|c| c.log.clone())
            .collect();
        Ok(logs
            .iter()
            .map(|l| std::fs::read_to_string(l).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// `GET /metrics` over HTTPS from the pod's first declared container port, as a
    /// scraper with the bearer `token` would.
    pub async fn metrics(&self, namespace: &str, pod: &str, token: &str) -> Result<String, String> {
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), namespace);
        let object = api.get(pod).await.map_err(|e| e.to_string())?;
        let port = object
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .map(|p| p.container_port)
            .next()
            .ok_or_else(|| format!("pod {namespace}/{pod} declares no port"))?;
        let view = self
            .find(namespace, pod)
            .ok_or_else(|| format!("the runner has no pod {namespace}/{pod}"))?;
        let ip = view.lock().unwrap_or_else(PoisonError::into_inner).ip;
        let port = u16::try_from(port).map_err(|e| e.to_string())?;
        let (code, body) = probe::get_tls(
            IpAddr::V4(ip),
            port,
            "/metrics",
            Some(token),
            Duration::from_secs(5),
        )
        .await?;
        (code == 200)
            .then_some(body)
            .ok_or_else(|| format!("/metrics answered {code}"))
    }

    /// Prints the last `lines` of every pod's log to stderr.
    pub fn print_logs(&self, lines: usize) {
        let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        for h in pods.values() {
            let v = h.view.lock().unwrap_or_else(PoisonError::into_inner);
            for c in &v.containers {
                let text = std::fs::read_to_string(&c.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(lines).collect();
                eprintln!(
                    "--- last {lines} lines of pod {}/{} container {} (node {}) ---",
                    v.namespace, v.name, c.name, v.node
                );
                for l in tail.iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
    }

    /// A guard that prints the pods' logs if the current test panics while it is held.
    pub fn log_guard(&self) -> LogGuard<'_> {
        LogGuard { runner: self }
    }

    /// Stops every pod's processes (SIGKILL) and frees the networks.
    pub async fn shutdown(self) {
        self.watch.abort();
        let handles: Vec<PodHandle> =
            std::mem::take(&mut *self.pods.lock().unwrap_or_else(PoisonError::into_inner))
                .into_values()
                .collect();
        for h in handles {
            h.task.abort();
            let _ = h.task.await;
        }
    }
}

/// How many of each container's last log lines a failing test prints (default 40).
pub const LOG_LINES_ENV: &str = "TAS_POD_LOG_LINES";

/// See [`Runner::log_guard`].
pub struct LogGuard<'a> {
    runner: &'a Runner,
}

impl Drop for LogGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let lines = std::env::var(LOG_LINES_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(40);
            self.runner.print_logs(lines);
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.watch.abort();
        // Aborting a worker drops its supervisors' children, which kills them.
        for h in self
            .pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            h.task.abort();
        }
    }
}

async fn watch_pods(ctx: Arc<Ctx>, pods: Pods) {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Apply(pod) | Event::InitApply(pod)) => upsert(&ctx, &pods, pod),
            Ok(Event::Delete(pod)) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                // Removed without us: drop the worker (its processes die with it).
                if let Some(h) = pods
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&uid)
                {
                    h.task.abort();
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "pod watch");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

fn upsert(ctx: &Arc<Ctx>, pods: &Pods, pod: Pod) {
    let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
        return;
    };
    if !is_runner_pod(&pod) {
        return;
    }
    let Some(node_ctx) = ctx.node(&node) else {
        return;
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let mut map = pods.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(h) = map.get(&uid) {
        h.updates.send_replace(pod);
        return;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return;
    }
    let dir = pod::sandbox_dir(&node_ctx.dir, &pod);
    let containers = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| ContainerView {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            pid: None,
            log: dir.join(format!("{}.log", c.name)),
            restarts: 0,
            ready: false,
            state: State::Waiting {
                reason: "ContainerCreating".into(),
                message: String::new(),
            },
            last: None,
            binary: None,
        })
        .collect();
    let view = Arc::new(Mutex::new(PodView {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        node: node.clone(),
        ip: std::net::Ipv4Addr::UNSPECIFIED,
        gateway: std::net::Ipv4Addr::UNSPECIFIED,
        netns: None,
        containers,
        start_time: Time(k8s_openapi::jiff::Timestamp::now()),
        phase: None,
    }));
    let (updates, rx) = watch::channel(pod);
    let task = tokio::spawn(pod::run(ctx.clone(), node, rx, view.clone()));
    map.insert(
        uid,
        PodHandle {
            view,
            updates,
            task,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_route_takes_the_pods_carrying_all_its_labels() {
        let route = ApiRoute {
            labels: BTreeMap::from([
                ("app".to_owned(), "s".to_owned()),
                ("tier".to_owned(), "x".to_owned()),
            ]),
            target: "127.0.0.1:1".parse().unwrap(),
        };
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(route.matches(Some(&labels(&[("app", "s"), ("tier", "x"), ("o", "1")]))));
        assert!(!route.matches(Some(&labels(&[("app", "s")]))));
        assert!(!route.matches(Some(&labels(&[("app", "s"), ("tier", "y")]))));
        assert!(!route.matches(None));
    }
}
