//! The paced scenario: pods created at a fixed rate (200 and 1,000 pods/s) while the
//! warmed-up scheduler runs; creation → bound latency. The creator keeps enough
//! creations in flight to hold 1,000/s; the rate it achieved is reported next to the
//! latencies, so a figure taken below the target rate shows.

use super::{Column, Sizes, median, one_decimal, times, verdict, whole};
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;
use crate::{Mode, Options};

/// Creations in flight at most: at 1,000/s a creation may take 0.5 s before the pace
/// drops.
pub const CREATE_CONCURRENCY: usize = 512;

/// The paced run's options at `rate`: 500 nodes (quick 50), 5,000 pods (quick 300).
pub fn options(base: &Options, sizes: &Sizes, rate: f64) -> Options {
    let mut options = base.clone();
    options.mode = Mode::Paced;
    options.rate = rate;
    options.shape.nodes = sizes.nodes(500, 50);
    options.workload.pods = sizes
        .throughput_pods
        .unwrap_or_else(|| sizes.pods(5000, 300));
    options.create_concurrency = options.create_concurrency.max(CREATE_CONCURRENCY);
    options
}

fn ms(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1e3)
}

/// Achieved creation rate, latency p50/p99, throughput.
pub const COLUMNS: [Column; 4] = [
    Column {
        title: "created/s (achieved)",
        value: |r| Some(r.creation_rate),
        format: one_decimal,
    },
    Column {
        title: "p50 ms",
        value: |r| ms(r.p50),
        format: whole,
    },
    Column {
        title: "p99 ms",
        value: |r| ms(r.p99),
        format: whole,
    },
    Column {
        title: "bound/s",
        value: |r| Some(r.throughput),
        format: one_decimal,
    },
];

/// The goal: TAS p99 ≤ the default kube-scheduler's.
pub fn goals(results: &[RunResult]) -> Vec<String> {
    let p99 = |kind| median(results, kind, |r| ms(r.p99));
    let (tas, default) = (p99(SchedulerKind::Tas), p99(SchedulerKind::KubeScheduler));
    vec![format!(
        "Goal: TAS p99 ≤ the default kube-scheduler's — TAS ÷ kube-scheduler = {}: {}.",
        times(tas, default),
        verdict(tas.zip(default).map(|(t, d)| t <= d))
    )]
}
