//! The DRA scenario of the benchmark at its smallest: on a real control plane with the
//! controller manager, both schedulers allocate the claims the ResourceClaim controller
//! generates from the templates, every pod is bound and admitted by the kubelet
//! referee, and the runner judges each admitted pod's devices against its CPUs' zone.
//! TAS puts every pod's devices on the zone of its CPUs; kube-scheduler is only
//! counted (it allocates without regard to the CPUs). The runs without claims judge
//! nothing.
//!
//! Needs the cluster tools (`TAS_TOOLS_BIN`), the referee (`TAS_REFEREE_BIN`) and a
//! built `tas-scheduler` next to this test's target directory
//! (`cargo build -p tas-scheduler`).

use std::path::PathBuf;

use tas_bench::scenarios::{self, Scenario, Sizes};
use tas_bench::schedulers::{Binaries, SchedulerKind};
use tas_bench::workload::{ClusterShape, Mix, Workload};
use tas_bench::{Mode, Options, run_all};
use tas_testcluster::Tools;

mod support;
use support::tas_scheduler;

/// The scenario's own options for 2 nodes (8 pods), one round.
fn options() -> Options {
    let tools = Tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let base = Options {
        shape: ClusterShape {
            nodes: 0,
            zones: 4,
            zone_cpus: 12,
            zone_memory_gib: 64,
            max_pods: 110,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        },
        workload: Workload {
            pods: 0,
            cpu_sizes: vec![1, 2, 4, 8],
            memory_per_cpu_gib: 4,
            mix: Mix::Guaranteed,
        },
        rate: 200.0,
        runs: 1,
        schedulers: SchedulerKind::ALL.to_vec(),
        qps: 1000.0,
        burst: 1000,
        kube_scheduler_verbosity: None,
        tas_scoring: None,
        create_concurrency: 16,
        binder_concurrency: 16,
        nrt_debounce: std::time::Duration::from_millis(200),
        idle_timeout: std::time::Duration::from_secs(60),
        early_end: true,
        wait_for_claims: true,
        binaries: Binaries {
            tas: tas_scheduler(),
            kube_scheduler: tools.binary("kube-scheduler"),
            schedplugins: PathBuf::new(),
        },
        crd_dir: tas_testcluster::crd_dir(),
        mode: Mode::Paced,
    };
    let sizes = Sizes {
        nodes: Some(2),
        ..Sizes::default()
    };
    let mut options = scenarios::options(Scenario::Dra, &base, &sizes).expect("a cluster scenario");
    options.schedulers = scenarios::schedulers(Scenario::Dra, &options.schedulers);
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tas_puts_every_pods_devices_on_its_cpus_zone() {
    let options = options();
    assert_eq!(
        options.schedulers,
        [SchedulerKind::Tas, SchedulerKind::KubeScheduler]
    );
    let pods = options.workload.pods;
    assert_eq!(pods, 8, "half the 16 GPUs of 2 nodes");
    let (_bench, results) = run_all(options, |r| {
        eprintln!(
            "{} run {}: {}/{} bound, rejected {:?}, makespan {:?}, decisions {:?}, DRA {:?}",
            r.kind.id(),
            r.round,
            r.bound,
            r.pods,
            r.tally.rejected,
            r.makespan,
            r.decisions,
            r.dra
        );
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(results.len(), 4, "each scheduler with claims and without");
    for r in &results {
        let dra = r.dra.expect("a DRA run is judged");
        let what = format!("{} ({:?})", r.kind.id(), dra);
        assert_eq!(r.bound, pods, "{what}: every pod is bound");
        if !dra.claims {
            assert_eq!(dra.judged(), 0, "{what}: no claims, nothing judged");
            continue;
        }
        // Every admitted pod has exclusive CPUs, so each is judged; none is unknown.
        assert_eq!(dra.judged(), r.tally.admitted, "{what}");
        assert_eq!(dra.unknown, 0, "{what}: every pod's devices were found");
        if r.kind == SchedulerKind::Tas {
            assert_eq!(r.rejected(), 0, "{what}: the kubelet admits every pod");
            assert_eq!(
                dra.aligned, pods,
                "{what}: every pod's devices on its CPUs' zone"
            );
            assert!(
                r.decisions.is_some(),
                "{what}: its decision times were read"
            );
        }
    }
}
