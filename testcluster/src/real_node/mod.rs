//! Real nodes for tests: containerd and a real kubelet, built from the pinned
//! Kubernetes modules, joined to a [`TestCluster`], with a fake 2-NUMA sysfs view.
//!
//! # How a node is isolated
//! Each node runs `unshare --pid --fork --kill-child --mount --net --mount-proc` with
//! `node.sh` as PID 1 of the new namespaces. That script bind-mounts directories of the
//! node's own over `/run`, `/var/lib` and `/var/log` (where the kubelet, containerd and
//! CNI write whatever their configuration says), bind-mounts a rewritten copy of
//! `/sys/devices/system/{node,cpu}` (node0 = cpu0, node1 = cpu1, half the memory each),
//! puts the node's address on a veth pair whose both ends stay in the namespace (the
//! kubelet refuses a loopback node IP), then starts containerd and the kubelet there.
//! containerd and the kubelet share that mount namespace, so runc sees the kubelet's
//! volume mounts. Pod addresses come from a CNI bridge in the same namespace, without
//! masquerading: no address, route, iptables chain or `net.*` sysctl reaches the host.
//!
//! Stopping is one SIGKILL: `unshare` dies, `--kill-child` kills PID 1 of the node's
//! PID namespace, and the kernel then kills every process in it (containerd, the
//! kubelet, every shim and container). The mounts go with the mount namespace.
//!
//! # How the kubelet reaches the API server
//! kube-apiserver listens on `127.0.0.1` of the host's network namespace. A
//! [`forwarder`] listens on the node's own loopback (its socket created from a thread
//! that entered the node's namespace) and connects to the API server from the host's:
//! the kubelet's kubeconfig says `https://127.0.0.1:<port>`, a name the API server's
//! self-signed certificate already covers, so neither its certificate nor its flags
//! change. The API server does not reach the kubelet (no `kubectl logs`/`exec` yet).
//!
//! # What is still global, and restored
//! Kernel sysctls the kubelet sets and the `kubepods` cgroups ([`host_state`]). They are
//! recorded before the node starts; a restore script runs when the node is dropped and,
//! if the test process dies first, from the cluster's watchdog, which runs every script
//! in `<cluster>/cleanup.d/` after it has killed the cluster's processes.
//!
//! Only one real node runs at a time per machine: nodes would share the `kubepods`
//! cgroups and the two CPUs.

pub mod config;
mod error;
mod forwarder;
pub mod host_state;
mod pod;
mod prerequisites;

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;

pub use error::RealNodeError;
pub use host_state::HostState;
pub use pod::guaranteed_pause_pod;

use crate::{TestCluster, tail_lines};
use forwarder::Forwarder;
use prerequisites::Programs;

/// Environment variable naming the sandbox image archive `build-pause.sh` prints.
pub const PAUSE_IMAGE_ENV: &str = "TAS_PAUSE_IMAGE";

/// The script every node runs as PID 1 of its namespaces.
const NODE_SCRIPT: &str = include_str!("node.sh");

/// Lines of a log an error carries.
const TAIL_LINES: usize = 30;

/// The kubelet's CPU Manager policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuManagerPolicy {
    /// No exclusive CPUs.
    None,
    /// Exclusive CPUs for Guaranteed pods with integer CPU requests; CPU 0 is reserved
    /// for the system, so CPU 1 (NUMA node 1) is the one left to allocate.
    Static,
}

/// How to run a real node. The NUMA layout is fixed: two nodes, one CPU each.
#[derive(Debug, Clone)]
pub struct RealNodeOptions {
    /// The Node's name.
    pub name: String,
    /// The kubelet's CPU Manager policy.
    pub cpu_manager: CpuManagerPolicy,
    /// The Topology Manager policy (`none`, `best-effort`, `restricted`,
    /// `single-numa-node`).
    pub topology_policy: String,
    /// The node's address, inside its own network namespace only.
    pub node_ip: Ipv4Addr,
    /// Its prefix length.
    pub node_prefix: u8,
    /// The pods' addresses (CNI bridge, inside the node's namespace).
    pub pod_cidr: String,
    /// How long [`RealNode::start`] waits for the Node to be Ready.
    pub ready_timeout: Duration,
}

impl RealNodeOptions {
    /// Static CPU Manager, `single-numa-node`, addresses in 10.77.0.0/24 and
    /// 10.78.0.0/24, 90 s to become Ready.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            cpu_manager: CpuManagerPolicy::Static,
            topology_policy: "single-numa-node".into(),
            node_ip: Ipv4Addr::new(10, 77, 0, 2),
            node_prefix: 24,
            pod_cidr: "10.78.0.0/24".into(),
            ready_timeout: Duration::from_secs(90),
        }
    }
}

/// A running real node. Dropping it kills every process of the node and restores the
/// host state recorded before it started. Drop it before its cluster: the node's files
/// live in the cluster's directory, and an orderly drop of the cluster disarms the
/// watchdog that would otherwise end the node.
pub struct RealNode {
    name: String,
    dir: PathBuf,
    unshare: Child,
    forwarder: Option<Forwarder>,
    before: HostState,
    /// The restore script, also kept in memory: the copy in `cleanup.d/` is for the
    /// watchdog and goes with the cluster's directory.
    restore: String,
    cleanup_script: PathBuf,
    keep_dir: bool,
}

