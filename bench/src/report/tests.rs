//! Rendering of the report from fixed figures.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::agent::PublishStats;
use crate::kubelet::AdmissionTally;
use crate::metrics::DecisionTimes;
use crate::run_end::RunEnd;
use crate::scenarios::updater::UpdaterRun;
use crate::schedulers::Binaries;
use crate::workload::{ClusterShape, Mix, Workload};

pub(crate) fn options(runs: u32, schedulers: Vec<SchedulerKind>) -> Options {
    Options {
        shape: ClusterShape {
            nodes: 10,
            zones: 4,
            zone_cpus: 12,
            zone_memory_gib: 64,
            max_pods: 110,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        },
        workload: Workload {
            pods: 100,
            cpu_sizes: vec![1, 2, 4, 8],
            memory_per_cpu_gib: 4,
            mix: Mix::Guaranteed,
        },
        rate: 200.0,
        runs,
        schedulers,
        qps: 1000.0,
        burst: 1000,
        kube_scheduler_verbosity: None,
        tas_scoring: None,
        create_concurrency: 64,
        binder_concurrency: 32,
        nrt_debounce: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(60),
        early_end: true,
        wait_for_claims: true,
        binaries: Binaries {
            tas: PathBuf::new(),
            kube_scheduler: PathBuf::new(),
            schedplugins: PathBuf::new(),
        },
        crd_dir: PathBuf::new(),
        mode: Mode::Paced,
    }
}

fn result(kind: SchedulerKind, round: u32, rate: f64, p99_ms: u64) -> RunResult {
    let mut tally = AdmissionTally {
        admitted: 98,
        ..AdmissionTally::default()
    };
    tally.rejected.insert("TopologyAffinityError".into(), 1);
    RunResult {
        kind,
        round,
        pods: 100,
        bound: 99,
        throughput: rate,
        creation_rate: 199.0,
        p50: Some(Duration::from_millis(20)),
        p99: Some(Duration::from_millis(p99_ms)),
        cpu: Duration::from_millis(1500),
        peak_rss_bytes: 64 << 20,
        end_rss_anon_file: (40 << 20, 20 << 20),
        tally,
        create_errors: 0,
        published: PublishStats {
            writes: 80,
            errors: 0,
        },
        bind_rate: rate,
        first_bind: Some(Duration::from_millis(250 * u64::from(round))),
        makespan: Some(Duration::from_secs_f64(100.0 / rate)),
        per_second_p50: Some(rate),
        per_second_p90: Some(rate + 10.0),
        decisions: None,
        end: RunEnd::AllBound,
        binds_after_early_end: None,
        phases: crate::run::Phases::default(),
        dra: None,
    }
}

fn env() -> Environment {
    Environment {
        cpus: 2,
        memory_bytes: Some(4 << 30),
        cpu_model: Some("Test CPU".into()),
        versions: vec![("etcd".into(), "etcd Version: 3.6.16".into())],
        git_commit: Some("abc123".into()),
        date: "2025-01-01 00:00 UTC".into(),
        command: "tas-bench --quick".into(),
    }
}

fn five(kind: SchedulerKind, rates: [f64; 5], p99s: [u64; 5]) -> Vec<RunResult> {
    (0..5)
        .map(|i| result(kind, i as u32 + 1, rates[i], p99s[i]))
        .collect()
}

