//! The large-scale scenario: 15,000 nodes × 4 zones (quick 300) and a backlog of
//! 30,000 pods (quick 600), every pod created before the scheduler starts. It asks
//! what the scale scenario asks — the scheduler's memory and TAS's own decision
//! times — at three times the nodes, and how fast each scheduler drains a backlog
//! that large. TAS and kube-scheduler run; the NUMA plugin and the bind-only ceiling
//! are left out, as in [`super::scale`].

use super::{Column, Sizes, median, times, verdict};
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;
use crate::{Mode, Options};

/// The options: 15,000 nodes (quick 300) × 4 zones, 30,000 pods (quick 600), backlog.
pub fn options(base: &Options, sizes: &Sizes) -> Options {
    let mut options = base.clone();
    options.mode = Mode::Backlog;
    options.shape.nodes = sizes.nodes(15_000, 300);
    options.shape.zones = 4;
    options.workload.pods = sizes.pods(30_000, 600);
    options.create_concurrency = options.create_concurrency.max(128);
    options
}

/// Binds per second over the drain and TAS's decision times.
pub const COLUMNS: [Column; 3] = [
    super::backlog::BIND_RATE,
    super::scale::DECISION_MEAN,
    super::scale::DECISION_P99,
];

/// The goals: TAS's peak RSS < 200 MiB at this size; TAS drains at least as fast as
/// kube-scheduler. Decision times are reported, judged at 5,000 nodes (scale).
pub fn goals(results: &[RunResult]) -> Vec<String> {
    let rss = |kind| {
        median(results, kind, |r| {
            Some(r.peak_rss_bytes as f64 / f64::from(1 << 20))
        })
    };
    let rate = |kind| median(results, kind, |r| Some(r.bind_rate));
    let tas_rss = rss(SchedulerKind::Tas);
    let (tas, default) = (rate(SchedulerKind::Tas), rate(SchedulerKind::KubeScheduler));
    vec![
        format!(
            "Goal: scheduler RSS < 200 MiB at this size — TAS peak {} MiB (kube-scheduler {} MiB): {}.",
            tas_rss.map_or("–".into(), |v| format!("{v:.0}")),
            rss(SchedulerKind::KubeScheduler).map_or("–".into(), |v| format!("{v:.0}")),
            verdict(tas_rss.map(|v| v < 200.0))
        ),
        format!(
            "Goal: TAS drains the backlog at least as fast as kube-scheduler — TAS ÷ kube-scheduler = {}: {}.",
            times(tas, default),
            verdict(tas.zip(default).map(|(t, d)| t >= d))
        ),
    ]
}