impl fmt::Debug for RealNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealNode")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A private cluster (with kube-controller-manager and kube-scheduler) and one real
/// node on it, for a test. The node is dropped first.
pub struct RealNodeCluster {
    /// The node.
    pub node: RealNode,
    /// Its cluster.
    pub cluster: TestCluster,
}

impl RealNodeCluster {
    /// Starts both; `None` when the machine lacks a prerequisite of real nodes, after
    /// printing which and that `test` is skipped. Panics on any other failure.
    pub async fn start_for_test(test: &str, options: RealNodeOptions) -> Option<Self> {
        // Before the cluster: a machine without them skips at once.
        let tools = crate::Tools::locate().unwrap_or_else(|e| panic!("the cluster tools: {e}"));
        if let Err(e) = Programs::locate(tools.dir()) {
            skip(test, &e);
            return None;
        }
        let cluster = match TestCluster::start(crate::ClusterOptions {
            controller_manager: true,
            kube_scheduler: true,
            ..crate::ClusterOptions::default()
        }) {
            Ok(cluster) => cluster,
            Err(e) => panic!("the test cluster starts: {e}"),
        };
        let started = Instant::now();
        match RealNode::start(&cluster, options).await {
            Ok(node) => {
                eprintln!("real node Ready {:.1?} after start", started.elapsed());
                Some(Self { node, cluster })
            }
            Err(e) if e.is_missing_prerequisite() => {
                skip(test, &e);
                None
            }
            Err(e) => panic!("the real node starts: {e}"),
        }
    }
}

/// Says that `test` is skipped and why, straight to the process's stderr, past
/// libtest's capture of `eprintln!`: a skip must show in a run that passes.
fn skip(test: &str, why: &RealNodeError) {
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {test}: a prerequisite is missing: {why} ***\n"
    );
}

fn host_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealNodeError {
    let what = what.into();
    move |source| RealNodeError::Host { what, source }
}

fn write(path: &Path, content: &str) -> Result<(), RealNodeError> {
    std::fs::write(path, content).map_err(host_err(format!("writing {}", path.display())))
}

