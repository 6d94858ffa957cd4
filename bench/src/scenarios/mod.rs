//! The scenarios of one `tas-bench` run, each on a control plane of its own:
//!
//! - [`backlog`]: every pod created before the scheduler starts; binds per second;
//! - [`paced`]: pods created at a fixed rate (200 and 1,000/s); creation → bound;
//! - [`saturation`]: a mixed workload created until nothing more fits; admitted,
//!   rejected and pending pods;
//! - [`scale`]: 5,000 nodes; the scheduler's memory and its own decision times;
//! - [`scale_large`]: 15,000 nodes and a 30,000-pod backlog; memory, decision times,
//!   binds per second;
//! - [`updater`]: one real `tas-updater` against the referee's podresources server;
//! - [`dra`]: DRA GPUs and NICs beside kubelet-managed CPUs; the share of pods whose
//!   devices sit on their CPUs' zone, and what allocation costs per pod.
//!
//! The cluster scenarios share the runner ([`crate::run_all`]); each module here turns the
//! common [`Options`] into its own and names the columns and goals of its table.

pub mod backlog;
pub mod dra;
pub mod paced;
pub mod saturation;
pub mod scale;
pub mod scale_large;
pub mod updater;

use crate::Options;
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;

/// One scenario of the report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scenario {
    /// See [`backlog`].
    Backlog,
    /// See [`paced`], at this many pods per second.
    Paced(f64),
    /// See [`saturation`].
    Saturation,
    /// See [`scale`].
    Scale,
    /// See [`scale_large`].
    ScaleLarge,
    /// See [`updater`].
    Updater,
    /// See [`dra`].
    Dra,
}

/// Every scenario id the `--scenario` flag takes.
pub const IDS: [&str; 7] = [
    "backlog",
    "paced",
    "saturation",
    "scale",
    "scale-15k",
    "updater",
    "dra",
];

impl Scenario {
    /// The scenarios named by `id` (`paced` is one per rate of `rates`).
    pub fn from_id(id: &str, rates: &[f64]) -> Option<Vec<Self>> {
        Some(match id {
            "backlog" => vec![Self::Backlog],
            "paced" => rates.iter().map(|&r| Self::Paced(r)).collect(),
            "saturation" => vec![Self::Saturation],
            "scale" => vec![Self::Scale],
            "scale-15k" => vec![Self::ScaleLarge],
            "updater" => vec![Self::Updater],
            "dra" => vec![Self::Dra],
            _ => return None,
        })
    }

    /// Short name: its id, with the rate for `paced`.
    pub fn id(self) -> String {
        match self {
            Self::Backlog => "backlog".into(),
            Self::Paced(rate) => format!("paced {rate}/s"),
            Self::Saturation => "saturation".into(),
            Self::Scale => "scale".into(),
            Self::ScaleLarge => "scale-15k".into(),
            Self::Updater => "updater".into(),
            Self::Dra => "dra".into(),
        }
    }

    /// Whether the scenario may run while the updater scenario's idle window counts
    /// NRT writes beside it: only one whose figures are counts rather than speeds
    /// (saturation: pods admitted, rejected, pending; its CPU seconds and peak memory
    /// are the scheduler process's own). The others wait for the window to end.
    pub fn beside_idle_updater(self) -> bool {
        self == Self::Saturation
    }

    /// Heading in the report.
    pub fn title(self) -> String {
        match self {
            Self::Backlog => "Backlog (all pods created before the scheduler starts)".into(),
            Self::Paced(rate) => format!("Paced at {rate} pods/s"),
            Self::Saturation => "Saturation (mixed workload until nothing more fits)".into(),
            Self::Scale => "Scale (scheduler memory and decision time on a large cluster)".into(),
            Self::ScaleLarge => {
                "Scale, 15,000 nodes (memory, decision time and a 30,000-pod backlog)".into()
            }
            Self::Updater => "Updater (one tas-updater against the referee)".into(),
            Self::Dra => "DRA (GPUs and NICs beside kubelet-managed CPUs)".into(),
        }
    }
}

/// Sizes a run is asked for on the command line (`None`: the scenario's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sizes {
    /// A short smoke test.
    pub quick: bool,
    /// Nodes.
    pub nodes: Option<usize>,
    /// Pods per run.
    pub pods: Option<usize>,
    /// Pods per run of the backlog and paced scenarios only (before `pods`).
    pub throughput_pods: Option<usize>,
    /// Nodes of the saturation scenario only (before `nodes`); its pods follow.
    pub saturation_nodes: Option<usize>,
}

impl Sizes {
    /// `full` or `quick` unless overridden.
    pub fn nodes(&self, full: usize, quick: usize) -> usize {
        self.nodes.unwrap_or(if self.quick { quick } else { full })
    }

