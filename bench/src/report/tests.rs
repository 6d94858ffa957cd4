//! Rendering of the report from fixed figures.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::agent::PublishStats;
use crate::kubelet::AdmissionTally;
use crate::schedulers::Binaries;
use crate::workload::{ClusterShape, Workload};

fn options(runs: u32) -> Options {
    Options {
        shape: ClusterShape {
            nodes: 10,
            zones: 4,
            zone_cpus: 12,
            zone_memory_gib: 64,
            max_pods: 110,
        },
        workload: Workload {
            pods: 100,
            cpu_sizes: vec![1, 2, 4, 8],
            memory_per_cpu_gib: 4,
        },
        rate: 200.0,
        runs,
        schedulers: vec![
            SchedulerKind::Tas,
            SchedulerKind::NumaPlugin,
            SchedulerKind::BindOnly,
        ],
        qps: 1000.0,
        burst: 1000,
        kube_scheduler_verbosity: None,
        create_concurrency: 64,
        binder_concurrency: 32,
        nrt_debounce: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(60),
        binaries: Binaries {
            tas: PathBuf::new(),
            kube_scheduler: PathBuf::new(),
            schedplugins: PathBuf::new(),
        },
        crd_dir: PathBuf::new(),
    }
}

fn result(kind: SchedulerKind, round: u32, throughput: f64, p99_ms: u64) -> RunResult {
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
        throughput,
        creation_rate: 199.0,
        p50: Some(Duration::from_millis(20)),
        p99: Some(Duration::from_millis(p99_ms)),
        cpu: Duration::from_millis(1500),
        peak_rss_bytes: 64 << 20,
        tally,
        create_errors: 0,
        published: PublishStats {
            writes: 80,
            errors: 0,
        },
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

#[test]
fn summary_holds_medians_and_ratios() {
    let results = vec![
        result(SchedulerKind::Tas, 1, 100.0, 50),
        result(SchedulerKind::Tas, 2, 120.0, 70),
        result(SchedulerKind::Tas, 3, 110.0, 60),
        result(SchedulerKind::NumaPlugin, 1, 50.0, 300),
        result(SchedulerKind::NumaPlugin, 2, 55.0, 200),
        result(SchedulerKind::NumaPlugin, 3, 60.0, 100),
        result(SchedulerKind::BindOnly, 1, 220.0, 10),
        result(SchedulerKind::BindOnly, 2, 220.0, 10),
        result(SchedulerKind::BindOnly, 3, 220.0, 10),
    ];
    let text = render(&env(), &options(3), &results, &["Scaled down.".into()]);
    // Medians: TAS 110 pods/s, p99 60 ms; plugin 55 pods/s, p99 200 ms.
    assert!(
        text.contains("| TAS scheduler | 110.0 | 20 | 60 | 1.50 | 64 | 1 | 0 | 1 |"),
        "{text}"
    );
    assert!(
        text.contains("throughput 2.00× (higher is better); p50 latency 1.00×, p99 latency 0.30×"),
        "{text}"
    );
    assert!(
        text.contains("TAS reaches 50% of the bind-only ceiling"),
        "{text}"
    );
    assert!(text.contains("| run 1 | run 2 | run 3 | median |"));
    assert!(
        text.contains("| TAS scheduler | 100.0 | 120.0 | 110.0 | 110.0 |"),
        "{text}"
    );
    assert!(text.contains("- Scaled down."));
    assert!(text.contains("10 kwok nodes, each 4 NUMA zones × 12 CPUs / 64 GiB"));
    assert!(text.contains("| etcd | etcd Version: 3.6.16 |"));
}

#[test]
fn missing_runs_show_a_dash() {
    let results = vec![result(SchedulerKind::Tas, 1, 100.0, 50)];
    let text = render(&env(), &options(2), &results, &[]);
    assert!(
        text.contains("| TAS scheduler | 100.0 | – | 100.0 |"),
        "{text}"
    );
    assert!(text.contains("| kube-scheduler + NodeResourceTopologyMatch (reserve cache) | – |"));
}
