//! The scale scenario: 5,000 nodes × 4 zones (quick 200), a paced workload at 200/s,
//! the scheduler's peak memory and — for TAS — its own decision-time histogram
//! (`tas_scheduler_decision_duration_seconds`, read from its `/metrics` at the end of
//! each run), the in-cluster counterpart of the criterion figure. kube-scheduler runs
//! for its memory; the NUMA plugin and the bind-only ceiling are left out (the one is
//! very slow at this size, the other makes no decision).

use super::{Column, Sizes, median, verdict, whole};
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;
use crate::{Mode, Options};

/// The scale run's options: 5,000 nodes (quick 200), 1,000 pods (quick 100) at 200/s.
pub fn options(base: &Options, sizes: &Sizes) -> Options {
    let mut options = base.clone();
    options.mode = Mode::Paced;
    options.rate = 200.0;
    options.shape.nodes = sizes.nodes(5000, 200);
    options.shape.zones = 4;
    options.workload.pods = sizes.pods(1000, 100);
    options
}

/// TAS and kube-scheduler, if selected.
pub fn schedulers(selected: &[SchedulerKind]) -> Vec<SchedulerKind> {
    selected
        .iter()
        .copied()
        .filter(|k| matches!(k, SchedulerKind::Tas | SchedulerKind::KubeScheduler))
        .collect()
}

/// Seconds as microseconds, if finite.
pub(super) fn micros(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite()).map(|v| v * 1e6)
}

/// The TAS scheduler's mean decision time (its histogram).
pub const DECISION_MEAN: Column = Column {
    title: "decision mean µs",
    value: |r| micros(r.decisions.map(|d| d.mean)),
    format: whole,
};

/// The TAS scheduler's median decision time (its histogram).
pub const DECISION_P50: Column = Column {
    title: "decision p50 µs",
    value: |r| micros(r.decisions.map(|d| d.p50)),
    format: whole,
};

/// The TAS scheduler's 99th-percentile decision time (interpolated within the buckets).
pub const DECISION_P99: Column = Column {
    title: "decision p99 µs",
    value: |r| micros(r.decisions.map(|d| d.p99)),
    format: whole,
};

/// Decision time (the scheduler's histogram) and creation → bound p99.
pub const COLUMNS: [Column; 4] = [
    DECISION_MEAN,
    DECISION_P50,
    DECISION_P99,
    Column {
        title: "p99 ms (creation → bound)",
        value: |r| r.p99.map(|d| d.as_secs_f64() * 1e3),
        format: whole,
    },
];

/// The goals: one decision < 1 ms, scheduler RSS < 100 MiB.
pub fn goals(results: &[RunResult]) -> Vec<String> {
    let tas = SchedulerKind::Tas;
    let mean = median(results, tas, |r| micros(r.decisions.map(|d| d.mean)));
    let p99 = median(results, tas, |r| micros(r.decisions.map(|d| d.p99)));
    let rss = median(results, tas, |r| {
        Some(r.peak_rss_bytes as f64 / f64::from(1 << 20))
    });
    vec![
        format!(
            "Goal: one decision < 1 ms — in the cluster, mean {} µs, p99 {} µs (bucket-interpolated): {} (mean), {} (p99). The criterion figure is in the micro-benchmarks below.",
            mean.map_or("–".into(), |v| format!("{v:.0}")),
            p99.map_or("–".into(), |v| format!("{v:.0}")),
            verdict(mean.map(|v| v < 1000.0)),
            verdict(p99.map(|v| v < 1000.0)),
        ),
        format!(
            "Goal: scheduler RSS < 100 MiB — TAS peak {} MiB: {}.",
            rss.map_or("–".into(), |v| format!("{v:.0}")),
            verdict(rss.map(|v| v < 100.0))
        ),
    ]
}
