//! The cluster benchmark behind `tas-bench`: the TAS scheduler against kube-scheduler,
//! kube-scheduler with the scheduler-plugins NUMA plugin, and a bind-only ceiling, on a
//! private real control plane with kwok nodes.
//!
//! Data flow: [`setup`] starts etcd, kube-apiserver and kwok (no default scheduler, no
//! controller-manager: the runner creates pods directly), installs the NRT CRD and
//! creates the nodes ([`workload::ClusterShape`]). For each round and each scheduler,
//! [`run::run_once`] resets the nodes' NRTs ([`agent`]), starts the scheduler
//! ([`schedulers`], or the in-runner [`binder`]), creates the [`workload::Workload`] at
//! a fixed rate ([`create`]) and watches the binds, which go to the nodes' kubelets —
//! the referee's, the kubelet's own managers ([`kubelet`]) — whose admissions the node
//! agent publishes, until [`run_end`] says the run is over. Each run yields a [`run::RunResult`]. [`scenarios`] shape the runs (backlog, paced, saturation,
//! scale) and run the updater on its own; [`report`] renders each scenario's medians
//! with min–max and the goals with the [`environment`] as markdown, optionally
//! with the criterion figures ([`criterion`]).

pub mod agent;
pub mod binder;
pub mod create;
pub mod criterion;
pub mod dra;
pub mod environment;
pub mod kubelet;
pub mod metrics;
pub mod procfs;
pub mod rejections;
pub mod report;
pub mod run;
pub mod run_end;
pub mod scenarios;
pub mod schedulers;
pub mod setup;
pub mod stats;
pub mod workload;

use std::path::PathBuf;
use std::time::Duration;

use kube::Client;

use schedulers::{Binaries, SchedulerKind};
use tas_testcluster::TestCluster;
use workload::{ClusterShape, Workload};

/// Everything a benchmark run is configured by.
#[derive(Debug, Clone)]
pub struct Options {
    /// Nodes and their zones.
    pub shape: ClusterShape,
    /// The pods.
    pub workload: Workload,
    /// Pod creations per second.
    pub rate: f64,
    /// Rounds; each scheduler runs once per round, and the report shows medians.
    pub runs: u32,
    /// Schedulers, in the order they run within a round.
    pub schedulers: Vec<SchedulerKind>,
    /// kube-scheduler client QPS (both kube-scheduler variants).
    pub qps: f32,
    /// kube-scheduler client burst.
    pub burst: u32,
    /// kube-scheduler log verbosity (`-v`), for debugging; `None`: its default.
    pub kube_scheduler_verbosity: Option<u32>,
    /// The TAS scheduler's `scoring.strategy`; `None`: its default.
    pub tas_scoring: Option<String>,
    /// Pod creations in flight at most.
    pub create_concurrency: usize,
    /// Binds in flight at most, for the bind-only ceiling.
    pub binder_concurrency: usize,
    /// The node agent publishes a node this long after its first unpublished change.
    pub nrt_debounce: Duration,
    /// A run ends when nothing was bound for this long after the last creation.
    pub idle_timeout: Duration,
    /// Whether a run also ends as soon as no pod left can be bound, or every pod left
    /// is reported Unschedulable and nothing changed for [`run_end::SETTLE`]
    /// ([`run_end`]); off: only all bound or the idle timeout end it.
    pub early_end: bool,
    /// In backlog runs of pods with claims, whether the scheduler starts only once
    /// every pod's claim exists; off: the control plane creates the claims while the
    /// scheduler runs, as in a cluster, and pods met before theirs are retried.
    pub wait_for_claims: bool,
    /// The scheduler binaries.
    pub binaries: Binaries,
    /// Where the NodeResourceTopology CRD manifests are.
    pub crd_dir: PathBuf,
    /// Paced creation, or a backlog created before the scheduler starts.
    pub mode: Mode,
}

/// How a run's pods reach the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Created at `Options::rate` while the (warmed-up) scheduler runs.
    Paced,
    /// All created before the scheduler starts (kube-scheduler's scheduler_perf
    /// SchedulingThroughput).
    Backlog,
}

/// A benchmark cluster, ready for runs.
pub struct Bench {
    /// The control plane.
    pub cluster: TestCluster,
    /// A client of it.
    pub client: Client,
    /// Namespace of the pods.
    pub namespace: String,
    /// The configuration.
    pub options: Options,
    /// The kubelet's own admission code (`nodesim/referee`, named by `TAS_REFEREE_BIN`):
    /// the kubelet of every node in every run.
    pub referee: std::sync::Arc<tas_nodesim::referee::Referee>,
    /// The nodes whose NRT the last run changed (`None`: not known, e.g. before the
    /// first run): the next run resets only these.
    pub nrt_changed: std::sync::Mutex<Option<std::collections::BTreeSet<String>>>,
    /// The NUMA zone of every DRA device the nodes publish (empty unless the workload
    /// has claims, [`workload::Mix::Dra`]).
    pub device_zones: std::collections::BTreeMap<tas_nodesim::dra_driver::DeviceKey, u32>,
}

/// Why the benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The control plane could not be started or waited for.
    #[error(transparent)]
    Harness(#[from] tas_testcluster::Error),
    /// A request to the API server failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the runner was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The referee could not start or answer.
    #[error("referee: {0}")]
    Referee(#[from] tas_nodesim::referee::RefereeError),
    /// A scheduler binary is not there.
    #[error("{what} not found at {}: {hint}", path.display())]
    MissingBinary {
        /// Which binary.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
        /// How to get it.
        hint: &'static str,
    },
    /// A scheduler process exited during a run.
    #[error("{scheduler} exited ({status})\n--- last lines of its log ---\n{log_tail}")]
    SchedulerExited {
        /// Which scheduler.
        scheduler: &'static str,
        /// Its exit status.
        status: String,
        /// The end of its log.
        log_tail: String,
    },
    /// Something else went wrong setting up or running.
    #[error("{0}")]
    Setup(String),
}

/// Sets up the cluster and runs every scheduler `options.runs` times, interleaved
/// (round 1 of each, then round 2, ...) so slow drift of the machine affects all
/// alike; with DRA claims ([`workload::Mix::Dra`]) each scheduler's run is followed by
/// one of the same pods without claims. `progress` is told about each finished run.
pub async fn run_all(
    options: Options,
    mut progress: impl FnMut(&run::RunResult),
) -> Result<(Bench, Vec<run::RunResult>), BenchError> {
    let started = std::time::Instant::now();
    let bench = setup::setup(options).await?;
    eprintln!(
        "tas-bench: cluster of {} nodes ready in {:.1} s",
        bench.options.shape.nodes,
        started.elapsed().as_secs_f64()
    );
    let mut results = Vec::new();
    for round in 1..=bench.options.runs {
        for &kind in &bench.options.schedulers {
            let result = run::run_once(&bench, kind, round).await?;
            progress(&result);
            results.push(result);
            if bench.options.workload.mix == workload::Mix::Dra {
                let result = run::run_without_claims(&bench, kind, round).await?;
                progress(&result);
                results.push(result);
            }
        }
    }
    Ok((bench, results))
}