#[test]
fn backlog_table_shows_median_min_max_and_the_goals() {
    let kinds = vec![
        SchedulerKind::Tas,
        SchedulerKind::KubeScheduler,
        SchedulerKind::BindOnly,
    ];
    let mut results = five(
        SchedulerKind::Tas,
        [100.0, 120.0, 110.0, 90.0, 130.0],
        [1; 5],
    );
    results.extend(five(SchedulerKind::KubeScheduler, [100.0; 5], [1; 5]));
    results.extend(five(
        SchedulerKind::BindOnly,
        [200.0, 220.0, 210.0, 190.0, 230.0],
        [1; 5],
    ));
    results[0].end = RunEnd::Settled;
    let mut o = options(5, kinds);
    o.mode = Mode::Backlog;
    let section = Section {
        scenario: Scenario::Backlog,
        options: &o,
        results: &results,
    };
    let text = render(&env(), &[section], None, &["Scaled down.".into()]);
    // binds/s: median 110 of 90..130; per-second p90 = rate + 10; CPU 1.5 s; RSS 64;
    // goodput 99 − 1 = 98; 1 rejected; 1 pending.
    assert!(
        text.contains("| TAS scheduler | 5 | 110.0 (90.0–130.0) | 110.0 (90.0–130.0) | 120.0 (100.0–140.0) | 0.75 (0.25–1.25) | 0.9 (0.8–1.1) | 1.50 | 64 | 98 | 1 | 1 |"),
        "{text}"
    );
    assert!(
        text.contains(
            "| kube-scheduler (default profile, NUMA-unaware) | 5 | 100.0 | 100.0 | 110.0 |"
        ),
        "{text}"
    );
    assert!(
        text.contains("TAS ÷ bind-only = 0.52×: **missed**"),
        "{text}"
    );
    assert!(
        text.contains("TAS ÷ kube-scheduler = 1.10×: **met**"),
        "{text}"
    );
    assert!(
        text.contains("TAS makespan ≤ kube-scheduler's in every run — per round, s: 1.0 vs 1.0, 0.8 vs 1.0, 0.9 vs 1.0, 1.1 vs 1.0, 0.8 vs 1.0: **missed**"),
        "{text}"
    );
    assert!(
        text.contains(
            "TAS binds its first pod ≤ 1 s after it starts — 1.25 s (slowest run): **missed**"
        ),
        "{text}"
    );
    assert!(
        text.contains("### Goals (issue 17; never asserted)"),
        "{text}"
    );
    assert!(
        text.contains("- Backlog (all pods created before the scheduler starts): TAS ≥ 90 % of the bind-only ceiling"),
        "{text}"
    );
    assert!(
        text.contains("all created before the scheduler starts"),
        "{text}"
    );
    assert!(
        text.contains("nothing was bound for 20 s, or nothing was bound for 60 s (here: all bound 14, settled 1)."),
        "{text}"
    );
    assert!(text.contains("- Scaled down."));
    assert!(text.contains("| etcd | etcd Version: 3.6.16 |"));
    assert!(
        text.contains("10 nodes × 4 zones of 12 CPUs / 64 GiB"),
        "{text}"
    );
}

#[test]
fn paced_goal_compares_p99_and_missing_runs_show_a_dash() {
    let kinds = vec![
        SchedulerKind::Tas,
        SchedulerKind::KubeScheduler,
        SchedulerKind::NumaPlugin,
    ];
    let mut results = five(SchedulerKind::Tas, [200.0; 5], [50, 70, 60, 40, 80]);
    results.extend(five(SchedulerKind::KubeScheduler, [200.0; 5], [100; 5]));
    let o = options(5, kinds);
    let section = Section {
        scenario: Scenario::Paced(1000.0),
        options: &o,
        results: &results,
    };
    let text = render(&env(), &[section], None, &[]);
    assert!(text.contains("### Paced at 1000 pods/s"), "{text}");
    assert!(
        text.contains("| TAS scheduler | 5 | 199.0 | 20 | 60 (40–80) | 200.0 |"),
        "{text}"
    );
    assert!(
        text.contains("TAS ÷ kube-scheduler = 0.60×: **met**"),
        "{text}"
    );
    assert!(
        text.contains("| kube-scheduler + NodeResourceTopologyMatch (reserve cache) | 0 | – | – |"),
        "{text}"
    );
}

