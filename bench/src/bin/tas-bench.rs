//! `tas-bench`: the cluster benchmark (TAS scheduler vs kube-scheduler, the
//! scheduler-plugins NUMA plugin and a bind-only ceiling) and the criterion summary.
//! The runner lives in the `tas_bench` library.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tas_bench::environment::Environment;
use tas_bench::schedulers::{Binaries, SchedulerKind};
use tas_bench::workload::{ClusterShape, Workload};
use tas_bench::{Options, criterion, report, run_all};
use tas_testcluster::Tools;

/// Benchmarks schedulers on a private local control plane with simulated NUMA nodes
/// (kwok) and prints a markdown report.
///
/// Schedules the same workload of Guaranteed pods with each scheduler in turn (TAS,
/// kube-scheduler with the scheduler-plugins NUMA plugin, kube-scheduler, and a bind-only
/// ceiling), interleaved over several runs; measures throughput, latency, CPU and memory;
/// and replays every placement through the kubelet model to count the pods a kubelet
/// would reject. Needs the control-plane binaries ($TAS_TOOLS_BIN; the scheduler-plugins
/// build for numa-plugin) and a release tas-scheduler; `make bench` provides both and
/// writes the report to BENCHMARKS.md.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the criterion figures under DIR (e.g. target/criterion) as markdown.
    CriterionSummary {
        /// criterion's output directory.
        dir: PathBuf,
    },
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Smoke test: 50 nodes, 500 pods, 1 run (explicit flags still win).
    #[arg(long)]
    quick: bool,
    /// kwok nodes [default: 500; --quick: 50].
    #[arg(long)]
    nodes: Option<usize>,
    /// Pods per run [default: 5000; --quick: 500].
    #[arg(long)]
    pods: Option<usize>,
    /// Runs per scheduler; the report shows medians [default: 3; --quick: 1].
    #[arg(long)]
    runs: Option<u32>,
    /// Pod creations per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// NUMA zones per node.
    #[arg(long, default_value_t = 4)]
    zones: u32,
    /// CPUs per zone.
    #[arg(long, default_value_t = 12)]
    zone_cpus: u32,
    /// Memory per zone, GiB.
    #[arg(long, default_value_t = 64)]
    zone_memory_gib: u64,
    /// Pods per node (kubelet maxPods).
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Pod CPU sizes, drawn evenly.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pod_cpus: Vec<u32>,
    /// Pod memory per CPU, GiB.
    #[arg(long, default_value_t = 4)]
    memory_per_cpu_gib: u64,
    /// Schedulers to compare: tas, numa-plugin, kube-scheduler, bind-only.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tas,numa-plugin,kube-scheduler,bind-only"
    )]
    schedulers: Vec<String>,
    /// kube-scheduler client QPS.
    #[arg(long, default_value_t = 1000.0)]
    qps: f32,
    /// kube-scheduler client burst.
    #[arg(long, default_value_t = 1000)]
    burst: u32,
    /// kube-scheduler log verbosity (-v), for debugging a run.
    #[arg(long)]
    kube_scheduler_verbosity: Option<u32>,
    /// Pod creations in flight at most.
    #[arg(long, default_value_t = 64)]
    create_concurrency: usize,
    /// Binds in flight at most (bind-only ceiling).
    #[arg(long, default_value_t = 32)]
    binder_concurrency: usize,
    /// Node agent: publish a node's NRT this many ms after its first change.
    #[arg(long, default_value_t = 200)]
    nrt_debounce_ms: u64,
    /// End a run when nothing was bound for this many seconds after the last creation.
    #[arg(long, default_value_t = 60)]
    idle_timeout_secs: u64,
    /// The tas-scheduler binary [default: next to tas-bench].
    #[arg(long)]
    tas_scheduler: Option<PathBuf>,
    /// The kube-scheduler-plugins binary [default: in the cluster tools directory].
    #[arg(long)]
    schedplugins: Option<PathBuf>,
    /// Directory of the CRD manifests [default: the repository's config/crd].
    #[arg(long)]
    crd_dir: Option<PathBuf>,
    /// Also write the report to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Append the criterion figures found under this directory to the report.
    #[arg(long)]
    criterion: Option<PathBuf>,
    /// A note to add to the report (repeatable).
    #[arg(long)]
    note: Vec<String>,
}

