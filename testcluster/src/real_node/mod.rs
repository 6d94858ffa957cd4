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
//! # How the node reaches the API server
//! kube-apiserver listens on `127.0.0.1` of the host's network namespace. A
//! [`forwarder`] listens on every address of the node's namespace, on the API server's
//! port (its socket created from a thread that entered the node's namespace), and
//! connects to the API server from the host's. The kubelet and kube-proxy use
//! `https://127.0.0.1:<port>`; pods use the `kubernetes` Service as on a real cluster:
//! kube-apiserver advertises [`RealNodeOptions::api_ip`] (an address on the node's
//! loopback only), so the Service's endpoint is `api_ip:<port>`, and kube-proxy, run in
//! the node's namespace, maps the Service's address to it. The API server's self-signed
//! certificate covers `127.0.0.1` and the Service's address, so no certificate or
//! token changes. The API server does not reach the kubelet (no `kubectl logs`/`exec`).
//!
//! # The kubelet's files and devices
//! The kubelet's root is `/var/lib/kubelet` and its configuration
//! `/var/lib/kubelet/config.yaml` inside the node, where kubeadm puts them (the node's
//! own `/var/lib`, [`RealNode::kubelet_root`] from the host), so a node agent reads
//! them at the default paths. The tests' device plugin (`tas-devplugin`,
//! [`RealNodeOptions::device`]) advertises devices on a chosen NUMA node; the tests'
//! DRA driver ([`dra`], [`RealNodeOptions::dra`]) publishes fake GPUs per NUMA node and
//! prepares claims with CDI specs, on a containerd that injects them.
//! [`RealNode::restart_kubelet`] restarts the kubelet as `systemctl restart` would.
//!
//! # What is still global, and restored
//! Kernel sysctls the kubelet sets and the `kubepods` cgroups ([`host_state`]). They are
//! recorded before the node starts; a restore script runs when the node is dropped and,
//! if the test process dies first, from the cluster's watchdog, which runs every script
//! in `<cluster>/cleanup.d/` after it has killed the cluster's processes.
//!
//! Only one real node runs at a time per machine: nodes would share the `kubepods`
//! cgroups and the two CPUs. Each holds [`MACHINE_LOCK`]; another waits for it.

pub mod config;
mod dra;
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

pub use dra::DraOptions;
pub use error::RealNodeError;
pub use host_state::HostState;
pub use pod::{guaranteed_pause_pod, guaranteed_pod};

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
    /// The API server's address as the node's pods see it: kube-apiserver advertises it
    /// (the endpoint of the `kubernetes` Service) and the harness's forwarder listens on
    /// it, on the API server's port, inside the node's network namespace only.
    pub api_ip: Ipv4Addr,
    /// Run kube-proxy, so that pods reach the API server through the `kubernetes`
    /// Service as on a real cluster.
    pub kube_proxy: bool,
    /// Run the tests' device plugin.
    pub device: Option<DeviceOptions>,
    /// Run the tests' DRA driver (and the containerd that injects its CDI devices).
    pub dra: Option<DraOptions>,
}

/// The devices the tests' device plugin (`tas-devplugin`) advertises.
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// The extended resource, e.g. `tas.dev/nic`.
    pub resource: String,
    /// The NUMA node every device is on.
    pub numa_node: u32,
    /// How many.
    pub count: u32,
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
            api_ip: Ipv4Addr::new(10, 77, 0, 1),
            kube_proxy: false,
            device: None,
            dra: None,
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
    /// The `ctr` that speaks to the node's containerd.
    ctr: PathBuf,
    before: HostState,
    /// The restore script, also kept in memory: the copy in `cleanup.d/` is for the
    /// watchdog and goes with the cluster's directory.
    restore: String,
    cleanup_script: PathBuf,
    keep_dir: bool,
    /// The machine-wide real-node lock ([`MACHINE_LOCK`]), held while the node lives.
    _lock: std::fs::File,
}

/// The lock file every real node holds while it runs (an exclusive `flock`, released
/// by the kernel when the holding process ends): nodes share the host's `kubepods`
/// cgroups, sysctls and CPUs, so a second one, from another test binary, demo or
/// checkout, waits instead of colliding.
pub const MACHINE_LOCK: &str = "/tmp/tas-real-node.lock";

