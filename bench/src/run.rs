//! One measured run of one scheduler, on a clean slate:
//!
//! 1. every node's NRT is rewritten to full availability (after the first run, only
//!    the NRTs the last run changed); its kubelet, the referee's, starts empty;
//! 2. the scheduler starts and must bind a BestEffort warm-up pod (so startup and cache
//!    sync are not measured), which is then deleted;
//! 3. a watch on the run's pods starts and lists; the scheduler process is sampled;
//! 4. pods are created at the fixed rate while the watch records, for each pod, when
//!    it was first seen bound and hands it to its node's kubelet (the referee's, in bind
//!    order per node), whose admissions the node agent publishes; for the bind-only ceiling it also hands pending pods
//!    to the in-runner binder;
//! 5. the run ends when every pod is bound, when no pod left can be bound or its
//!    scheduler has settled, or when nothing was bound for the idle timeout after the
//!    last creation ([`crate::run_end`]); the process is sampled again and stopped as
//!    the kubelet stops a container ([`SchedulerProcess::stop`]: SIGTERM first, so the
//!    TAS scheduler hands its Lease over to the next run's);
//! 6. the run's pods are deleted (no grace) and gone before the next run, while the
//!    kubelets judge what is still queued and the run's nodes leave the referee.
//!
//! In [`Mode::Backlog`] steps 2–4 go differently, as in kube-scheduler's scheduler_perf
//! SchedulingThroughput: every pod is created first (as fast as the API server takes
//! them), the watch lists them, and only then does the scheduler start (no warm-up);
//! the bind-only binder is handed every pending pod at once.
//!
//! With DRA claims ([`Mix::Dra`]) the scheduler starts once the controller manager has
//! generated every pod's claim and named it in the pod's status; after the run the claims are read and each admitted
//! pod's devices judged against its CPUs ([`crate::dra::placements`]), and the clean-up
//! waits until the claims are gone. [`run_without_claims`] runs the same pods without
//! them.

use std::pin::pin;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;

use crate::agent::{NodeAgent, Nodes, PublishStats, publish_all};
use crate::binder::Binder;
use crate::create::{CreateOutcome, create_pods};
use crate::dra::{DraFigures, Placement};
use crate::kubelet::AdmissionTally;
use crate::metrics::{DecisionTimes, scrape_tas_decisions};
use crate::procfs::{self, ProcessSample};
use crate::rejections::{Rejection, lookup_decision};
use crate::run_end::{EndRule, Observed, Progress, RunEnd, SETTLE};
use crate::schedulers::{Launch, SchedulerKind, SchedulerProcess};
use crate::stats::{per_second_counts, percentile, quantile};
use crate::workload::{ClusterShape, Mix, RUN_LABEL, Workload, guaranteed_pod};
use crate::{Bench, BenchError, Mode};
use tas_testcluster::wait_for;

/// How long a scheduler may take to bind its warm-up pod.
const WARMUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long deleted pods may take to go.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(300);

