//! A TAS scheduler started right after the previous one was stopped — its pods
//! deleted, every NRT rewritten by the node agent, the state a restarted or failed-over
//! scheduler meets — must bind without waiting out the previous process's Lease.
//!
//! Two backlog runs of the benchmark's own runner on a tiny cluster: the second run's
//! scheduler must bind its first pod well within the lease duration (15 s) of its
//! start. When the runner killed the scheduler outright (SIGKILL), the Lease stayed
//! held and the second scheduler bound nothing for the whole lease duration.
//!
//! Needs the cluster tools (`TAS_TOOLS_BIN`), the referee (`TAS_REFEREE_BIN`) and a
//! built `tas-scheduler` next to this test's target directory
//! (`cargo build -p tas-scheduler`).

use std::path::PathBuf;
use std::time::Duration;

use tas_bench::schedulers::{Binaries, SchedulerKind};
use tas_bench::workload::{ClusterShape, Mix, Workload};
use tas_bench::{Mode, Options, run_all};

mod support;
use support::tas_scheduler;

/// The Lease duration of the scheduler's default configuration: a second scheduler
/// that has to wait the Lease out binds nothing for at least this long.
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// The first bind must come well before the Lease could have expired: this is a
/// stall detector, not a speed figure (start-up on a loaded machine takes a few
/// seconds at most).
const FIRST_BIND_DEADLINE: Duration = Duration::from_secs(10);

fn options() -> Options {
    Options {
        shape: ClusterShape {
            nodes: 2,
            zones: 2,
            zone_cpus: 4,
            zone_memory_gib: 8,
            max_pods: 110,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        },
        workload: Workload {
            pods: 6,
            cpu_sizes: vec![1, 2],
            memory_per_cpu_gib: 1,
            mix: Mix::Guaranteed,
        },
        rate: 100.0,
        runs: 2,
        schedulers: vec![SchedulerKind::Tas],
        qps: 100.0,
        burst: 100,
        kube_scheduler_verbosity: None,
        tas_scoring: None,
        create_concurrency: 8,
        binder_concurrency: 8,
        nrt_debounce: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(60),
        early_end: true,
        wait_for_claims: true,
        binaries: Binaries {
            tas: tas_scheduler(),
            kube_scheduler: PathBuf::new(),
            schedplugins: PathBuf::new(),
        },
        crd_dir: tas_testcluster::crd_dir(),
        mode: Mode::Backlog,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_scheduler_binds_without_waiting_out_the_previous_lease() {
    let (_bench, results) = run_all(options(), |r| {
        eprintln!(
            "run {}: {}/{} bound, first bind {:?} and last {:?} after start",
            r.round, r.bound, r.pods, r.first_bind, r.makespan
        );
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(results.len(), 2);
    for r in &results {
        assert_eq!(r.bound, r.pods, "run {}: every pod is bound", r.round);
        assert_eq!(
            r.rejected(),
            0,
            "run {}: the kubelet admits every pod",
            r.round
        );
    }
    let second = &results[1];
    let first_bind = second.first_bind.expect("the second run bound a pod");
    assert!(
        first_bind < FIRST_BIND_DEADLINE,
        "the second scheduler bound its first pod {first_bind:?} after it started: it waited \
         for the previous scheduler's Lease ({LEASE_DURATION:?}) instead of taking it over"
    );
}
