//! The updater scenario: one real `tas-updater` process publishing one node whose
//! kubelet is the referee (its podresources server, sysfs files and kubelet config from
//! [`tas_nodesim::sysfs`]), on a control plane of its own.
//!
//! Each run starts a fresh updater, waits for its first NRT, then makes `changes`
//! allocation changes, alternately admitting a 2-CPU Guaranteed pod in the referee (and
//! creating its Pod, bound to the node, as the kubelet's node would have it) and
//! removing it again; each change is timed from just before the referee call to the
//! NRT showing the new free CPU count (polled every 10 ms), and the next starts 1 to
//! 2 s later ([`pause`]), when the agent is idle again. Its peak RSS (`VmHWM`) is
//! read at the end. After the last run the updater is left idle for `idle_window` and
//! every write of its NRT (each watch event) is counted; writes per hour are that
//! count extrapolated from the window.
//!
//! [`run_timed`] does the runs and hands back the idle updater ([`IdleUpdater`]), so
//! `tas-bench` can count its writes while a scenario that measures no speed runs beside
//! it (the saturation scenario): the updater writes only when what it reads changes
//! or its 10-minute heartbeat is due, neither of which CPU contention changes, and its
//! idle control plane costs the other scenario little (the CPU it used in the window
//! is reported, [`UpdaterResult::idle_cpu`]; the updater's own share, what its idle
//! loops cost a node, is [`UpdaterResult::idle_agent_cpu`]).

use std::path::PathBuf;
use std::pin::pin;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_nodesim::referee::convert::{self, with_cpu_reservation};
use tas_nodesim::referee::{AddNode, Referee};
use tas_testcluster::{ClusterOptions, FakeNode, TestCluster, create_fake_node, wait_for};
use tokio::time::Instant;

use crate::stats::percentile;
use crate::workload::{ClusterShape, guaranteed_pod};
use crate::{BenchError, procfs};

/// CPUs of each test pod.
const POD_CPUS: i64 = 2;
/// How long a change may take to show before the run fails.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the NRT is read while waiting for a change.
const POLL: Duration = Duration::from_millis(10);
/// Least pause between a change showing and the next one. The agent's watch of its own
/// object sees each of its writes and may publish once more; a change made during that
/// publish would ride on it and time the agent's pace, not its reaction to a pod.
const SETTLE: Duration = Duration::from_secs(1);

/// The pause after change `i`: [`SETTLE`] plus 0 to 0.9 s, spread over the changes, so
/// that they do not fall in step with the agent's pod poll.
fn pause(i: usize) -> Duration {
    SETTLE + Duration::from_millis((i * 7 % 10) as u64 * 100)
}

/// What the updater scenario is asked for.
#[derive(Debug, Clone)]
pub struct UpdaterOptions {
    /// Runs (a fresh updater each).
    pub runs: u32,
    /// Allocation changes per run.
    pub changes: usize,
    /// How long the last updater is watched idle.
    pub idle_window: Duration,
    /// The `tas-updater` binary.
    pub binary: PathBuf,
    /// Where the CRD manifests are.
    pub crd_dir: PathBuf,
}