impl RunArgs {
    fn options(&self, tools: &Tools) -> anyhow::Result<Options> {
        let (nodes, pods, runs) = if self.quick {
            (50, 500, 1)
        } else {
            (500, 5000, 3)
        };
        let schedulers = self
            .schedulers
            .iter()
            .map(|id| {
                SchedulerKind::from_id(id).with_context(|| format!("unknown scheduler {id:?}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let too_big = self
            .pod_cpus
            .iter()
            .find(|&&c| c == 0 || c > self.zone_cpus);
        anyhow::ensure!(
            too_big.is_none(),
            "every --pod-cpus size must be 1..={} (one zone)",
            self.zone_cpus
        );
        let tas = match &self.tas_scheduler {
            Some(path) => path.clone(),
            None => std::env::current_exe()
                .context("locating tas-bench")?
                .with_file_name("tas-scheduler"),
        };
        Ok(Options {
            shape: ClusterShape {
                nodes: self.nodes.unwrap_or(nodes),
                zones: self.zones,
                zone_cpus: self.zone_cpus,
                zone_memory_gib: self.zone_memory_gib,
                max_pods: self.max_pods,
            },
            workload: Workload {
                pods: self.pods.unwrap_or(pods),
                cpu_sizes: self.pod_cpus.clone(),
                memory_per_cpu_gib: self.memory_per_cpu_gib,
            },
            rate: self.rate,
            runs: self.runs.unwrap_or(runs).max(1),
            schedulers,
            qps: self.qps,
            burst: self.burst,
            kube_scheduler_verbosity: self.kube_scheduler_verbosity,
            create_concurrency: self.create_concurrency,
            binder_concurrency: self.binder_concurrency,
            nrt_debounce: Duration::from_millis(self.nrt_debounce_ms),
            idle_timeout: Duration::from_secs(self.idle_timeout_secs),
            binaries: Binaries {
                tas,
                kube_scheduler: tools.binary("kube-scheduler"),
                schedplugins: self
                    .schedplugins
                    .clone()
                    .unwrap_or_else(|| tools.binary("kube-scheduler-plugins")),
            },
            crd_dir: self
                .crd_dir
                .clone()
                .unwrap_or_else(tas_testcluster::crd_dir),
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::CriterionSummary { dir }) = &cli.command {
        print!("{}", criterion::render(&criterion::collect(dir)));
        return Ok(());
    }
    let args = cli.run;
    let tools = Tools::locate()?;
    let options = args.options(&tools)?;
    let bin = &options.binaries;
    let versions = [
        (
            "Kubernetes (kube-apiserver, kube-scheduler)",
            tools.binary("kube-apiserver"),
        ),
        ("etcd", tools.binary("etcd")),
        ("kwok", tools.binary("kwok")),
        (
            "scheduler-plugins (kube-scheduler-plugins)",
            bin.schedplugins.clone(),
        ),
        ("tas-scheduler", bin.tas.clone()),
    ];
    let env = Environment::collect(&versions, std::env::args());
    eprintln!(
        "tas-bench: {} nodes, {} pods at {}/s, {} run(s) of {:?}",
        options.shape.nodes,
        options.workload.pods,
        options.rate,
        options.runs,
        options
            .schedulers
            .iter()
            .map(|k| k.id())
            .collect::<Vec<_>>()
    );
    let (bench, results) = run_all(options, |r| {
        eprintln!(
            "tas-bench: {} run {}: {}/{} bound, {:.1} pods/s, p50 {:?}, p99 {:?}, CPU {:.2}s, RSS {} MiB, {} TopologyAffinityError, {} other rejections",
            r.kind.id(),
            r.round,
            r.bound,
            r.pods,
            r.throughput,
            r.p50.unwrap_or_default(),
            r.p99.unwrap_or_default(),
            r.cpu.as_secs_f64(),
            r.peak_rss_bytes >> 20,
            r.tally.topology_errors(),
            r.tally.other_rejections(),
        );
    })
    .await?;
    let mut text = report::render(&env, &bench.options, &results, &args.note);
    if let Some(dir) = &args.criterion {
        text.push('\n');
        text.push_str(&criterion::render(&criterion::collect(dir)));
    }
    drop(bench);
    print!("{text}");
    if let Some(out) = &args.out {
        std::fs::write(out, &text).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