/// Waits (up to 15 minutes, saying so every minute) for [`MACHINE_LOCK`].
async fn machine_lock() -> Result<std::fs::File, RealNodeError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(MACHINE_LOCK)
        .map_err(host_err(format!("opening {MACHINE_LOCK}")))?;
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(host_err(format!("locking {MACHINE_LOCK}"))(e));
            }
        }
        if started.elapsed() > Duration::from_secs(900) {
            return Err(host_err(format!(
                "another real node has held {MACHINE_LOCK} for 15 minutes"
            ))(std::io::Error::from(
                std::io::ErrorKind::TimedOut,
            )));
        }
        if said.elapsed() > Duration::from_secs(60) {
            eprintln!("real node: waiting for another real node to stop ({MACHINE_LOCK})");
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
            advertise_address: Some(options.api_ip),
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
        let mut programs = Programs::locate(cluster.binaries_dir())?;
        let dra = match &options.dra {
            Some(_) => Some(dra::DraPrograms::locate(cluster.binaries_dir())?),
            None => None,
        };
        let lock = machine_lock().await?;
        let kube_proxy = programs.optional("kube-proxy", options.kube_proxy)?;
        let devplugin = programs.optional("tas-devplugin", options.device.is_some())?;
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
        let containerd_toml = match &dra {
            Some(dra) => {
                Self::create_cdi_dir(&dir)?;
                programs.containerd = dra.containerd.clone();
                programs.ctr = dra.ctr.clone();
                config::containerd_cdi_toml(&dir, &programs.cni_bin_dir, &dra.shim)
            }
            None => config::containerd_toml(&dir, &programs.cni_bin_dir),
        };
        write(&dir.join("containerd.toml"), &containerd_toml)?;
        write(
            &dir.join("net.d").join("10-tas.conflist"),
            &config::cni_conflist(&options.pod_cidr),
        )?;
        let kubelet_root = dir.join("root/var/lib/kubelet");
        std::fs::create_dir_all(&kubelet_root)
            .map_err(host_err(format!("creating {}", kubelet_root.display())))?;
        write(
            &kubelet_root.join("config.yaml"),
            &config::kubelet_yaml(&options, &dir),
        )?;
        write(
            &dir.join("kube-proxy.yaml"),
            &config::kube_proxy_yaml(&options, &dir),
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
        let mut command = Command::new("unshare");
        if let Some(kube_proxy) = &kube_proxy {
            command.env("KUBE_PROXY", kube_proxy);
        }
        if let (Some(devplugin), Some(device)) = (&devplugin, &options.device) {
            command
                .env("DEVPLUGIN", devplugin)
                .env("DEVICE_RESOURCE", &device.resource)
                .env("DEVICE_NUMA", device.numa_node.to_string())
                .env("DEVICE_COUNT", device.count.to_string());
        }
        if let (Some(programs), Some(dra)) = (&dra, &options.dra) {
            command
                .env("DRADRIVER", &programs.driver)
                .env("DRA_DRIVER", &dra.driver)
                .env("DRA_GPUS", dra.gpus_per_numa_node.to_string());
        }
        let unshare = command
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
            .env("API_IP", options.api_ip.to_string())
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
            ctr: programs.ctr.clone(),
            before,
            restore,
            cleanup_script,
            keep_dir: std::env::var(crate::KEEP_CLUSTER_ENV).is_ok_and(|v| v == "1"),
            _lock: lock,
        };
        let pids = cluster.watchdog_pids_file();
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&pids)
            .and_then(|mut f| writeln!(f, "{}", node.unshare.id()))
            .map_err(host_err(format!("recording a pid in {}", pids.display())))?;

        let netns = node.wait_for_netns().await?;
        // On every address of the node's namespace (its loopback for the kubelet and
        // kube-proxy, api_ip for pods), on the API server's own port.
        let api_server = cluster.api_server_addr()?;
        let forwarder = Forwarder::start(
            &netns,
            (Ipv4Addr::UNSPECIFIED, api_server.port()).into(),
            api_server,
        )
        .map_err(host_err(
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
        if options.dra.is_some() {
            node.wait_for_dra_driver(options.ready_timeout).await?;
        }
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

    /// The kubelet's root directory as the host sees it: `/var/lib/kubelet` inside the
    /// node (`config.yaml`, `cpu_manager_state`, `pod-resources/kubelet.sock`).
    pub fn kubelet_root(&self) -> PathBuf {
        self.dir.join("root/var/lib/kubelet")
    }

    /// Opens a TCP connection to `addr` from inside the node's network namespace, as
    /// a process of the node (hostNetwork) would: through kube-proxy's rules for a
    /// Service address.
    pub fn connect_from_node(
        &self,
        addr: std::net::SocketAddr,
    ) -> Result<std::net::TcpStream, RealNodeError> {
        let ns = std::fs::File::open(format!("/proc/{}/ns/net", self.unshare.id()))
            .map_err(host_err("opening the node's network namespace"))?;
        std::thread::spawn(move || -> std::io::Result<std::net::TcpStream> {
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&ns),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        })
        .join()
        .map_err(|_| host_err("connecting")(std::io::Error::other("the thread panicked")))?
        .map_err(host_err(format!("connecting to {addr} from the node")))
    }

    /// `Err` naming why when the kubelet has exited on its own (it is not restarted;
    /// [`RealNode::restart_kubelet`] starts it again): its exit status and the end of its
    /// log, which holds the kubelet's own reason (e.g. a CPU-manager checkpoint that
    /// disagrees with its configuration).
    pub fn kubelet_health(&self) -> Result<(), RealNodeError> {
        match std::fs::read_to_string(self.dir.join("kubelet.exited")) {
            Ok(status) => Err(RealNodeError::Startup {
                component: "kubelet",
                node: self.name.clone(),
                reason: format!("the kubelet exited with status {}", status.trim()),
                log: self.kubelet_log(),
                log_tail: tail_lines(&self.kubelet_log(), TAIL_LINES),
            }),
            Err(_) => Ok(()),
        }
    }

    /// Stops the node's containerd (SIGKILL), as a crashed or stopped runtime; the
    /// kubelet keeps running and reports it.
    pub fn kill_containerd(&self) -> Result<(), RealNodeError> {
        let config = self.dir.join("containerd.toml");
        let pattern = format!("containerd --config {}", config.display());
        let status = Command::new("pkill")
            .args(["-KILL", "-f", &pattern])
            .status()
            .map_err(host_err("running pkill"))?;
        if !status.success() {
            return Err(host_err("stopping containerd")(std::io::Error::other(
                format!("no containerd process with {pattern}"),
            )));
        }
        Ok(())
    }

    /// containerd's socket, for `ctr -a`.
    pub fn containerd_socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    /// Runs `ctr -a <socket> -n k8s.io <args>` against the node's containerd; its stdout.
    pub fn ctr(&self, args: &[&str]) -> Result<String, RealNodeError> {
        let output = Command::new(&self.ctr)
            .arg("-a")
            .arg(self.containerd_socket())
            .args(["-n", "k8s.io"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(host_err("running ctr"))?;
        if !output.status.success() {
            return Err(RealNodeError::Host {
                what: format!(
                    "ctr {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
                source: std::io::Error::other(output.status.to_string()),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Imports an image archive (docker-archive or OCI) into the node's containerd, in
    /// the namespace the kubelet uses, as `ctr images import` does on a real node.
    pub fn import_image(&self, archive: &Path) -> Result<(), RealNodeError> {
        let path = archive.to_string_lossy();
        self.ctr(&["images", "import", &path]).map(|_| ())
    }

    /// Stops the kubelet (SIGTERM), as `systemctl stop kubelet` would; its containers
    /// keep running. [`RealNode::restart_kubelet`] starts it again.
    pub async fn stop_kubelet(&mut self) -> Result<(), RealNodeError> {
        self.signal_node_script("stop-kubelet", "stop the kubelet")
            .await
    }

    /// Creates `flag` for node.sh and waits until it took it (removed it).
    async fn signal_node_script(&mut self, flag: &str, what: &str) -> Result<(), RealNodeError> {
        let flag = self.dir.join(flag);
        write(&flag, "")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while flag.exists() {
            self.check_alive("kubelet")?;
            if Instant::now() > deadline {
                return Err(self
                    .startup_error("kubelet", format!("the node script did not {what} in 30 s")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Restarts the kubelet (SIGTERM, then a new process with the same configuration),
    /// as `systemctl restart kubelet` would, or starts it again after it exited; returns
    /// once the new one started. Its containers keep running.
    pub async fn restart_kubelet(&mut self) -> Result<(), RealNodeError> {
        self.signal_node_script("restart-kubelet", "restart the kubelet")
            .await
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
            for log in [
                "node.log",
                "containerd.log",
                "kubelet.log",
                "kube-proxy.log",
                "devplugin.log",
                "dradriver.log",
            ] {
                if !self.dir.join(log).is_file() {
                    continue;
                }
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
