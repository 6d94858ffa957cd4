//! The DRA scenario: GPUs and NICs allocated through Dynamic Resource Allocation
//! beside the CPUs the kubelet's CPU manager hands out. Nodes of 2 zones, each with
//! [`GPUS_PER_ZONE`] GPUs and [`NICS_PER_ZONE`](crate::dra::NICS_PER_ZONE) NICs published in ResourceSlices with
//! the standard `numaNode` and `pcieRoot` attributes ([`crate::dra`]); Guaranteed pods
//! of 1/2/4/8 CPUs, each with a claim from a template for one GPU, about 1 in 4 for a
//! GPU and a NIC on one PCIe root. Half the GPUs are asked for, so every pod fits.
//!
//! Every pod is created before the scheduler starts (backlog), so start → last bind
//! measures the scheduling, allocation included. Each run is followed by one of the same
//! pods without claims: the ratio of the two is what allocation costs per pod, in the
//! TAS scheduler's own decision time and in start → last bind for both schedulers.
//!
//! The kubelet referee puts each admitted pod's CPUs on a zone; the pod is aligned when
//! every device of its claim's allocation sits on that zone. kube-scheduler allocates
//! claims too, but without regard to the zone of the kubelet-managed CPUs.

use super::scale::micros;
use super::{Column, Sizes, times, verdict, whole};
use crate::dra::GPUS_PER_ZONE;
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;
use crate::workload::{Mix, Workload};
use crate::{Mode, Options};

/// The share of the cluster's GPUs the pods ask for.
pub const GPU_SHARE: f64 = 0.5;

/// The DRA run's options: 50 nodes (quick 8) of 2 zones, pods for half their GPUs
/// (unless `--pods` says otherwise), all created before the scheduler starts.
pub fn options(base: &Options, sizes: &Sizes) -> Options {
    let mut options = base.clone();
    options.mode = Mode::Backlog;
    options.shape.nodes = sizes.nodes(50, 8);
    options.shape.zones = 2;
    options.shape.devices_per_zone = 0;
    options.shape.hugepages_gib_per_zone = 0;
    let gpus = options.shape.nodes as f64 * f64::from(options.shape.zones * GPUS_PER_ZONE);
    options.workload = Workload {
        pods: sizes
            .pods
            .unwrap_or_else(|| (gpus * GPU_SHARE).floor() as usize),
        mix: Mix::Dra,
        ..base.workload.clone()
    };
    options
}

/// TAS and kube-scheduler, if selected (as in the scale scenario): the NUMA plugin's
/// kube-scheduler (v1.33) and the bind-only ceiling allocate no claims.
pub fn schedulers(selected: &[SchedulerKind]) -> Vec<SchedulerKind> {
    super::scale::schedulers(selected)
}

/// The aligned share, and the TAS scheduler's decision time.
pub const COLUMNS: [Column; 4] = [
    Column {
        title: "aligned % (devices on the CPUs' zone)",
        value: |r| r.dra.and_then(|d| d.aligned_share()),
        format: super::one_decimal,
    },
    Column {
        title: "unaligned pods",
        value: |r| r.dra.filter(|d| d.claims).map(|d| d.unaligned as f64),
        format: whole,
    },
    super::scale::DECISION_MEAN,
    super::scale::DECISION_P50,
];

/// The median over `kind`'s runs with (or without) claims of `value`.
fn median(
    results: &[RunResult],
    kind: SchedulerKind,
    claims: bool,
    value: fn(&RunResult) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = results
        .iter()
        .filter(|r| r.kind == kind && r.dra.is_some_and(|d| d.claims == claims))
        .filter_map(value)
        .collect();
    crate::stats::median(&values)
}

fn makespan(r: &RunResult) -> Option<f64> {
    r.makespan.map(|d| d.as_secs_f64())
}

fn figure(v: Option<f64>, format: fn(f64) -> String) -> String {
    v.map_or("–".into(), format)
}

/// The figures of issue 32: the aligned share, TAS against kube-scheduler, and what
/// allocation costs per pod.
pub fn goals(results: &[RunResult]) -> Vec<String> {
    let (tas, kube) = (SchedulerKind::Tas, SchedulerKind::KubeScheduler);
    let share = |kind| median(results, kind, true, |r| r.dra?.aligned_share());
    // The goal holds only if every run of TAS aligned every pod.
    let lowest = results
        .iter()
        .filter(|r| r.kind == tas)
        .filter_map(|r| r.dra?.aligned_share())
        .reduce(f64::min);
    let rejected = |kind| median(results, kind, true, |r| Some(r.rejected() as f64));
    let percent = |v: f64| format!("{v:.1} %");
    let count = |v: f64| format!("{v:.0}");
    let decision = |claims| {
        median(results, tas, claims, |r| {
            micros(r.decisions.map(|d| d.mean))
        })
    };
    let (with, without) = (decision(true), decision(false));
    let pods = results.iter().map(|r| r.pods).max().unwrap_or(0).max(1) as f64;
    let span = |kind, claims| median(results, kind, claims, makespan);
    let per_pod = |kind| {
        span(kind, true)
            .zip(span(kind, false))
            .map(|(a, b)| (a - b) * 1e3 / pods)
    };
    let ms = |v: f64| format!("{v:+.1} ms");
    vec![
        format!(
            "Goal: DRA devices on the NUMA zone of the pod's CPUs (issue 32) — aligned share of the admitted pods: TAS {} (lowest run {}), kube-scheduler {} (kubelet rejections: TAS {}, kube-scheduler {}): {}.",
            figure(share(tas), percent),
            figure(lowest, percent),
            figure(share(kube), percent),
            figure(rejected(tas), count),
            figure(rejected(kube), count),
            verdict(lowest.map(|v| v >= 100.0)),
        ),
        format!(
            "What allocation costs per pod (issue 32; a figure, no goal) — TAS decision mean {} µs with claims vs {} µs without ({}); start → last bind, with claims vs without: TAS {} s vs {} s ({}, {} per pod), kube-scheduler {} s vs {} s ({}, {} per pod).",
            figure(with, count),
            figure(without, count),
            times(with, without),
            figure(span(tas, true), super::two_decimals),
            figure(span(tas, false), super::two_decimals),
            times(span(tas, true), span(tas, false)),
            figure(per_pod(tas), ms),
            figure(span(kube, true), super::two_decimals),
            figure(span(kube, false), super::two_decimals),
            times(span(kube, true), span(kube, false)),
            figure(per_pod(kube), ms),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_gpus_of_two_zone_nodes_are_asked_for() {
        let base = crate::report::tests::options(1, SchedulerKind::ALL.to_vec());
        let sizes = Sizes {
            quick: true,
            ..Sizes::default()
        };
        let o = options(&base, &sizes);
        assert_eq!((o.shape.nodes, o.shape.zones), (8, 2));
        assert_eq!(o.workload.pods, 8 * 2 * GPUS_PER_ZONE as usize / 2);
        assert_eq!(o.workload.mix, Mix::Dra);
        assert_eq!(o.mode, Mode::Backlog);
        assert_eq!(
            schedulers(&o.schedulers),
            [SchedulerKind::Tas, SchedulerKind::KubeScheduler]
        );
    }
}
