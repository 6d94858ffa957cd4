//! [`TestCluster`]: a real control plane (etcd + kube-apiserver, optionally
//! kube-controller-manager, kube-scheduler and kwok) run as child processes.
//!
//! [`startup`] brings a cluster up. Dropping it stops every process (SIGTERM, then
//! SIGKILL after a grace period) and removes its directory; the
//! [watchdog](crate::watchdog) does the same if the test process exits first, which is
//! how the never-dropped [shared](TestCluster::shared) cluster gets cleaned up.

mod startup;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::components::Layout;
use crate::process::{self, Component, Running};
use crate::watchdog::Watchdog;
use crate::{Error, Tools, kubeconfig};

/// Set to `1` to keep each cluster's directory (logs, kubeconfig, etcd data) after
/// the cluster stops; its path is printed.
pub const KEEP_CLUSTER_ENV: &str = "TAS_KEEP_CLUSTER";

/// How long stopping waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Which components to run besides etcd and kube-apiserver, and how.
/// Starts tried when a component finds its port taken (see [`TestCluster::start`]).
const START_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Run kube-controller-manager (Deployments, ReplicaSets, GC, service accounts).
    pub controller_manager: bool,
    /// Run kube-scheduler, the default scheduler.
    pub kube_scheduler: bool,
    /// Run kwok for nodes annotated `kwok.x-k8s.io/node: fake`.
    pub kwok: bool,
    /// kube-scheduler's client QPS (upstream default 50).
    pub scheduler_qps: f32,
    /// kube-scheduler's client burst (upstream default 100).
    pub scheduler_burst: u32,
    /// Deadline for the whole startup.
    pub startup_timeout: Duration,
    /// Write kube-apiserver's audit log of `pods/binding` creates and Lease writes (see
    /// [`crate::audit`]), read with [`TestCluster::audit_log_path`],
    /// [`crate::audit::bindings`] and [`crate::audit::lease_writes`].
    pub audit_bindings: bool,
    /// kube-apiserver's `--advertise-address`: the address of the `kubernetes` Service's
    /// endpoints. Unset: `127.0.0.1`, for which the API server publishes no endpoints
    /// (a loopback address is not a valid one). Real nodes set an address that exists
    /// only in their own network namespace, where a forwarder listens on it
    /// ([`crate::real_node`]).
    pub advertise_address: Option<std::net::Ipv4Addr>,
    /// The binaries to run; unset: [`Tools::locate`] (the newest supported control
    /// plane, or `$TAS_TOOLS_BIN`).
    pub tools: Option<Tools>,
}

impl Default for ClusterOptions {
    /// etcd and kube-apiserver only.
    fn default() -> Self {
        Self {
            controller_manager: false,
            kube_scheduler: false,
            kwok: false,
            scheduler_qps: 50.0,
            scheduler_burst: 100,
            startup_timeout: Duration::from_secs(90),
            audit_bindings: false,
            advertise_address: None,
            tools: None,
        }
    }
}

impl ClusterOptions {
    /// Every component: what [`TestCluster::shared`] runs.
    pub fn full() -> Self {
        Self {
            controller_manager: true,
            kube_scheduler: true,
            kwok: true,
            ..Self::default()
        }
    }
}

/// A running test control plane. Dropping it stops every process and deletes its
/// directory (unless `TAS_KEEP_CLUSTER=1`), printing the log tails if the thread is
/// panicking.
pub struct TestCluster {
    layout: Layout,
    tools: Tools,
    server: String,
    /// In start order.
    running: Vec<Running>,
    watchdog: Option<Watchdog>,
    dir: Option<tempfile::TempDir>,
    /// `TAS_KEEP_CLUSTER=1`: leave the directory in place when stopping.
    keep_dir: bool,
}

impl TestCluster {
    /// Starts a private cluster. Blocks until it is ready; callable from sync code and
    /// from inside any async runtime (the readiness checks run on a thread of their own).
    pub fn start(options: ClusterOptions) -> Result<Self, Error> {
        // A free port is picked before the component binds it; another process's
        // outgoing connection can take it in between (ephemeral ports come from the
        // same range). Such a start is retried on fresh ports; any other failure is not.
        let mut attempt = 1;
        loop {
            match Self::start_once(options.clone()) {
                Err(e) if attempt < START_ATTEMPTS && e.is_port_taken() => {
                    eprintln!("tas-testcluster: {e}; retrying on fresh ports");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_once(options: ClusterOptions) -> Result<Self, Error> {
        let tools = match options.tools.clone() {
            Some(tools) => tools,
            None => Tools::locate()?,
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(Error::io("building the startup runtime"))?;
                runtime.block_on(Self::start_with(tools, options))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(Error::Startup {
                    component: "tas-testcluster",
                    reason: "the startup thread panicked".into(),
                    log_tail: String::new(),
                })
            })
        })
    }

    /// The cluster shared by every test in this process, with every component
    /// ([`ClusterOptions::full`]); started by the first caller. It is never dropped:
    /// its watchdog stops it when the test process exits. Tests sharing it must keep to
    /// their own namespaces and nodes (see [`crate::unique_namespace`]).
    pub fn shared() -> Result<&'static TestCluster, Error> {
        static SHARED: OnceLock<Result<TestCluster, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| Self::start(ClusterOptions::full()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::SharedStartFailed(e.clone()))
    }