/// The figures of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Which scheduler.
    pub kind: SchedulerKind,
    /// 1-based round.
    pub round: u32,
    /// Pods created.
    pub pods: usize,
    /// Pods bound by the end of the run.
    pub bound: usize,
    /// Bound pods per second, first creation to last bind.
    pub throughput: f64,
    /// Pods per second the runner managed to create.
    pub creation_rate: f64,
    /// Creation → bound, median and 99th percentile.
    pub p50: Option<Duration>,
    /// See `p50`.
    pub p99: Option<Duration>,
    /// CPU time (user + system) of the scheduler process during the run.
    pub cpu: Duration,
    /// Peak resident memory of the scheduler process (`VmHWM`).
    pub peak_rss_bytes: u64,
    /// Of its resident memory at the end of the run: anonymous (`RssAnon`: heap,
    /// stacks) and file-backed (`RssFile`: the binary's pages).
    pub end_rss_anon_file: (u64, u64),
    /// The kubelet's verdicts on the placements (the referee's, in bind order per node).
    pub tally: AdmissionTally,
    /// Pod creations that failed.
    pub create_errors: usize,
    /// NRT writes of the node agent.
    pub published: PublishStats,
    /// Binds per second from the first bind to the last.
    pub bind_rate: f64,
    /// From the scheduler's start (its process spawned; the bind-only binder started)
    /// to the first bind of a measured pod: where a stall at start-up shows.
    pub first_bind: Option<Duration>,
    /// From the scheduler's start to the last bind of the run.
    pub makespan: Option<Duration>,
    /// Binds in each whole second from the first bind: median and 90th percentile.
    pub per_second_p50: Option<f64>,
    /// See `per_second_p50`.
    pub per_second_p90: Option<f64>,
    /// The TAS scheduler's own decision-time histogram at the end of the run.
    pub decisions: Option<DecisionTimes>,
    /// Why the run ended.
    pub end: RunEnd,
    /// With early ends off (`Options::early_end`), the pods bound after the run could
    /// have ended early (`None`: it could not, or early ends were on).
    pub binds_after_early_end: Option<usize>,
    /// Wall time of the run's phases.
    pub phases: Phases,
    /// With DRA claims in the scenario ([`crate::workload::Mix::Dra`]): whether this
    /// run's pods had them, and where their devices went against their CPUs.
    pub dra: Option<DraFigures>,
}

/// Wall time of each phase of a run, for the log (where a full benchmark's hours go).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phases {
    /// Every NRT reset to full availability.
    pub reset: Duration,
    /// The scheduler started and warmed up (paced), or the backlog created and listed
    /// and the scheduler started.
    pub start: Duration,
    /// From the first sample of the scheduler process to the last: creation and binds.
    pub measured: Duration,
    /// The scheduler stopped, the node agent's last writes, the pods deleted and gone.
    pub clean_up: Duration,
    /// The kubelets' last verdicts and the run's nodes removed from the referee (beside
    /// the clean-up).
    pub referee: Duration,
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |d: Duration| d.as_secs_f64();
        write!(
            f,
            "reset {:.1} s, start {:.1} s, measured {:.1} s, clean-up {:.1} s, referee {:.1} s",
            s(self.reset),
            s(self.start),
            s(self.measured),
            s(self.clean_up),
            s(self.referee)
        )
    }
}

impl RunResult {
    /// Pods bound and admitted: bound minus every kubelet rejection.
    pub fn goodput(&self) -> usize {
        self.bound
            .saturating_sub(self.tally.rejected.values().sum::<usize>())
    }

    /// Pods the kubelet rejected, every reason.
    pub fn rejected(&self) -> usize {
        self.tally.rejected.values().sum()
    }

    /// Pods never bound.
    pub fn pending(&self) -> usize {
        self.pods - self.bound
    }
}

/// Runs `kind` once (round `round`) and cleans up after it.
pub async fn run_once(
    bench: &Bench,
    kind: SchedulerKind,
    round: u32,
) -> Result<RunResult, BenchError> {
    run_variant(bench, kind, round, false).await
}

/// Runs `kind` once (round `round`) on the same pods without their DRA claims
/// ([`Workload::without_claims`]), the baseline of what allocation costs.
pub async fn run_without_claims(
    bench: &Bench,
    kind: SchedulerKind,
    round: u32,
) -> Result<RunResult, BenchError> {
    run_variant(bench, kind, round, true).await
}