    /// `full` or `quick` unless overridden.
    pub fn pods(&self, full: usize, quick: usize) -> usize {
        self.pods.unwrap_or(if self.quick { quick } else { full })
    }
}

/// The options of cluster scenario `scenario` from the common `base`; `None` for the
/// updater, which has no scheduler runs.
pub fn options(scenario: Scenario, base: &Options, sizes: &Sizes) -> Option<Options> {
    match scenario {
        Scenario::Backlog => Some(backlog::options(base, sizes)),
        Scenario::Paced(rate) => Some(paced::options(base, sizes, rate)),
        Scenario::Saturation => Some(saturation::options(base, sizes)),
        Scenario::Scale => Some(scale::options(base, sizes)),
        Scenario::ScaleLarge => Some(scale_large::options(base, sizes)),
        Scenario::Dra => Some(dra::options(base, sizes)),
        Scenario::Updater => None,
    }
}

/// One column of a scenario's table.
pub struct Column {
    /// Header.
    pub title: &'static str,
    /// The figure of one run.
    pub value: fn(&RunResult) -> Option<f64>,
    /// How to print it.
    pub format: fn(f64) -> String,
}

/// A figure with one decimal.
pub fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

/// A whole number.
pub fn whole(v: f64) -> String {
    format!("{v:.0}")
}

/// A figure with two decimals.
pub fn two_decimals(v: f64) -> String {
    format!("{v:.2}")
}

/// The columns after every scenario's own: how long the scheduler took from its start
/// to the first bind and to the last (in seconds), so a stall at start-up shows
/// whatever the scenario's own figures measure from.
pub const START_COLUMNS: [Column; 2] = [
    Column {
        title: "first bind s (from start)",
        value: |r| r.first_bind.map(|d| d.as_secs_f64()),
        format: two_decimals,
    },
    Column {
        title: "makespan s (start → last bind)",
        value: |r| r.makespan.map(|d| d.as_secs_f64()),
        format: one_decimal,
    },
];

/// The columns every scenario's table ends with: scheduler CPU and memory, goodput,
/// kubelet rejections and pods left pending.
pub const COMMON_COLUMNS: [Column; 5] = [
    Column {
        title: "CPU s",
        value: |r| Some(r.cpu.as_secs_f64()),
        format: two_decimals,
    },
    Column {
        title: "peak RSS MiB",
        value: |r| Some(r.peak_rss_bytes as f64 / f64::from(1 << 20)),
        format: whole,
    },
    Column {
        title: "goodput (bound − rejected)",
        value: |r| Some(r.goodput() as f64),
        format: whole,
    },
    Column {
        title: "kubelet-rejected",
        value: |r| Some(r.rejected() as f64),
        format: whole,
    },
    Column {
        title: "pending",
        value: |r| Some(r.pending() as f64),
        format: whole,
    },
];

/// The columns of `scenario`'s table: its own, the start columns, the common ones.
pub fn columns(scenario: Scenario) -> Vec<&'static Column> {
    let own: &'static [Column] = match scenario {
        Scenario::Backlog => &backlog::COLUMNS,
        Scenario::Paced(_) => &paced::COLUMNS,
        Scenario::Saturation => &saturation::COLUMNS,
        Scenario::Scale => &scale::COLUMNS,
        Scenario::ScaleLarge => &scale_large::COLUMNS,
        Scenario::Dra => &dra::COLUMNS,
        Scenario::Updater => &[],
    };
    own.iter()
        .chain(START_COLUMNS.iter())
        .chain(COMMON_COLUMNS.iter())
        .collect()
}

/// The kinds of `schedulers` that `scenario` runs.
pub fn schedulers(scenario: Scenario, selected: &[SchedulerKind]) -> Vec<SchedulerKind> {
    match scenario {
        Scenario::Scale | Scenario::ScaleLarge => scale::schedulers(selected),
        Scenario::Dra => dra::schedulers(selected),
        _ => selected.to_vec(),
    }
}

/// The median over `kind`'s runs of `value`.
pub fn median(
    results: &[RunResult],
    kind: SchedulerKind,
    value: fn(&RunResult) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = results
        .iter()
        .filter(|r| r.kind == kind)
        .filter_map(value)
        .collect();
    crate::stats::median(&values)
}

/// `a ÷ b` as `0.93×`, or `–`.
pub fn times(a: Option<f64>, b: Option<f64>) -> String {
    a.zip(b)
        .and_then(|(a, b)| crate::stats::ratio(a, b))
        .map_or("–".into(), |r| format!("{r:.2}×"))
}

/// `met`, `missed` or `not measured` for a comparison that may lack its figures.
pub fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "**met**",
        Some(false) => "**missed**",
        None => "not measured",
    }
}