#[test]
fn saturation_and_scale_goals() {
    let kinds = vec![SchedulerKind::Tas, SchedulerKind::KubeScheduler];
    let mut results = five(SchedulerKind::Tas, [1.0; 5], [1; 5]);
    for r in &mut results {
        r.tally.rejected.clear();
        r.tally.admitted = 99;
        r.decisions = Some(DecisionTimes {
            count: 10,
            mean: 0.0004,
            p50: 0.0003,
            p99: 0.002,
        });
    }
    results.extend(five(SchedulerKind::KubeScheduler, [1.0; 5], [1; 5]));
    let o = options(5, kinds);
    let saturation = Section {
        scenario: Scenario::Saturation,
        options: &o,
        results: &results,
    };
    let scale = Section {
        scenario: Scenario::Scale,
        options: &o,
        results: &results,
    };
    let text = render(&env(), &[saturation, scale], None, &[]);
    assert!(
        text.contains("TAS 99 vs kube-scheduler 98: **met**"),
        "{text}"
    );
    assert!(
        text.contains("0 kubelet rejections for TAS — 0: **met**"),
        "{text}"
    );
    assert!(
        text.contains("| TAS scheduler | 5 | 400 | 300 | 2000 | 1 |"),
        "{text}"
    );
    assert!(
        text.contains(
            "mean 400 µs, p99 2000 µs (bucket-interpolated): **met** (mean), **missed** (p99)"
        ),
        "{text}"
    );
    assert!(text.contains("TAS peak 64 MiB: **met**"), "{text}");
}

#[test]
fn updater_section_extrapolates_idle_writes() {
    let runs = (1..=5)
        .map(|round| UpdaterRun {
            round,
            peak_rss_bytes: (8 + u64::from(round)) << 20,
            anon_rss_bytes: (1 + u64::from(round)) << 20,
            p50: Some(Duration::from_millis(200 + u64::from(round))),
            p99: Some(Duration::from_millis(400 + 100 * u64::from(round))),
        })
        .collect();
    let updater = UpdaterResult {
        runs,
        idle_writes: 1,
        idle_window: Duration::from_secs(600),
        idle_cpu: Duration::from_secs(12),
        idle_agent_cpu: Duration::from_millis(600),
        idle_beside: vec!["Saturation".into()],
        idle_memory: None,
    };
    let text = render(&env(), &[], Some(&updater), &[]);
    assert!(
        text.contains(
            "| 5 | 11.0 (9.0–13.0) | 4.0 (2.0–6.0) | 203 (201–205) | 700 (500–900) | 1 in 600 s | 6.0 |"
        ),
        "{text}"
    );
    assert!(
        text.contains("updater RSS < 10 MiB — 11.0 MiB, peak `VmHWM`: **missed**"),
        "{text}"
    );
    // With the idle updater's memory read, the goal is judged on it.
    let idle = UpdaterResult {
        idle_memory: Some(crate::procfs::ProcessSample {
            rss_bytes: 9 << 20,
            anon_rss_bytes: 3 << 19,
            file_rss_bytes: 15 << 19,
            ..Default::default()
        }),
        ..updater.clone()
    };
    let text = render(&env(), &[], Some(&idle), &[]);
    assert!(
        text.contains("9.0 MiB resident (`VmRSS`): 1.5 MiB anonymous"),
        "{text}"
    );
    assert!(
        text.contains(
            "updater RSS < 10 MiB — 9.0 MiB, idle `VmRSS` (1.5 anonymous + 7.5 file-backed; peak `VmHWM` 11.0): **met**"
        ),
        "{text}"
    );
    assert!(
        text.contains("NRT visible p99 < 1 s — 700 ms: **met**"),
        "{text}"
    );
    assert!(text.contains("6.0 per hour extrapolated"), "{text}");
    assert!(
        text.contains("used 12.0 CPU-s in the window (2.0 % of one CPU); the updater alone 0.60 CPU-s (0.10 %). The window ran beside the Saturation scenario(s)"),
        "{text}"
    );
    assert!(text.contains("**met**."), "{text}");
    assert!(
        text.contains("- Updater: NRT visible p99 < 1 s — 700 ms: **met**."),
        "{text}"
    );
}