async fn run_variant(
    bench: &Bench,
    kind: SchedulerKind,
    round: u32,
    without_claims: bool,
) -> Result<RunResult, BenchError> {
    let options = &bench.options;
    let (tag, workload) = if without_claims {
        (
            format!("r{round}-noclaims"),
            options.workload.without_claims(),
        )
    } else {
        (format!("r{round}"), options.workload.clone())
    };
    let dra_scenario = options.workload.mix == Mix::Dra;
    let with_claims = workload.mix == Mix::Dra;
    let scheduler_name = kind.scheduler_name(&tag);
    let machine = options.shape.machine();
    let names = options.shape.node_names();
    let nodes = Nodes {
        names: &names,
        machine: &machine,
        settings: ClusterShape::kubelet(),
    };
    let started = Instant::now();
    let changed = lock(&bench.nrt_changed).take();
    publish_all(
        &bench.client,
        &names,
        &machine,
        nodes.settings,
        changed.as_ref(),
    )
    .await?;
    let mut phases = Phases {
        reset: started.elapsed(),
        ..Phases::default()
    };
    let phase = Instant::now();

    let launch = Launch {
        dir: bench.cluster.base_dir(),
        kubeconfig: &bench.cluster.kubeconfig_path(),
        run: &tag,
        qps: options.qps,
        burst: options.burst,
        verbosity: options.kube_scheduler_verbosity,
        tas_scoring: options.tas_scoring.as_deref(),
    };
    let pods: Api<Pod> = Api::namespaced(bench.client.clone(), &bench.namespace);
    let backlog = options.mode == Mode::Backlog;
    let start_creator = || {
        tokio::spawn(create_pods(
            pods.clone(),
            workload.clone(),
            scheduler_name.clone(),
            tag.clone(),
            if backlog { f64::INFINITY } else { options.rate },
            options.create_concurrency,
        ))
    };
    let mut creator = None;
    let mut created: Option<CreateOutcome> = None;
    let mut process: Option<SchedulerProcess> = None;
    if backlog {
        let outcome = start_creator()
            .await
            .map_err(|e| BenchError::Setup(format!("pod creation: {e}")))?;
        if with_claims && options.wait_for_claims {
            // The scheduler starts once every pod's claim exists, as every pod does.
            let made = workload.pods - outcome.errors.min(workload.pods);
            let selector = format!("{RUN_LABEL}={tag}");
            crate::dra::wait_claims(&bench.client, &bench.namespace, &selector, made).await?;
        }
        created = Some(outcome);
    } else if kind != SchedulerKind::BindOnly {
        let mut spawned = SchedulerProcess::spawn(kind, &options.binaries, &launch)?;
        warm_up(&pods, &scheduler_name, &mut spawned).await?;
        process = Some(spawned);
    }

    let selector = format!("{RUN_LABEL}={tag}");
    let config = watcher::Config::default().labels(&selector);
    let mut events = pin!(watcher(pods.clone(), config).default_backoff());
    // In a backlog run the initial list holds every pod, still pending.
    let mut listed = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::InitDone) => break,
            Ok(watcher::Event::InitApply(pod)) => listed.push(pod),
            _ => {}
        }
    }
    if backlog && kind != SchedulerKind::BindOnly {
        process = Some(SchedulerProcess::spawn(kind, &options.binaries, &launch)?);
    }
    let binder_started = Instant::now();
    let binder = (kind == SchedulerKind::BindOnly).then(|| {
        procfs::reset_own_peak_rss();
        Binder::start(
            &bench.client,
            &bench.namespace,
            options.shape.node_names(),
            options.binder_concurrency,
        )
    });
    let agent = NodeAgent::start(
        &bench.client,
        bench.referee.clone(),
        &scheduler_name,
        nodes,
        options.nrt_debounce,
    );
    // Each rejection is looked up in the TAS scheduler's ring of recent decisions as it
    // comes, while the attempt is still there.
    let lookups = match (
        process.as_ref().and_then(SchedulerProcess::http_port),
        bench.cluster.admin_token(),
    ) {
        (Some(port), Ok(token)) => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            agent.kubelets().report_rejections(tx);
            Some(tokio::spawn(look_up_decisions(port, token, rx)))
        }
        _ => None,
    };

    phases.start = phase.elapsed();
    let phase = Instant::now();
    let pid = process.as_ref().map(SchedulerProcess::pid);
    let before = procfs::sample(pid).map_err(sample_error)?;
    if !backlog {
        creator = Some(start_creator());
    }

    let n = workload.pods;
    let mut bound_at: Vec<Option<Instant>> = vec![None; n];
    let mut submitted = vec![false; n];
    let allocatable = options.shape.allocatable();
    let nodes = options
        .shape
        .node_names()
        .into_iter()
        .map(|name| (name, allocatable.clone()));
    let mut progress = Progress::new(nodes, n, Instant::now());
    let rule = EndRule {
        early: options.early_end && kind != SchedulerKind::BindOnly,
        settle: SETTLE,
        idle_timeout: options.idle_timeout,
    };
    if let Some(outcome) = &created {
        progress.creation_done(n - outcome.errors.min(n), Instant::now());
    }
    let mut seen = |pod: Pod, progress: &mut Progress| {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let Some(i) = Workload::pod_index(name).filter(|&i| i < n) else {
            return;
        };
        let now = Instant::now();
        match progress.observe(i, &pod, now) {
            Observed::Bound(node) => {
                bound_at[i] = Some(now);
                agent.on_bound(&node, &pod);
            }
            Observed::Other => {
                let unbound = pod.spec.as_ref().is_none_or(|s| s.node_name.is_none());
                if let Some(binder) = binder.as_ref().filter(|_| unbound && !submitted[i]) {
                    submitted[i] = true;
                    binder.submit(name.to_string());
                }
            }
        }
    };
    for pod in listed {
        seen(pod, &mut progress);
    }
    let mut ticks = tokio::time::interval(Duration::from_millis(500));
    let end = loop {
        if progress.bound() == n {
            break RunEnd::AllBound;
        }
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => {
                    seen(pod, &mut progress);
                }
                Some(Ok(watcher::Event::Delete(pod))) => {
                    let name = pod.metadata.name.as_deref().unwrap_or_default();
                    if let Some(i) = Workload::pod_index(name) {
                        progress.deleted(i);
                    }
                }
                _ => {}
            },
            _ = ticks.tick() => {
                if let Some(process) = process.as_mut() {
                    process.check_alive()?;
                }
                if let Some(handle) = creator.take_if(|h| h.is_finished()) {
                    let outcome = handle.await.map_err(|e| BenchError::Setup(format!("pod creation: {e}")))?;
                    progress.creation_done(n - outcome.errors.min(n), Instant::now());
                    created = Some(outcome);
                }
                if let Some(end) = progress.verdict(&rule, Instant::now()) {
                    break end;
                }
            }
        }
    };
    // With early ends off: the binds after the run could have ended early.
    let binds_after_early_end = match progress.early() {
        Some((at, _)) if !rule.early && kind != SchedulerKind::BindOnly => {
            Some(bound_at.iter().flatten().filter(|t| **t > at).count())
        }
        _ => None,
    };
    let after = procfs::sample(pid).map_err(sample_error)?;
    phases.measured = phase.elapsed();
    let phase = Instant::now();
    let decisions = match (&process, kind) {
        (Some(process), SchedulerKind::Tas) => match process.http_port() {
            Some(port) => scrape_tas_decisions(&bench.cluster, port).await,
            None => None,
        },
        _ => None,
    };
    // Every bind seen is judged, and its rejection looked up, before the scheduler goes.
    let looked_up = match lookups {
        Some(task) => {
            agent.kubelets().flush().await;
            task.await.unwrap_or_default()
        }
        None => Vec::new(),
    };
    let scheduler_started = process
        .as_ref()
        .map_or(binder_started, SchedulerProcess::started);
    if let Some(process) = process
        && !process.stop().await
    {
        tracing::warn!(
            scheduler = kind.id(),
            "the scheduler did not exit on SIGTERM within the grace period: killed"
        );
    }
    if let Some(binder) = binder {
        binder.stop().await;
    }
    let (kubelets, published, written) = agent.stop().await;
    // Where the devices went, before the pods (and so their claims) go.
    let claims = if with_claims {
        crate::dra::claims(&bench.client, &bench.namespace).await?
    } else {
        Vec::new()
    };
    let created = match (created, creator) {
        (Some(outcome), _) => outcome,
        (None, Some(handle)) => handle
            .await
            .map_err(|e| BenchError::Setup(format!("pod creation: {e}")))?,
        (None, None) => CreateOutcome::default(),
    };
    let result = summarise(
        kind,
        round,
        &created,
        &bound_at,
        scheduler_started,
        (before, after),
    );
    // The pods' deletion (the API server's work) and the kubelets' last verdicts and
    // goodbyes (the referee's) touch nothing in common and nothing measured: side by
    // side.
    let clean_up = async {
        delete_pods(&pods, &selector).await?;
        if dra_scenario {
            crate::dra::wait_claims_gone(&bench.client, &bench.namespace).await?;
        }
        Ok::<_, BenchError>(phase.elapsed())
    };
    let referee = async {
        let (tally, changed) = kubelets.finish().await?;
        Ok::<_, BenchError>((tally, changed, phase.elapsed()))
    };
    let (clean_up, referee) = tokio::join!(clean_up, referee);
    phases.clean_up = clean_up?;
    let (mut tally, changed, referee) = referee?;
    for rejection in &mut tally.rejections {
        if let Some(found) = looked_up
            .iter()
            .find(|r| r.namespace == rejection.namespace && r.pod == rejection.pod)
        {
            rejection.scheduler = found.scheduler.clone();
        }
        rejection.attach_nrt(&written);
    }
    *lock(&bench.nrt_changed) = Some(changed);
    phases.referee = referee;
    let dra = dra_scenario.then(|| {
        if !with_claims {
            return DraFigures::default();
        }
        let placements =
            crate::dra::placements(&claims, &tally.cpu_zones, &bench.device_zones);
        for (pod, placement) in &placements {
            if let Placement::Unaligned { cpus, devices } = placement {
                eprintln!(
                    "tas-bench: {} run {round}: {pod}: devices on zone(s) {devices:?}, the kubelet put its CPUs on {cpus:?}",
                    kind.id()
                );
            }
        }
        crate::dra::judge(&placements)
    });
    Ok(RunResult {
        dra,
        tally,
        phases,
        published,
        decisions,
        end,
        binds_after_early_end,
        ..result
    })
}

