//! The backlog scenario, shaped like kube-scheduler's scheduler_perf
//! SchedulingThroughput: every pod exists before the scheduler starts, so the figure
//! is how fast it drains a queue, not the creation rate. Binds per second over the
//! whole drain (first bind → last bind) and the median and 90th percentile of the binds
//! in each whole second. The bind-only ceiling gets the same backlog with many binds in
//! flight, enough to saturate the API server.

use super::{Column, Sizes, median, one_decimal, times, verdict};
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;
use crate::{Mode, Options};

/// Binds in flight for the bind-only ceiling: far more than the API server completes
/// at once on this machine, so it, not the binder, is the limit.
pub const CEILING_CONCURRENCY: usize = 256;

/// The backlog run's options: 500 nodes (quick 50), 5,000 pods (quick 300).
pub fn options(base: &Options, sizes: &Sizes) -> Options {
    let mut options = base.clone();
    options.mode = Mode::Backlog;
    options.shape.nodes = sizes.nodes(500, 50);
    options.workload.pods = sizes
        .throughput_pods
        .unwrap_or_else(|| sizes.pods(5000, 300));
    options.binder_concurrency = options.binder_concurrency.max(CEILING_CONCURRENCY);
    options.create_concurrency = options.create_concurrency.max(128);
    options
}

/// Binds per second over the drain, first to last bind.
pub const BIND_RATE: Column = Column {
    title: "binds/s (first → last bind)",
    value: |r| Some(r.bind_rate),
    format: one_decimal,
};

/// Average binds/s, per-second median and 90th percentile.
pub const COLUMNS: [Column; 3] = [
    BIND_RATE,
    Column {
        title: "binds/s per second p50",
        value: |r| r.per_second_p50,
        format: one_decimal,
    },
    Column {
        title: "binds/s per second p90",
        value: |r| r.per_second_p90,
        format: one_decimal,
    },
];

/// The goals: TAS ≥ 90 % of the bind-only ceiling and ≥ the default kube-scheduler;
/// TAS's makespan ≤ kube-scheduler's in every round; TAS's first bind ≤ 1 s after its
/// start.
pub fn goals(results: &[RunResult]) -> Vec<String> {
    let rate = |kind| median(results, kind, |r| Some(r.bind_rate));
    let tas = rate(SchedulerKind::Tas);
    let ceiling = rate(SchedulerKind::BindOnly);
    let default = rate(SchedulerKind::KubeScheduler);
    let slowest_first_bind = results
        .iter()
        .filter(|r| r.kind == SchedulerKind::Tas)
        .filter_map(|r| r.first_bind)
        .max()
        .map(|d| d.as_secs_f64());
    vec![
        format!(
            "Goal: TAS ≥ 90 % of the bind-only ceiling — TAS ÷ bind-only = {}: {}.",
            times(tas, ceiling),
            verdict(tas.zip(ceiling).map(|(t, c)| t >= 0.9 * c))
        ),
        format!(
            "Goal: TAS ≥ the default kube-scheduler — TAS ÷ kube-scheduler = {}: {}.",
            times(tas, default),
            verdict(tas.zip(default).map(|(t, d)| t >= d))
        ),
        makespan_goal(results),
        format!(
            "Goal: TAS binds its first pod ≤ 1 s after it starts — {} s (slowest run): {}.",
            slowest_first_bind.map_or("–".into(), |v| format!("{v:.2}")),
            verdict(slowest_first_bind.map(|v| v <= 1.0))
        ),
    ]
}

/// TAS's makespan against kube-scheduler's, round by round.
fn makespan_goal(results: &[RunResult]) -> String {
    let of = |kind, round| {
        results
            .iter()
            .find(|r| r.kind == kind && r.round == round)
            .and_then(|r| r.makespan)
    };
    let mut rounds: Vec<u32> = results.iter().map(|r| r.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let pairs: Vec<(f64, f64)> = rounds
        .iter()
        .filter_map(|&round| {
            let tas = of(SchedulerKind::Tas, round)?;
            let default = of(SchedulerKind::KubeScheduler, round)?;
            Some((tas.as_secs_f64(), default.as_secs_f64()))
        })
        .collect();
    let shown: Vec<String> = pairs
        .iter()
        .map(|(t, d)| format!("{t:.1} vs {d:.1}"))
        .collect();
    format!(
        "Goal: TAS makespan ≤ kube-scheduler's in every run — per round, s: {}: {}.",
        if shown.is_empty() {
            "–".into()
        } else {
            shown.join(", ")
        },
        verdict((!pairs.is_empty()).then(|| pairs.iter().all(|(t, d)| t <= d)))
    )
}