#[test]
fn dra_rows_with_and_without_claims_and_its_figures() {
    use crate::dra::DraFigures;
    let kinds = vec![SchedulerKind::Tas, SchedulerKind::KubeScheduler];
    let run = |kind, claims: bool, aligned, unaligned, mean: Option<f64>, makespan: f64| {
        let mut r = result(kind, 1, 1.0, 1);
        r.dra = Some(DraFigures {
            claims,
            aligned: if claims { aligned } else { 0 },
            unaligned: if claims { unaligned } else { 0 },
            unknown: 0,
        });
        r.decisions = mean.map(|mean| DecisionTimes {
            count: 100,
            mean,
            p50: 0.0003,
            p99: 0.001,
        });
        r.makespan = Some(Duration::from_secs_f64(makespan));
        r
    };
    let results = vec![
        run(SchedulerKind::Tas, true, 10, 0, Some(0.0005), 2.0),
        run(SchedulerKind::Tas, false, 0, 0, Some(0.0004), 1.5),
        run(SchedulerKind::KubeScheduler, true, 6, 4, None, 1.9),
        run(SchedulerKind::KubeScheduler, false, 0, 0, None, 1.6),
    ];
    let mut o = options(1, kinds);
    o.workload.mix = Mix::Dra;
    o.mode = Mode::Backlog;
    let section = Section {
        scenario: Scenario::Dra,
        options: &o,
        results: &results,
    };
    let text = render(&env(), &[section], None, &[]);
    for row in [
        "| TAS scheduler, pods with claims | 1 | 100.0 | 0 | 500 | 300 |",
        "| TAS scheduler, same pods without claims | 1 | – | – | 400 | 300 |",
        "| kube-scheduler (default profile, NUMA-unaware), pods with claims | 1 | 60.0 | 4 | – | – |",
        "| kube-scheduler (default profile, NUMA-unaware), same pods without claims | 1 | – | – |",
    ] {
        assert!(text.contains(row), "{row}\n{text}");
    }
    assert!(
        text.contains("aligned share of the admitted pods: TAS 100.0 % (lowest run 100.0 %), kube-scheduler 60.0 % (kubelet rejections: TAS 1, kube-scheduler 1): **met**."),
        "{text}"
    );
    assert!(
        text.contains("TAS decision mean 500 µs with claims vs 400 µs without (1.25×); start → last bind, with claims vs without: TAS 2.00 s vs 1.50 s (1.33×, +5.0 ms per pod), kube-scheduler 1.90 s vs 1.60 s (1.19×, +3.0 ms per pod)."),
        "{text}"
    );
    assert!(
        text.contains("24 DRA devices per node (4 GPUs and 2 NICs per zone"),
        "{text}"
    );
}

/// A scenario with a kubelet rejection lists it, named, under its table; one without
/// lists nothing.
#[test]
fn rejected_pods_are_named_under_their_scenario() {
    use crate::rejections::{Rejection, SchedulerZones};
    let mut results = five(SchedulerKind::Tas, [1.0; 5], [1; 5]);
    results[2].tally.rejections.push(Rejection {
        namespace: "tas-bench".into(),
        pod: "pod-00042".into(),
        node: "node-00007".into(),
        reason: "TopologyAffinityError".into(),
        message: String::new(),
        bound_at: std::time::SystemTime::UNIX_EPOCH,
        admitted_before: Vec::new(),
        scheduler: SchedulerZones::Chosen {
            zones: vec![2],
            time: None,
        },
        last_nrt: None,
    });
    let o = options(5, vec![SchedulerKind::Tas]);
    let section = Section {
        scenario: Scenario::ScaleLarge,
        options: &o,
        results: &results,
    };
    let text = render(&env(), &[section], None, &[]);
    assert!(text.contains("Kubelet-rejected pods"), "{text}");
    assert!(
        text.contains(
            "- tas run 3: `tas-bench/pod-00042` on `node-00007`: **TopologyAffinityError**. TAS chose: zone(s) 2."
        ),
        "{text}"
    );
    let clean = five(SchedulerKind::Tas, [1.0; 5], [1; 5]);
    let section = Section {
        scenario: Scenario::ScaleLarge,
        options: &o,
        results: &clean,
    };
    assert!(!render(&env(), &[section], None, &[]).contains("Kubelet-rejected pods"));
}