/// Looks up each rejection `rejected` brings in the TAS scheduler's decisions (on
/// `127.0.0.1:port`, as `token`) until the channel closes.
async fn look_up_decisions(
    port: u16,
    token: String,
    mut rejected: tokio::sync::mpsc::UnboundedReceiver<Rejection>,
) -> Vec<Rejection> {
    let mut found = Vec::new();
    while let Some(mut rejection) = rejected.recv().await {
        rejection.scheduler = lookup_decision(port, &token, &rejection).await;
        found.push(rejection);
    }
    found
}

/// The figures from the creation and bind instants and the process samples.
fn summarise(
    kind: SchedulerKind,
    round: u32,
    created: &CreateOutcome,
    bound_at: &[Option<Instant>],
    scheduler_started: Instant,
    (before, after): (ProcessSample, ProcessSample),
) -> RunResult {
    let mut latencies: Vec<Duration> = created
        .sent_at
        .iter()
        .zip(bound_at)
        .filter_map(|(sent, bound)| {
            Some(bound.as_ref()?.saturating_duration_since(*sent.as_ref()?))
        })
        .collect();
    latencies.sort_unstable();
    let first = created.sent_at.iter().flatten().min();
    let last_sent = created.sent_at.iter().flatten().max();
    let last_bind = bound_at.iter().flatten().max();
    let bound = bound_at.iter().flatten().count();
    let per_second = |count: usize, from: Option<&Instant>, to: Option<&Instant>| match (from, to) {
        (Some(from), Some(to)) if to > from => {
            count as f64 / to.duration_since(*from).as_secs_f64()
        }
        _ => f64::NAN,
    };
    let binds: Vec<Instant> = bound_at.iter().flatten().copied().collect();
    let first_bind = binds.iter().min();
    let seconds = per_second_counts(&binds);
    let since_start =
        |at: Option<&Instant>| at.map(|at| at.saturating_duration_since(scheduler_started));
    RunResult {
        bind_rate: per_second(bound, first_bind, last_bind),
        first_bind: since_start(first_bind),
        makespan: since_start(last_bind),
        per_second_p50: quantile(&seconds, 0.5),
        per_second_p90: quantile(&seconds, 0.9),
        decisions: None,
        kind,
        round,
        pods: bound_at.len(),
        bound,
        throughput: per_second(bound, first, last_bind),
        creation_rate: per_second(created.sent_at.iter().flatten().count(), first, last_sent),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        cpu: procfs::cpu_between(before, after, procfs::clock_ticks_per_second()),
        peak_rss_bytes: after.peak_rss_bytes,
        end_rss_anon_file: (after.anon_rss_bytes, after.file_rss_bytes),
        tally: AdmissionTally::default(),
        create_errors: created.errors,
        published: PublishStats::default(),
        end: RunEnd::default(),
        binds_after_early_end: None,
        phases: Phases::default(),
        dra: None,
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn sample_error(source: std::io::Error) -> BenchError {
    BenchError::Io {
        context: "sampling the scheduler process".into(),
        source,
    }
}

/// Creates a BestEffort pod for `scheduler_name`, waits until it is bound, deletes it
/// and waits until it is gone.
async fn warm_up(
    pods: &Api<Pod>,
    scheduler_name: &str,
    process: &mut SchedulerProcess,
) -> Result<(), BenchError> {
    let name = format!("warmup-{scheduler_name}");
    let pod = guaranteed_pod(&name, scheduler_name, "warmup", "", "");
    pods.create(&PostParams::default(), &pod).await?;
    let bound = wait_for(
        format!("{scheduler_name} to bind {name}"),
        WARMUP_TIMEOUT,
        || {
            let alive = process.check_alive();
            async {
                alive?;
                let pod = pods.get(&name).await?;
                Ok::<_, BenchError>(pod.spec.and_then(|s| s.node_name).map(|_| ()))
            }
        },
    )
    .await;
    if let Err(e) = bound {
        return Err(BenchError::Setup(format!(
            "{e}\n--- last lines of the scheduler's log ---\n{}",
            process.log_tail(40)
        )));
    }
    delete_pods(pods, &format!("{RUN_LABEL}=warmup")).await
}

/// Deletions in flight at most when a run's pods are deleted.
const DELETE_CONCURRENCY: usize = 64;

/// Deletes the pods matching `selector` without grace and waits until they are gone.
///
/// One DELETE per pod, many in flight: the API server works off a delete-collection
/// request one pod after the other, which at 5,000 pods took most of a minute per run.
async fn delete_pods(pods: &Api<Pod>, selector: &str) -> Result<(), BenchError> {
    let list = ListParams::default().labels(selector);
    let names: Vec<String> = pods
        .list_metadata(&list)
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let params = DeleteParams::default().grace_period(0);
    let deleted: Vec<kube::Result<()>> = futures::stream::iter(names)
        .map(|name| {
            let params = params.clone();
            async move {
                match pods.delete(&name, &params).await {
                    Ok(_) => Ok(()),
                    // Gone already.
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(DELETE_CONCURRENCY)
        .collect()
        .await;
    deleted.into_iter().collect::<kube::Result<Vec<()>>>()?;
    let ids = ListParams::default().labels(selector).limit(1);
    wait_for(
        format!("pods {selector} to be deleted"),
        CLEANUP_TIMEOUT,
        || async {
            let left = pods.list_metadata(&ids).await?;
            Ok::<_, kube::Error>(left.items.is_empty().then_some(()))
        },
    )
    .await?;
    Ok(())
}
