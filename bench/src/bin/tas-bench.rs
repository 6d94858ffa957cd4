//! `tas-bench`: the cluster benchmark (TAS scheduler vs kube-scheduler, the
//! scheduler-plugins NUMA plugin and a bind-only ceiling) and the criterion summary.
//! The runner lives in the `tas_bench` library.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tas_bench::environment::Environment;
use tas_bench::report::Section;
use tas_bench::scenarios::updater::{UpdaterOptions, UpdaterResult};
use tas_bench::scenarios::{self, Scenario, Sizes};
use tas_bench::schedulers::{Binaries, SchedulerKind};
use tas_bench::workload::{ClusterShape, Mix, Workload};
use tas_bench::{Mode, Options, criterion, report, run_all};
use tas_testcluster::Tools;

/// Benchmarks schedulers on a private local control plane with simulated NUMA nodes
/// (kwok) and prints a markdown report.
///
/// Scenarios (--scenario): backlog (every pod created before the scheduler starts;
/// binds/s), paced (creation at 200 and 1,000 pods/s; creation → bound latency),
/// saturation (a mixed workload until nothing more fits; pods admitted, rejected,
/// pending), scale (5,000 nodes; scheduler memory and its own decision times),
/// scale-15k (15,000 nodes and a 30,000-pod backlog; memory, decision times, binds/s),
/// updater (one tas-updater against the referee's podresources server) and dra (DRA
/// GPUs and NICs beside kubelet-managed CPUs: the share of pods whose devices sit on
/// their CPUs' zone, TAS and kube-scheduler, and what allocation costs per pod). Each
/// cluster scenario runs TAS, kube-scheduler with the scheduler-plugins NUMA plugin,
/// kube-scheduler and a bind-only ceiling (those that apply), interleaved over several
/// runs; every
/// placement is admitted by the kubelet referee, the nodes' kubelets. Needs the control-plane binaries
/// ($TAS_TOOLS_BIN; the scheduler-plugins build for numa-plugin), the referee
/// ($TAS_REFEREE_BIN) and release tas-scheduler and tas-updater binaries; `make bench`
/// provides them and writes the report to BENCHMARKS.md.
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
    /// Scenarios to run, in order: backlog, paced, updater, saturation, scale, scale-15k,
    /// dra. The
    /// updater's idle window (its writes per hour) runs on beside the scenarios after it
    /// that measure no speed (saturation); the next one that does waits for it.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "backlog,paced,updater,saturation,scale,scale-15k,dra"
    )]
    scenario: Vec<String>,
    /// Smoke test: every scenario scaled down (tens of nodes, a few hundred pods), 1 run
    /// (explicit flags still win).
    #[arg(long)]
    quick: bool,
    /// kwok nodes of every cluster scenario [default: each scenario's own].
    #[arg(long)]
    nodes: Option<usize>,
    /// Pods per run of every cluster scenario [default: each scenario's own].
    #[arg(long)]
    pods: Option<usize>,
    /// Pods per run of the backlog and paced scenarios only (wins over --pods)
    /// [default: 5,000].
    #[arg(long)]
    throughput_pods: Option<usize>,
    /// Nodes of the saturation scenario only (wins over --nodes; its pods still request
    /// 1.3× their CPUs) [default: 200].
    #[arg(long)]
    saturation_nodes: Option<usize>,
    /// Runs per scheduler (and updater runs); the report shows medians with min–max
    /// [default: 5; --quick: 1].
    #[arg(long)]
    runs: Option<u32>,
    /// Creation rates of the paced scenario, pods/s.
    #[arg(long, value_delimiter = ',', default_value = "200,1000")]
    paced_rates: Vec<f64>,
    /// Seconds the idle updater is watched for NRT writes [default: 660; --quick: 20].
    #[arg(long)]
    updater_idle_secs: Option<u64>,
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
    /// Pod CPU sizes, drawn evenly (not the saturation mix).
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
    /// The TAS scheduler's scoring strategy (FragmentationAware, LeastAllocated,
    /// MostAllocated, BalancedAllocation, LeastNUMANodes) [default: the scheduler's own,
    /// FragmentationAware]; the report notes it.
    #[arg(long)]
    tas_scoring: Option<String>,
    /// Pod creations in flight at most (at least 512 in the paced scenario).
    #[arg(long, default_value_t = 64)]
    create_concurrency: usize,
    /// Binds in flight at most (bind-only ceiling; at least 256 in the backlog
    /// scenario).
    #[arg(long, default_value_t = 32)]
    binder_concurrency: usize,
    /// Node agent: publish a node's NRT this many ms after its first change.
    #[arg(long, default_value_t = 200)]
    nrt_debounce_ms: u64,
    /// End a run when nothing was bound for this many seconds after the last creation.
    #[arg(long, default_value_t = 60)]
    idle_timeout_secs: u64,
    /// End a run only when every pod is bound or by the idle timeout, not as soon as
    /// no pod left can be bound or every pod left is reported Unschedulable and nothing
    /// was bound for 20 s; the log then says how many pods were bound after the run
    /// could have ended early (to check that rule).
    #[arg(long)]
    no_early_end: bool,
    /// In the dra scenario, start the scheduler without waiting for the pods' claims:
    /// the control plane creates them while it runs, as in a cluster, and pods met
    /// before their claim are retried.
    #[arg(long)]
    no_claim_wait: bool,
    /// The tas-scheduler binary [default: next to tas-bench].
    #[arg(long)]
    tas_scheduler: Option<PathBuf>,
    /// The tas-updater binary [default: next to tas-bench].
    #[arg(long)]
    tas_updater: Option<PathBuf>,
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
    fn sizes(&self) -> Sizes {
        Sizes {
            quick: self.quick,
            nodes: self.nodes,
            pods: self.pods,
            throughput_pods: self.throughput_pods,
            saturation_nodes: self.saturation_nodes,
        }
    }

    fn runs(&self) -> u32 {
        self.runs.unwrap_or(if self.quick { 1 } else { 5 }).max(1)
    }

    fn scenarios(&self) -> anyhow::Result<Vec<Scenario>> {
        let mut all = Vec::new();
        for id in &self.scenario {
            let found = Scenario::from_id(id, &self.paced_rates).with_context(|| {
                format!("unknown scenario {id:?} (one of {:?})", scenarios::IDS)
            })?;
            all.extend(found);
        }
        Ok(all)
    }

    fn sibling(&self, given: &Option<PathBuf>, name: &str) -> anyhow::Result<PathBuf> {
        match given {
            Some(path) => Ok(path.clone()),
            None => Ok(std::env::current_exe()
                .context("locating tas-bench")?
                .with_file_name(name)),
        }
    }

    /// The common options each cluster scenario starts from.
    fn options(&self, tools: &Tools) -> anyhow::Result<Options> {
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
        Ok(Options {
            shape: ClusterShape {
                nodes: 0,
                zones: self.zones,
                zone_cpus: self.zone_cpus,
                zone_memory_gib: self.zone_memory_gib,
                max_pods: self.max_pods,
                devices_per_zone: 0,
                hugepages_gib_per_zone: 0,
            },
            workload: Workload {
                pods: 0,
                cpu_sizes: self.pod_cpus.clone(),
                memory_per_cpu_gib: self.memory_per_cpu_gib,
                mix: Mix::Guaranteed,
            },
            rate: 200.0,
            runs: self.runs(),
            schedulers,
            qps: self.qps,
            burst: self.burst,
            kube_scheduler_verbosity: self.kube_scheduler_verbosity,
            tas_scoring: self.tas_scoring.clone(),
            create_concurrency: self.create_concurrency,
            binder_concurrency: self.binder_concurrency,
            nrt_debounce: Duration::from_millis(self.nrt_debounce_ms),
            idle_timeout: Duration::from_secs(self.idle_timeout_secs),
            early_end: !self.no_early_end,
            wait_for_claims: !self.no_claim_wait,
            binaries: Binaries {
                tas: self.sibling(&self.tas_scheduler, "tas-scheduler")?,
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
            mode: Mode::Paced,
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
    let base = args.options(&tools)?;
    let scenarios = args.scenarios()?;
    let bin = &base.binaries;
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
    let sizes = args.sizes();
    let mut done: Done = Vec::new();
    let mut updater = None;
    let mut notes = args.note.clone();
    if let Some(strategy) = &args.tas_scoring {
        notes.push(format!(
            "The TAS scheduler ran with scoring strategy {strategy}, not its default."
        ));
    }
    // The updater's idle window, counting in the background, and the scenarios that ran
    // beside it.
    let mut idle: Option<IdleWindow> = None;
    for (at, &scenario) in scenarios.iter().enumerate() {
        if let Some(window) = idle.take_if(|_| !scenario.beside_idle_updater()) {
            finish_idle_window(window, &mut updater, &mut notes).await;
        }
        if let Some(window) = idle.as_mut() {
            window.beside.push(scenario.id());
        }
        let started = std::time::Instant::now();
        let Some(mut options) = scenarios::options(scenario, &base, &sizes) else {
            let mut options = UpdaterOptions::new(
                args.quick,
                args.runs(),
                args.sibling(&args.tas_updater, "tas-updater")?,
                base.crd_dir.clone(),
            );
            if let Some(secs) = args.updater_idle_secs {
                options.idle_window = Duration::from_secs(secs);
            }
            eprintln!(
                "tas-bench: updater: {} run(s) of {} changes, then {} s idle (beside the next scenario if it measures no speed)",
                options.runs,
                options.changes,
                options.idle_window.as_secs()
            );
            let outcome = scenarios::updater::run_timed(&options, |r| {
                eprintln!(
                    "tas-bench: updater run {}: peak RSS {:.1} MiB, change → NRT p50 {:?}, p99 {:?}",
                    r.round,
                    r.peak_rss_bytes as f64 / f64::from(1 << 20),
                    r.p50.unwrap_or_default(),
                    r.p99.unwrap_or_default()
                );
            })
            .await;
            match outcome {
                Ok(timed) => {
                    eprintln!(
                        "tas-bench: updater runs done in {:.0} s; its idle window starts",
                        started.elapsed().as_secs_f64()
                    );
                    idle = Some(IdleWindow {
                        started,
                        beside: Vec::new(),
                        count: tokio::spawn(timed.count_writes()),
                    });
                }
                Err(e) => {
                    eprintln!("tas-bench: the updater scenario failed: {e}");
                    notes.push(format!("The updater scenario failed: {e}"));
                }
            }
            continue;
        };
        options.schedulers = scenarios::schedulers(scenario, &options.schedulers);
        eprintln!(
            "tas-bench: {}: {} nodes, {} pods, {} run(s) of {:?}",
            scenario.title(),
            options.shape.nodes,
            options.workload.pods,
            options.runs,
            options
                .schedulers
                .iter()
                .map(|k| k.id())
                .collect::<Vec<_>>()
        );
        let outcome = run_all(options.clone(), |r| {
            eprintln!(
                "tas-bench: {} run {} ({}{}): {}/{} bound, created {:.1}/s, bound {:.1}/s, first bind {:.2?} and last {:.2?} after start, binds/s {:.1} (per-second p50 {:?}, p90 {:?}), p50 {:?}, p99 {:?}, CPU {:.2}s, RSS {} MiB (peak; at the end {} MiB anonymous, {} MiB file-backed), admitted {}, rejected {:?}, pending {}, NRT writes {} ({} failed, retried), decisions {:?}{}; {}",
                r.kind.id(),
                r.round,
                r.end.id(),
                r.binds_after_early_end
                    .map(|k| format!("; {k} bound after it could have ended early"))
                    .unwrap_or_default(),
                r.bound,
                r.pods,
                r.creation_rate,
                r.throughput,
                r.first_bind.unwrap_or_default(),
                r.makespan.unwrap_or_default(),
                r.bind_rate,
                r.per_second_p50,
                r.per_second_p90,
                r.p50.unwrap_or_default(),
                r.p99.unwrap_or_default(),
                r.cpu.as_secs_f64(),
                r.peak_rss_bytes >> 20,
                r.end_rss_anon_file.0 >> 20,
                r.end_rss_anon_file.1 >> 20,
                r.tally.admitted,
                r.tally.rejected,
                r.pending(),
                r.published.writes,
                r.published.errors,
                r.decisions,
                r.dra
                    .map(|d| format!(
                        ", DRA: claims {}, aligned {}, unaligned {}, unknown {}",
                        d.claims, d.aligned, d.unaligned, d.unknown
                    ))
                    .unwrap_or_default(),
                r.phases,
            );
            if r.kind != SchedulerKind::BindOnly {
                for rejection in &r.tally.rejections {
                    eprintln!(
                        "tas-bench: {}",
                        tas_bench::rejections::render_one(r.kind, r.round, rejection)
                    );
                }
            }
        })
        .await;
        match outcome {
            Ok((bench, results)) => {
                drop(bench);
                eprintln!(
                    "tas-bench: {} done in {:.0} s",
                    scenario.title(),
                    started.elapsed().as_secs_f64()
                );
                done.push((scenario, options, results));
                write_partial(
                    &env,
                    &done,
                    updater.as_ref(),
                    &notes,
                    &args,
                    &scenarios[at + 1..],
                );
            }
            Err(e) => {
                eprintln!("tas-bench: {} failed: {e}", scenario.title());
                notes.push(format!("{} failed: {e}", scenario.title()));
            }
        }
    }
    if let Some(window) = idle.take() {
        finish_idle_window(window, &mut updater, &mut notes).await;
    }
    let text = report_text(&env, &done, updater.as_ref(), &notes, &args);
    print!("{text}");
    if let Some(out) = &args.out {
        std::fs::write(out, &text).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// The scenarios done so far, with their options and results.
type Done = Vec<(Scenario, Options, Vec<tas_bench::run::RunResult>)>;

/// The report of what `done` holds, with the criterion figures if asked for.
fn report_text(
    env: &Environment,
    done: &Done,
    updater: Option<&UpdaterResult>,
    notes: &[String],
    args: &RunArgs,
) -> String {
    let sections: Vec<Section<'_>> = done
        .iter()
        .map(|(scenario, options, results)| Section {
            scenario: *scenario,
            options,
            results,
        })
        .collect();
    let mut text = report::render(env, &sections, updater, notes);
    if let Some(dir) = &args.criterion {
        text.push('\n');
        text.push_str(&criterion::render(&criterion::collect(dir)));
    }
    text
}

/// Writes the report of the scenarios done so far to `--out`, marked partial with the
/// scenarios still to run, so that a run stopped early leaves what it measured.
fn write_partial(
    env: &Environment,
    done: &Done,
    updater: Option<&UpdaterResult>,
    notes: &[String],
    args: &RunArgs,
    remaining: &[Scenario],
) {
    let Some(out) = &args.out else {
        return;
    };
    let mut notes = notes.to_vec();
    let left: Vec<String> = remaining.iter().map(|s| s.id()).collect();
    notes.push(format!(
        "Partial report: still to run when it was written: {}.",
        left.join(", ")
    ));
    let text = report_text(env, done, updater, &notes, args);
    if let Err(e) = std::fs::write(out, text) {
        eprintln!(
            "tas-bench: writing the partial report to {}: {e}",
            out.display()
        );
    }
}

/// The updater's idle window, counting NRT writes in the background.
struct IdleWindow {
    started: std::time::Instant,
    beside: Vec<String>,
    count: tokio::task::JoinHandle<Result<UpdaterResult, tas_bench::BenchError>>,
}

/// Waits for the idle window to end and takes its result (or notes its failure).
async fn finish_idle_window(
    window: IdleWindow,
    updater: &mut Option<UpdaterResult>,
    notes: &mut Vec<String>,
) {
    let outcome = match window.count.await {
        Ok(outcome) => outcome.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match outcome {
        Ok(mut result) => {
            result.idle_beside = window.beside;
            eprintln!(
                "tas-bench: updater idle: {} NRT writes in {} s ({:.1}/hour extrapolated), {:.1} CPU-s (the updater alone {:.2}); {:.0} s after its runs began",
                result.idle_writes,
                result.idle_window.as_secs(),
                result.writes_per_hour().unwrap_or(f64::NAN),
                result.idle_cpu.as_secs_f64(),
                result.idle_agent_cpu.as_secs_f64(),
                window.started.elapsed().as_secs_f64()
            );
            *updater = Some(result);
        }
        Err(e) => {
            eprintln!("tas-bench: the updater scenario failed: {e}");
            notes.push(format!("The updater scenario failed: {e}"));
        }
    }
}