    /// A new client for this cluster, bound to the caller's async runtime. Create one
    /// per test: each `#[tokio::test]` has its own runtime, and a client outlives
    /// neither.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        let config = kubeconfig::load(&self.layout.kubeconfig()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// The admin's bearer token (group `system:masters`), e.g. to scrape a binary's
    /// `/metrics` as an authorised caller.
    pub fn admin_token(&self) -> Result<String, Error> {
        let path = self.layout.tokens();
        let csv = std::fs::read_to_string(&path).map_err(Error::io("reading the token file"))?;
        Ok(csv.split(',').next().unwrap_or_default().trim().to_owned())
    }

    /// The admin kubeconfig, e.g. for `kubectl --kubeconfig` or a component under test.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.layout.kubeconfig()
    }

    /// The cluster's directory (logs, kubeconfig, credentials, etcd data).
    pub fn base_dir(&self) -> &Path {
        &self.layout.base
    }

    /// The file the [watchdog](crate::watchdog) reads the pids to stop from when the test
    /// process exits. A helper that starts processes of its own (the node simulator's pod
    /// runner) appends their pids, one per line, so that they do not outlive the run.
    pub fn watchdog_pids_file(&self) -> PathBuf {
        self.layout.base.join("pids")
    }

    /// kube-apiserver's address (`127.0.0.1:<port>`), e.g. for a forwarder that lets
    /// processes in other network namespaces reach it.
    pub fn api_server_addr(&self) -> Result<std::net::SocketAddr, Error> {
        let authority = self.server.trim_start_matches("https://");
        authority.parse().map_err(|_| Error::Startup {
            component: "kube-apiserver",
            reason: format!("its URL {} has no IP:port", self.server),
            log_tail: String::new(),
        })
    }

    /// kube-apiserver's serving certificate (with its CA) and key, as it wrote them at
    /// startup: what a proxy that stands in for it serves.
    pub fn serving_cert_files(&self) -> (PathBuf, PathBuf) {
        let cert = self.layout.apiserver_cert();
        (cert.clone(), cert.with_extension("key"))
    }

    /// kube-apiserver's audit log, when started with
    /// [`ClusterOptions::audit_bindings`].
    pub fn audit_log_path(&self) -> Option<PathBuf> {
        let path = self.layout.audit_log();
        path.exists().then_some(path)
    }

    /// The directory the Kubernetes binaries are run from.
    pub fn binaries_dir(&self) -> &Path {
        self.tools.dir()
    }

    /// kube-apiserver's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// Where `component` logs (stdout and stderr).
    pub fn log_path(&self, component: Component) -> PathBuf {
        process::log_path(&self.layout.base, component)
    }

    /// The last `n` lines of `component`'s log.
    pub fn logs_tail(&self, component: Component, n: usize) -> String {
        process::tail_lines(&self.log_path(component), n)
    }

    /// Prints the last `n` lines of every running component's log to stderr.
    pub fn print_log_tails(&self, n: usize) {
        for r in &self.running {
            eprintln!("--- last {n} lines of {} ---", r.log.display());
            eprintln!("{}", process::tail_lines(&r.log, n));
        }
    }

    /// A guard that prints the log tails if the current test panics while it is held;
    /// for tests on the [shared](Self::shared) cluster, which is never dropped.
    pub fn log_guard(&self) -> LogGuard<'_> {
        LogGuard { cluster: self }
    }

    /// Pids of the components and of the watchdog.
    pub fn pids(&self) -> Vec<u32> {
        let components = self.running.iter().map(|r| r.child.id());
        components
            .chain(self.watchdog.as_ref().map(Watchdog::pid))
            .collect()
    }
}

/// See [`TestCluster::log_guard`].
pub struct LogGuard<'a> {
    cluster: &'a TestCluster,
}

impl Drop for LogGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.cluster.print_log_tails(LOG_TAIL_ON_FAILURE);
        }
    }
}

/// Lines of each log printed when a test fails.
const LOG_TAIL_ON_FAILURE: usize = 30;

impl Drop for TestCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_log_tails(LOG_TAIL_ON_FAILURE);
        }
        // Stop the components before the watchdog, so a test process killed
        // mid-drop still leaves the watchdog to finish the job.
        process::stop_all(&mut self.running, STOP_GRACE);
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.disarm();
        }
        // Dropping the TempDir removes the directory, unless it is kept.
        if let Some(dir) = self.dir.take()
            && self.keep_dir
        {
            let kept = dir.keep();
            eprintln!(
                "tas-testcluster: kept the test cluster directory {}",
                kept.display()
            );
        }
    }
}