impl RealNode {
    /// Checks the prerequisites, starts the node and returns once its Node is Ready.
    pub async fn start(
        cluster: &TestCluster,
        options: RealNodeOptions,
    ) -> Result<Self, RealNodeError> {
        let programs = Programs::locate(cluster.binaries_dir())?;
        let name = options.name.clone();
        let dir = cluster.base_dir().join("real-nodes").join(&name);
        // node.sh mounts directories of the node's own over these; a node directory
        // below one of them would be hidden from the node itself.
        if let Some(hidden) = ["/run", "/var/lib", "/var/log"]
            .into_iter()
            .find(|p| dir.starts_with(p))
        {
            return Err(RealNodeError::Host {
                what: format!(
                    "the node directory {} is below {hidden}, which the node mounts over; \
                     set TMPDIR elsewhere",
                    dir.display()
                ),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        }
        std::fs::create_dir_all(dir.join("net.d"))
            .map_err(host_err(format!("creating {}", dir.display())))?;
        write(
            &dir.join("containerd.toml"),
            &config::containerd_toml(&dir, &programs.cni_bin_dir),
        )?;
        write(
            &dir.join("net.d").join("10-tas.conflist"),
            &config::cni_conflist(&options.pod_cidr),
        )?;
        write(
            &dir.join("kubelet.yaml"),
            &config::kubelet_yaml(&options, &dir),
        )?;
        write(&dir.join("node.sh"), NODE_SCRIPT)?;

        // Recorded before anything of the node runs; the restore script is in place
        // before the first process starts, for the watchdog.
        let before = HostState::record()?;
        let cleanup_dir = cluster.base_dir().join("cleanup.d");
        std::fs::create_dir_all(&cleanup_dir)
            .map_err(host_err(format!("creating {}", cleanup_dir.display())))?;
        let cleanup_script = cleanup_dir.join(format!("real-node-{name}.sh"));
        let restore = before.restore_script();
        write(&cleanup_script, &restore)?;

        let log = dir.join("node.log");
        let out =
            std::fs::File::create(&log).map_err(host_err(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(host_err("duplicating the node log"))?;
        let unshare = Command::new("unshare")
            .args([
                "--pid",
                "--fork",
                "--kill-child",
                "--mount",
                "--net",
                "--mount-proc",
                "--propagation",
                "private",
                "sh",
            ])
            .arg(dir.join("node.sh"))
            .arg(&dir)
            .env("NODE_IP", options.node_ip.to_string())
            .env("NODE_PREFIX", options.node_prefix.to_string())
            .env("NODE_NAME", &name)
            .env("PAUSE_IMAGE", &programs.pause_image)
            .env("CONTAINERD", &programs.containerd)
            .env("CTR", &programs.ctr)
            .env("KUBELET", &programs.kubelet)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(host_err("starting unshare"))?;
        let mut node = Self {
            name,
            dir,
            unshare,
            forwarder: None,
            before,
            restore,
            cleanup_script,
            keep_dir: std::env::var(crate::KEEP_CLUSTER_ENV).is_ok_and(|v| v == "1"),
        };
        let pids = cluster.watchdog_pids_file();
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&pids)
            .and_then(|mut f| writeln!(f, "{}", node.unshare.id()))
            .map_err(host_err(format!("recording a pid in {}", pids.display())))?;

        let netns = node.wait_for_netns().await?;
        let forwarder = Forwarder::start(&netns, cluster.api_server_addr()?).map_err(host_err(
            "starting the API server forwarder in the node's namespace",
        ))?;
        let kubeconfig = config::kubeconfig(
            &format!("https://127.0.0.1:{}", forwarder.port()),
            &cluster.serving_cert_files().0,
            &cluster.admin_token()?,
        );
        node.forwarder = Some(forwarder);
        // node.sh starts the kubelet once this file exists: written whole, then renamed.
        write(&node.dir.join("kubeconfig.tmp"), &kubeconfig)?;
        std::fs::rename(node.dir.join("kubeconfig.tmp"), node.dir.join("kubeconfig"))
            .map_err(host_err("renaming the kubelet's kubeconfig"))?;

        node.wait_ready(cluster, options.ready_timeout).await?;
        Ok(node)
    }

    /// Polls until `unshare` has entered its network namespace; returns its path.
    async fn wait_for_netns(&mut self) -> Result<PathBuf, RealNodeError> {
        let own = std::fs::read_link("/proc/self/ns/net")
            .map_err(host_err("reading /proc/self/ns/net"))?;
        let path = PathBuf::from(format!("/proc/{}/ns/net", self.unshare.id()));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.check_alive("node namespace")?;
            if std::fs::read_link(&path).is_ok_and(|ns| ns != own) {
                return Ok(path);
            }
            if Instant::now() > deadline {
                return Err(
                    self.startup_error("node namespace", "no network namespace after 10 s".into())
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn wait_ready(
        &mut self,
        cluster: &TestCluster,
        timeout: Duration,
    ) -> Result<(), RealNodeError> {
        let client = cluster.client().await?;
        let nodes: Api<Node> = Api::all(client);
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive("kubelet")?;
            if let Ok(Some(node)) = nodes.get_opt(&self.name).await
                && crate::nodes::is_ready(&node)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.startup_error(
                    "kubelet",
                    format!("the Node is not Ready after {timeout:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn check_alive(&mut self, component: &'static str) -> Result<(), RealNodeError> {
        match self.unshare.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.startup_error(
                component,
                format!("the node's namespace exited with {status}"),
            )),
            Err(e) => {
                Err(self.startup_error(component, format!("cannot query the node's process: {e}")))
            }
        }
    }

    /// An error with the end of the log that most likely says why: the kubelet's once it
    /// runs, else containerd's, else the node script's.
    fn startup_error(&self, component: &'static str, reason: String) -> RealNodeError {
        let log = ["kubelet.log", "containerd.log", "node.log"]
            .iter()
            .map(|f| self.dir.join(f))
            .find(|p| p.is_file())
            .unwrap_or_else(|| self.dir.join("node.log"));
        let mut log_tail = tail_lines(&self.dir.join("node.log"), TAIL_LINES);
        if !log.ends_with("node.log") {
            log_tail = format!(
                "{}\n--- node.log ---\n{log_tail}",
                tail_lines(&log, TAIL_LINES)
            );
        }
        RealNodeError::Startup {
            component,
            node: self.name.clone(),
            reason,
            log,
            log_tail,
        }
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's directory: configuration, logs, containerd's state, the kubelet's root.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kubelet's root directory (`cpu_manager_state`, `pod-resources/kubelet.sock`).
    pub fn kubelet_root(&self) -> PathBuf {
        self.dir.join("kubelet")
    }

    /// The kubelet's log.
    pub fn kubelet_log(&self) -> PathBuf {
        self.dir.join("kubelet.log")
    }

    /// The host state recorded before the node started.
    pub fn host_state_before(&self) -> &HostState {
        &self.before
    }

    /// Stops the node (see [`Drop`]).
    pub fn stop(self) {}
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for log in ["node.log", "containerd.log", "kubelet.log"] {
                let path = self.dir.join(log);
                eprintln!("--- last {TAIL_LINES} lines of {} ---", path.display());
                eprintln!("{}", tail_lines(&path, TAIL_LINES));
            }
        }
        // SIGKILL to unshare; --kill-child takes PID 1 of the node's PID namespace down
        // with it, and with that every process in the namespace.
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
        self.forwarder = None;
        let _ = Command::new("sh")
            .args(["-c", &self.restore])
            .stdin(Stdio::null())
            .status();
        let _ = std::fs::remove_file(&self.cleanup_script);
        if self.keep_dir {
            eprintln!(
                "tas-testcluster: kept real node directory {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
