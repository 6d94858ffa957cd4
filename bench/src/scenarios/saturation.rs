//! The saturation scenario: judges placement quality, not speed. Nodes of 4 zones ×
//! 16 CPUs with 2 devices and 4 GiB of 2 MiB hugepages per zone get a mixed workload
//! (Guaranteed pods of 1/2/4/8/16 CPUs, some with a device or hugepages, some
//! Burstable; [`crate::workload::saturation_pod`]) of 1.3× the cluster's CPUs, so
//! schedulers keep placing until nothing more fits. The run ends when nothing was bound
//! for the idle timeout. Every placement is judged by the kubelet referee, the nodes'
//! kubelets: pods admitted, pods rejected, pods left pending.

use std::time::Duration;

use super::{Column, Sizes, median, verdict, whole};
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;
use crate::workload::{Mix, MixedKind, Workload, mixed_kind};
use crate::{Mode, Options};

/// Requested CPUs (a Burstable pod's requests, half its limit) ÷ the cluster's CPUs.
pub const OVERCOMMIT: f64 = 1.3;
/// CPU sizes of the mix.
pub const CPU_SIZES: [u32; 5] = [1, 2, 4, 8, 16];

/// The saturation run's options: 200 nodes (quick 20) and enough pods to request 1.3×
/// their CPUs (unless `--pods` says otherwise), created at 200/s.
pub fn options(base: &Options, sizes: &Sizes) -> Options {
    let mut options = base.clone();
    options.mode = Mode::Paced;
    options.rate = 200.0;
    options.shape.nodes = sizes
        .saturation_nodes
        .unwrap_or_else(|| sizes.nodes(200, 20));
    options.shape.zones = 4;
    options.shape.zone_cpus = 16;
    options.shape.zone_memory_gib = 64;
    options.shape.devices_per_zone = 2;
    options.shape.hugepages_gib_per_zone = 4;
    options.idle_timeout = options.idle_timeout.min(Duration::from_secs(30));
    let mut workload = Workload {
        pods: 0,
        cpu_sizes: CPU_SIZES.to_vec(),
        memory_per_cpu_gib: 2,
        mix: Mix::Mixed,
    };
    workload.pods = sizes
        .pods
        .unwrap_or_else(|| pods_to_request(&workload, options.shape.total_cpus(), OVERCOMMIT));
    options.workload = workload;
    options
}

/// Millicores pod `i` of the mix requests.
pub fn requested_millicpus(workload: &Workload, i: usize) -> u64 {
    let cpus = u64::from(workload.cpus(i)) * 1000;
    match mixed_kind(i) {
        MixedKind::Burstable => cpus / 2,
        _ => cpus,
    }
}

/// The fewest pods of `workload`'s sequence that together request at least `factor` ×
/// `cluster_cpus`.
pub fn pods_to_request(workload: &Workload, cluster_cpus: u64, factor: f64) -> usize {
    let target = (cluster_cpus as f64 * factor * 1000.0).ceil() as u64;
    let mut sum = 0;
    let mut pods = 0;
    while sum < target {
        sum += requested_millicpus(workload, pods);
        pods += 1;
    }
    pods
}

/// The largest pods of the mix, whose admissions show whether whole zones were kept.
pub const LARGEST: u32 = CPU_SIZES[CPU_SIZES.len() - 1];

/// Bound pods, the kubelet's verdicts, and what the admitted pods request: the CPUs
/// and the largest pods, since admitting more small pods by turning large ones away
/// raises the pod count without using the cluster better.
pub const COLUMNS: [Column; 5] = [
    Column {
        title: "bound",
        value: |r| Some(r.bound as f64),
        format: whole,
    },
    Column {
        title: "admitted",
        value: |r| Some(r.tally.admitted as f64),
        format: whole,
    },
    Column {
        title: "TopologyAffinityError",
        value: |r| Some(r.tally.topology_errors() as f64),
        format: whole,
    },
    Column {
        title: "admitted CPUs",
        value: |r| Some(r.tally.admitted_millicpus as f64 / 1000.0),
        format: whole,
    },
    Column {
        title: "16-CPU pods admitted",
        value: |r| Some(r.tally.admitted_of(u64::from(LARGEST)) as f64),
        format: whole,
    },
];

/// The goal: TAS admits more pods than every peer, with no kubelet rejection.
pub fn goals(results: &[RunResult]) -> Vec<String> {
    let admitted = |kind| median(results, kind, |r| Some(r.tally.admitted as f64));
    let tas = admitted(SchedulerKind::Tas);
    let peers: Vec<(SchedulerKind, f64)> =
        [SchedulerKind::KubeScheduler, SchedulerKind::NumaPlugin]
            .into_iter()
            .filter_map(|k| admitted(k).map(|a| (k, a)))
            .collect();
    let best = peers.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let rejected = median(results, SchedulerKind::Tas, |r| Some(r.rejected() as f64));
    let peer_text: Vec<String> = peers
        .iter()
        .map(|(k, a)| format!("{} {a:.0}", k.id()))
        .collect();
    vec![
        format!(
            "Goal: TAS admits more pods than every peer — TAS {} vs {}: {}.",
            tas.map_or("–".into(), |t| format!("{t:.0}")),
            if peer_text.is_empty() {
                "no peer".into()
            } else {
                peer_text.join(", ")
            },
            verdict(tas.filter(|_| !peers.is_empty()).map(|t| t > best))
        ),
        format!(
            "Goal: 0 kubelet rejections for TAS — {}: {}.",
            rejected.map_or("–".into(), |r| format!("{r:.0}")),
            verdict(rejected.map(|r| r == 0.0))
        ),
        requested_line(results),
    ]
}

/// What the admitted pods request, per scheduler (medians): not a goal, the context
/// of the pod count.
fn requested_line(results: &[RunResult]) -> String {
    let parts: Vec<String> = [
        SchedulerKind::Tas,
        SchedulerKind::NumaPlugin,
        SchedulerKind::KubeScheduler,
    ]
    .into_iter()
    .filter_map(|k| {
        let cpus = median(results, k, |r| {
            Some(r.tally.admitted_millicpus as f64 / 1000.0)
        })?;
        let largest = median(results, k, |r| {
            Some(r.tally.admitted_of(u64::from(LARGEST)) as f64)
        })?;
        Some(format!(
            "{} {cpus:.0} CPUs, {largest:.0} of {LARGEST} CPUs",
            k.id()
        ))
    })
    .collect();
    format!(
        "Admitted pods request (medians): {}.",
        if parts.is_empty() {
            "–".to_owned()
        } else {
            parts.join("; ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enough_pods_to_request_the_overcommit() {
        let workload = Workload {
            pods: 0,
            cpu_sizes: CPU_SIZES.to_vec(),
            memory_per_cpu_gib: 2,
            mix: Mix::Mixed,
        };
        let pods = pods_to_request(&workload, 1280, 1.3);
        let requested: u64 = (0..pods).map(|i| requested_millicpus(&workload, i)).sum();
        let one_less = requested - requested_millicpus(&workload, pods - 1);
        assert!(requested >= 1_664_000, "{requested}");
        assert!(one_less < 1_664_000, "{one_less}");
        assert_eq!(pods_to_request(&workload, 0, 1.3), 0);
    }
}