impl UpdaterOptions {
    /// 20 changes per run (quick 6) and an 11-minute idle window (quick 20 s): longer
    /// than the updater's default re-apply interval (10 minutes), so a periodic
    /// rewrite shows.
    pub fn new(quick: bool, runs: u32, binary: PathBuf, crd_dir: PathBuf) -> Self {
        Self {
            runs,
            changes: if quick { 6 } else { 20 },
            idle_window: Duration::from_secs(if quick { 20 } else { 660 }),
            binary,
            crd_dir,
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdaterRun {
    /// 1-based round.
    pub round: u32,
    /// Peak resident memory (`VmHWM`) at the end of the run.
    pub peak_rss_bytes: u64,
    /// Resident anonymous memory (`RssAnon`) at the end of the run.
    pub anon_rss_bytes: u64,
    /// Allocation change → NRT visible: median.
    pub p50: Option<Duration>,
    /// … and 99th percentile.
    pub p99: Option<Duration>,
}

/// The whole scenario's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdaterResult {
    /// Every run.
    pub runs: Vec<UpdaterRun>,
    /// NRT writes seen while idle.
    pub idle_writes: usize,
    /// How long the idle updater was watched.
    pub idle_window: Duration,
    /// CPU time the idle updater and its control plane used in the window.
    pub idle_cpu: Duration,
    /// CPU time of the idle updater alone in the window.
    pub idle_agent_cpu: Duration,
    /// The scenarios that ran during the idle window (empty: none).
    pub idle_beside: Vec<String>,
    /// The idle updater's memory at the end of the window (`VmRSS`, `RssAnon`,
    /// `RssFile`); `None` when it could not be read.
    pub idle_memory: Option<procfs::ProcessSample>,
}

impl UpdaterResult {
    /// Idle writes extrapolated to one hour.
    pub fn writes_per_hour(&self) -> Option<f64> {
        writes_per_hour(self.idle_writes, self.idle_window)
    }
}

/// `writes` in `window`, extrapolated to an hour; `None` for an empty window.
pub fn writes_per_hour(writes: usize, window: Duration) -> Option<f64> {
    (!window.is_zero()).then(|| writes as f64 * 3600.0 / window.as_secs_f64())
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the scenario on a control plane of its own; `progress` is told about each run.
pub async fn run(
    options: &UpdaterOptions,
    progress: impl FnMut(&UpdaterRun),
) -> Result<UpdaterResult, BenchError> {
    run_timed(options, progress).await?.count_writes().await
}

/// The scenario after its timed runs: the last run's updater, idle on its control
/// plane, waiting for its writes to be counted.
pub struct IdleUpdater {
    // Field order is drop order: the updater before the referee and the cluster.
    updater: KillOnDrop,
    node: String,
    client: Client,
    runs: Vec<UpdaterRun>,
    window: Duration,
    _referee: Arc<Referee>,
    cluster: TestCluster,
}

/// The timed runs; the last run's updater is handed back still running.
pub async fn run_timed(
    options: &UpdaterOptions,
    mut progress: impl FnMut(&UpdaterRun),
) -> Result<IdleUpdater, BenchError> {
    if !options.binary.is_file() {
        return Err(BenchError::MissingBinary {
            what: "tas-updater",
            path: options.binary.clone(),
            hint: "build it with `cargo build --profile node-agent -p tas-updater` and pass `--tas-updater target/node-agent/tas-updater` (`make bench` does)",
        });
    }
    let cluster = TestCluster::start(ClusterOptions {
        startup_timeout: Duration::from_secs(120),
        ..ClusterOptions::default()
    })?;
    let client = cluster.client().await?;
    tas_testcluster::apply_crds_from_dir(&client, &options.crd_dir).await?;
    // A namespace with its service account (no controller-manager makes one).
    let namespace = tas_testcluster::unique_namespace(&client, "updater").await?;
    let referee = Arc::new(Referee::start()?);
    let mut runs = Vec::new();
    let mut last = None;
    for round in 1..=options.runs.max(1) {
        let node = format!("bench-updater-r{round}");
        let (run, updater) = one_run(
            &cluster, &client, &namespace, &referee, options, &node, round,
        )
        .await?;
        progress(&run);
        runs.push(run);
        // The previous round's updater stops here.
        last = Some((node, updater));
    }
    let (node, updater) = last.ok_or_else(|| BenchError::Setup("no updater run".into()))?;
    Ok(IdleUpdater {
        updater,
        node,
        client,
        runs,
        window: options.idle_window,
        _referee: referee,
        cluster,
    })
}

impl IdleUpdater {
    /// Counts the NRT writes of the idle updater over the idle window, then stops it
    /// and its control plane.
    pub async fn count_writes(self) -> Result<UpdaterResult, BenchError> {
        let agent = [self.updater.0.id()];
        let mut pids = self.cluster.pids();
        pids.extend(agent);
        let before = (cpu_ticks(&pids), cpu_ticks(&agent));
        let idle_writes = count_writes(&self.client, &self.node, self.window).await?;
        let ticks = procfs::clock_ticks_per_second();
        let idle_cpu = procfs::cpu_between(before.0, cpu_ticks(&pids), ticks);
        let idle_agent_cpu = procfs::cpu_between(before.1, cpu_ticks(&agent), ticks);
        let idle_memory = procfs::sample(Some(agent[0])).ok();
        Ok(UpdaterResult {
            runs: self.runs,
            idle_writes,
            idle_window: self.window,
            idle_cpu,
            idle_agent_cpu,
            idle_beside: Vec::new(),
            idle_memory,
        })
    }
}

/// The CPU time of `pids` together (a process that is gone counts 0).
fn cpu_ticks(pids: &[u32]) -> procfs::ProcessSample {
    procfs::ProcessSample {
        cpu_ticks: pids
            .iter()
            .filter_map(|&pid| procfs::sample(Some(pid)).ok())
            .map(|s| s.cpu_ticks)
            .sum(),
        ..procfs::ProcessSample::default()
    }
}

/// Free CPUs of `object`, all zones together.
fn free_cpus(object: &NodeResourceTopology) -> i64 {
    object
        .zones
        .iter()
        .filter_map(|z| z.resource("cpu"))
        .filter_map(|r| r.available.value().ok())
        .sum()
}

async fn one_run(
    cluster: &TestCluster,
    client: &Client,
    namespace: &str,
    referee: &Referee,
    options: &UpdaterOptions,
    node: &str,
    round: u32,
) -> Result<(UpdaterRun, KillOnDrop), BenchError> {
    let shape = ClusterShape {
        nodes: 1,
        zones: 2,
        zone_cpus: 16,
        zone_memory_gib: 32,
        max_pods: 110,
        devices_per_zone: 0,
        hugepages_gib_per_zone: 0,
    };
    let settings = ClusterShape::kubelet();
    let machine = with_cpu_reservation(&shape.machine(), &settings);
    let dir = cluster.base_dir().join("updater").join(node);
    let io = |context: &str| {
        let context = context.to_string();
        move |source| BenchError::Io { context, source }
    };
    tas_nodesim::sysfs::write_node_files(&dir, &machine, &settings)
        .map_err(io("writing the node's files"))?;
    let fake = FakeNode {
        cpu: "32".into(),
        memory: "64Gi".into(),
        ..FakeNode::new(node)
    };
    create_fake_node(client, &fake).await?;
    let status = referee
        .add_node(&AddNode {
            node: node.to_string(),
            pod_resources_dir: Some(dir.join("pod-resources")),
            machine: convert::machine(&machine),
            kubelet: convert::kubelet_config(&machine, &settings),
            ..AddNode::default()
        })
        .await?;
    let socket = status
        .pod_resources_socket
        .unwrap_or_else(|| tas_nodesim::sysfs::socket_path(&dir));
    let port = tas_testcluster::free_ports(1)?[0];
    let log_path = cluster.base_dir().join("logs").join(format!("{node}.log"));
    let log = std::fs::File::create(&log_path).map_err(io("creating the updater's log"))?;
    let err = log.try_clone().map_err(io("creating the updater's log"))?;
    let child = Command::new(&options.binary)
        .env("NODE_NAME", node)
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .arg(format!(
            "--sysfs-root={}",
            tas_nodesim::sysfs::sysfs_root(&dir).display()
        ))
        .arg(format!("--podresources-socket={}", socket.display()))
        .arg(format!(
            "--kubelet-config={}",
            tas_nodesim::sysfs::kubelet_config_path(&dir).display()
        ))
        .arg(format!("--http-address=127.0.0.1:{port}"))
        // This process is not on the simulated node's shared CPU pool: its own cpuset
        // says nothing of the node's CPUs.
        .arg("--shared-cpus-from=")
        .arg("--log-level=warn")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(io("starting tas-updater"))?;
    let updater = KillOnDrop(child);
    let pid = updater.0.id();

    let nrts: Api<NodeResourceTopology> = Api::all(client.clone());
    let first = wait_for(
        format!("tas-updater's first NRT of {node}"),
        CHANGE_TIMEOUT,
        || async { nrts.get_opt(node).await },
    )
    .await?;
    let mut free = free_cpus(&first);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut latencies = Vec::with_capacity(options.changes);
    let mut held: Option<(String, String)> = None;
    for change in 0..options.changes {
        let start = Instant::now();
        let want = match held.take() {
            None => {
                let name = format!("{node}-p{change}");
                let uid = format!("uid-{name}");
                let mut pod = guaranteed_pod(
                    &name,
                    "default-scheduler",
                    node,
                    &POD_CPUS.to_string(),
                    "2Gi",
                );
                pod.metadata.namespace = Some(namespace.to_string());
                pod.metadata.uid = Some(uid.clone());
                if let Some(spec) = pod.spec.as_mut() {
                    spec.node_name = Some(node.to_string());
                }
                let verdict = referee.admit(node, &pod).await?;
                if !verdict.admit {
                    return Err(BenchError::Setup(format!(
                        "the referee refused {name}: {} {}",
                        verdict.reason, verdict.message
                    )));
                }
                pod.metadata.uid = None;
                pods.create(&PostParams::default(), &pod).await?;
                held = Some((name, uid));
                free - POD_CPUS
            }
            Some((name, uid)) => {
                referee.remove(node, &uid).await?;
                pods.delete(&name, &DeleteParams::default().grace_period(0))
                    .await?;
                free + POD_CPUS
            }
        };
        let deadline = start + CHANGE_TIMEOUT;
        loop {
            if let Some(object) = nrts.get_opt(node).await?
                && free_cpus(&object) == want
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(BenchError::Setup(format!(
                    "tas-updater did not publish change {change} of {node} within {CHANGE_TIMEOUT:?}\n--- its log ---\n{}",
                    tas_testcluster::tail_lines(&log_path, 40)
                )));
            }
            tokio::time::sleep(POLL).await;
        }
        latencies.push(start.elapsed());
        free = want;
        tokio::time::sleep(pause(change)).await;
    }
    latencies.sort_unstable();
    let sample = procfs::sample(Some(pid)).map_err(io("sampling tas-updater"))?;
    Ok((
        UpdaterRun {
            round,
            peak_rss_bytes: sample.peak_rss_bytes,
            anon_rss_bytes: sample.anon_rss_bytes,
            p50: percentile(&latencies, 0.5),
            p99: percentile(&latencies, 0.99),
        },
        updater,
    ))
}

/// Writes of `node`'s NRT seen by a watch during `window` (the object is left alone).
async fn count_writes(client: &Client, node: &str, window: Duration) -> Result<usize, BenchError> {
    let nrts: Api<NodeResourceTopology> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut events = pin!(watcher(nrts, config).default_backoff());
    while let Some(event) = events.next().await {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            break;
        }
    }
    let mut writes = 0;
    let end = tokio::time::sleep(window);
    let mut end = pin!(end);
    loop {
        tokio::select! {
            () = &mut end => break,
            event = events.next() => match event {
                Some(Ok(watcher::Event::Apply(_))) => writes += 1,
                Some(_) => {}
                None => break,
            },
        }
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_spread_over_a_second() {
        let mut offsets: Vec<_> = (0..10).map(|i| pause(i) - SETTLE).collect();
        offsets.sort();
        let want: Vec<_> = (0..10).map(|i| Duration::from_millis(i * 100)).collect();
        assert_eq!(offsets, want);
    }

    #[test]
    fn idle_writes_extrapolate_to_an_hour() {
        assert_eq!(
            writes_per_hour(1, Duration::from_secs(660)),
            Some(3600.0 / 660.0)
        );
        assert_eq!(writes_per_hour(0, Duration::from_secs(60)), Some(0.0));
        assert_eq!(writes_per_hour(3, Duration::ZERO), None);
    }
}
