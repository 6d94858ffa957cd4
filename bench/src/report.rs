//! The markdown report: the environment, then one section per scenario — its setup,
//! a table of every scheduler's figures (each the median of the runs with min–max) and
//! the goals next to them with the ratios — then the updater's figures and how
//! everything is measured. Pure: [`render`] takes the figures and the environment.

use std::fmt::Write;

use crate::Mode;
use crate::Options;
use crate::environment::Environment;
use crate::run::RunResult;
use crate::scenarios::updater::UpdaterResult;
use crate::scenarios::{self, Column, Scenario, verdict};
use crate::schedulers::SchedulerKind;
use crate::stats::Spread;

/// One cluster scenario's figures.
pub struct Section<'a> {
    /// Which scenario.
    pub scenario: Scenario,
    /// What it ran with.
    pub options: &'a Options,
    /// Every run of every scheduler.
    pub results: &'a [RunResult],
}

/// Which runs of a scheduler a row shows: all of them, or (DRA scenario) those whose
/// pods had claims or those of the same pods without.
type Variant = Option<bool>;

fn variant(r: &RunResult) -> Variant {
    r.dra.map(|d| d.claims)
}

/// The cell of `column` for `kind`'s runs of `which`: median (min–max) over them, `–`
/// without any.
fn cell(results: &[RunResult], kind: SchedulerKind, which: Variant, column: &Column) -> String {
    let values: Vec<f64> = results
        .iter()
        .filter(|r| r.kind == kind && variant(r) == which)
        .filter_map(|r| (column.value)(r))
        .collect();
    Spread::of(&values).map_or("–".into(), |s| s.render(column.format))
}

/// The table of one scenario: a row per scheduler that ran (two in the DRA scenario:
/// with claims, and the same pods without).
pub fn table(section: &Section<'_>) -> String {
    let mut out = String::new();
    let columns = scenarios::columns(section.scenario);
    let titles: Vec<&str> = columns.iter().map(|c| c.title).collect();
    let _ = writeln!(out, "| Scheduler | runs | {} |", titles.join(" | "));
    let _ = writeln!(out, "| --- | ---: |{}", " ---: |".repeat(columns.len()));
    let mut variants: Vec<Variant> = section.results.iter().map(variant).collect();
    // With claims first.
    variants.sort_by_key(|v| std::cmp::Reverse(*v));
    variants.dedup();
    for kind in &section.options.schedulers {
        for &which in &variants {
            let runs = section
                .results
                .iter()
                .filter(|r| r.kind == *kind && variant(r) == which)
                .count();
            let cells: Vec<String> = columns
                .iter()
                .map(|c| cell(section.results, *kind, which, c))
                .collect();
            let title = match which {
                None => kind.title().to_owned(),
                Some(true) => format!("{}, pods with claims", kind.title()),
                Some(false) => format!("{}, same pods without claims", kind.title()),
            };
            let _ = writeln!(out, "| {title} | {runs} | {} |", cells.join(" | "));
        }
    }
    out
}

/// The goal lines of a scenario.
pub fn goals(section: &Section<'_>) -> Vec<String> {
    match section.scenario {
        Scenario::Backlog => scenarios::backlog::goals(section.results),
        Scenario::Paced(_) => scenarios::paced::goals(section.results),
        Scenario::Saturation => scenarios::saturation::goals(section.results),
        Scenario::Scale => scenarios::scale::goals(section.results),
        Scenario::ScaleLarge => scenarios::scale_large::goals(section.results),
        Scenario::Dra => scenarios::dra::goals(section.results),
        Scenario::Updater => Vec::new(),
    }
}

fn setup_line(section: &Section<'_>) -> String {
    let o = section.options;
    let shape = &o.shape;
    let mut extras = String::new();
    if shape.devices_per_zone > 0 {
        let _ = write!(extras, ", {} devices", shape.devices_per_zone);
    }
    if shape.hugepages_gib_per_zone > 0 {
        let _ = write!(
            extras,
            ", {} GiB of 2 MiB hugepages",
            shape.hugepages_gib_per_zone
        );
    }
    let sizes: Vec<String> = o.workload.cpu_sizes.iter().map(u32::to_string).collect();
    let pods = match o.workload.mix {
        crate::workload::Mix::Guaranteed => format!(
            "{} Guaranteed pods of {} CPUs ({} GiB per CPU)",
            o.workload.pods,
            sizes.join("/"),
            o.workload.memory_per_cpu_gib
        ),
        crate::workload::Mix::Mixed => format!(
            "{} pods of {} CPUs ({} GiB per CPU): 1 in 6 Burstable (requests half its CPUs), the rest Guaranteed, of those about 1 in 8 with a device and 1 in 8 with 1 GiB of hugepages — {:.0} CPUs requested for {} in the cluster",
            o.workload.pods,
            sizes.join("/"),
            o.workload.memory_per_cpu_gib,
            (0..o.workload.pods)
                .map(|i| scenarios::saturation::requested_millicpus(&o.workload, i))
                .sum::<u64>() as f64
                / 1000.0,
            shape.total_cpus()
        ),
        crate::workload::Mix::Dra => format!(
            "{} DRA devices per node ({} GPUs and {} NICs per zone, in ResourceSlices with `numaNode` and `pcieRoot`); {} Guaranteed pods of {} CPUs ({} GiB per CPU), each with a claim from a template for one GPU, about 1 in 4 for a GPU and a NIC on one PCIe root (`matchAttribute`); the controller manager generates the claims; each run is followed by one of the same pods without claims",
            shape.zones * (crate::dra::GPUS_PER_ZONE + crate::dra::NICS_PER_ZONE),
            crate::dra::GPUS_PER_ZONE,
            crate::dra::NICS_PER_ZONE,
            o.workload.pods,
            sizes.join("/"),
            o.workload.memory_per_cpu_gib,
        ),
    };
    let how = match o.mode {
        Mode::Backlog if o.schedulers.contains(&SchedulerKind::BindOnly) => format!(
            "all created before the scheduler starts; bind-only with {} binds in flight",
            o.binder_concurrency
        ),
        Mode::Backlog => "all created before the scheduler starts".into(),
        Mode::Paced => format!(
            "created at {} pods/s (at most {} creations in flight)",
            o.rate, o.create_concurrency
        ),
    };
    let ends = if o.early_end {
        format!(
            "every pod is bound, every pod left fits no node even at node level, every pod left is reported Unschedulable by its scheduler and nothing was bound for {} s, or nothing was bound for {} s",
            crate::run_end::SETTLE.as_secs(),
            o.idle_timeout.as_secs()
        )
    } else {
        format!(
            "every pod is bound or nothing was bound for {} s",
            o.idle_timeout.as_secs()
        )
    };
    format!(
        "{} nodes × {} zones of {} CPUs / {} GiB{extras}; {pods}, {how}; {} run(s) per scheduler, interleaved; a run ends when {ends}{}.",
        shape.nodes,
        shape.zones,
        shape.zone_cpus,
        shape.zone_memory_gib,
        o.runs,
        run_ends(section.results),
    )
}

/// How the runs ended, e.g. ` (here: all bound 10, settled 5)`; empty without runs.
pub fn run_ends(results: &[RunResult]) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in results {
        *counts.entry(r.end.id()).or_default() += 1;
    }
    if counts.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = counts.iter().map(|(id, n)| format!("{id} {n}")).collect();
    format!(" (here: {})", parts.join(", "))
}

fn ms(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1e3)
}

/// The updater's section.
pub fn updater_section(result: &UpdaterResult) -> String {
    let mut out = String::new();
    let spread = |values: Vec<f64>, format: fn(f64) -> String| {
        Spread::of(&values).map_or("–".into(), |s| s.render(format))
    };
    let rss: Vec<f64> = result
        .runs
        .iter()
        .map(|r| r.peak_rss_bytes as f64 / f64::from(1 << 20))
        .collect();
    let anon: Vec<f64> = result
        .runs
        .iter()
        .map(|r| r.anon_rss_bytes as f64 / f64::from(1 << 20))
        .collect();
    let p50: Vec<f64> = result.runs.iter().filter_map(|r| ms(r.p50)).collect();
    let p99: Vec<f64> = result.runs.iter().filter_map(|r| ms(r.p99)).collect();
    let per_hour = result.writes_per_hour();
    let _ = writeln!(
        out,
        "| runs | peak RSS MiB | of it anonymous MiB | change → NRT visible p50 ms | p99 ms | idle NRT writes (window) | writes/hour (extrapolated) |"
    );
    let _ = writeln!(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} in {} s | {} |\n",
        result.runs.len(),
        spread(rss.clone(), |v| format!("{v:.1}")),
        spread(anon, |v| format!("{v:.1}")),
        spread(p50.clone(), scenarios::whole),
        spread(p99.clone(), scenarios::whole),
        result.idle_writes,
        result.idle_window.as_secs(),
        per_hour.map_or("–".into(), |v| format!("{v:.1}"))
    );
    let beside = if result.idle_beside.is_empty() {
        String::new()
    } else {
        format!(
            " The window ran beside the {} scenario(s): the updater writes only when what it reads changes or its heartbeat is due, which CPU contention does not change.",
            result.idle_beside.join(", ")
        )
    };
    let window = result.idle_window.as_secs_f64().max(1e-9);
    let _ = writeln!(
        out,
        "The idle updater and its control plane used {:.1} CPU-s in the window ({:.1} % of one CPU); the updater alone {:.2} CPU-s ({:.2} %).{beside}\n",
        result.idle_cpu.as_secs_f64(),
        100.0 * result.idle_cpu.as_secs_f64() / window,
        result.idle_agent_cpu.as_secs_f64(),
        100.0 * result.idle_agent_cpu.as_secs_f64() / window,
    );
    if let Some(m) = &result.idle_memory {
        let _ = writeln!(
            out,
            "At the end of the idle window the updater held {:.1} MiB resident (`VmRSS`): {:.1} MiB anonymous (`RssAnon`: heap and stacks) and {:.1} MiB file-backed (`RssFile`: the binary's code pages, shared with the page cache).\n",
            mib(m.rss_bytes),
            mib(m.anon_rss_bytes),
            mib(m.file_rss_bytes),
        );
    }
    for line in updater_goals(result) {
        let _ = writeln!(out, "{line}  ");
    }
    out
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// The updater's goal lines.
pub fn updater_goals(result: &UpdaterResult) -> Vec<String> {
    let median = |v: Vec<f64>| crate::stats::median(&v);
    let rss = median(
        result
            .runs
            .iter()
            .map(|r| r.peak_rss_bytes as f64 / f64::from(1 << 20))
            .collect(),
    );
    let p99 = median(result.runs.iter().filter_map(|r| ms(r.p99)).collect());
    let per_hour = result.writes_per_hour();
    // On an idle node: the resident memory at the end of the idle window when it was
    // read, else the runs' peak (which includes start-up).
    let (rss, what) = match &result.idle_memory {
        Some(m) => (
            Some(mib(m.rss_bytes)),
            format!(
                "idle `VmRSS` ({:.1} anonymous + {:.1} file-backed; peak `VmHWM` {})",
                mib(m.anon_rss_bytes),
                mib(m.file_rss_bytes),
                rss.map_or("–".into(), |v| format!("{v:.1}"))
            ),
        ),
        None => (rss, "peak `VmHWM`".to_owned()),
    };
    vec![
        format!(
            "Goal: updater RSS < 10 MiB — {} MiB, {what}: {}.",
            rss.map_or("–".into(), |v| format!("{v:.1}")),
            verdict(rss.map(|v| v < 10.0))
        ),
        format!(
            "Goal: NRT visible p99 < 1 s — {} ms: {}.",
            p99.map_or("–".into(), |v| format!("{v:.0}")),
            verdict(p99.map(|v| v < 1000.0))
        ),
        format!(
            "Goal: ≤ 6 NRT writes per hour on an idle node — {} writes in a {} s window, {} per hour extrapolated (one window on the last run's updater, not a median): {}.",
            result.idle_writes,
            result.idle_window.as_secs(),
            per_hour.map_or("–".into(), |v| format!("{v:.1}")),
            verdict(per_hour.map(|v| v <= 6.0))
        ),
    ]
}

/// Renders the report: `sections` in order, then the updater's, then the notes.
pub fn render(
    env: &Environment,
    sections: &[Section<'_>],
    updater: Option<&UpdaterResult>,
    extra_notes: &[String],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# TAS benchmarks\n\n## Cluster benchmark (`tas-bench`)\n"
    );
    let _ = writeln!(
        out,
        "Measured {} on {} CPUs ({}), {} of memory.\n",
        env.date,
        env.cpus,
        env.cpu_model.as_deref().unwrap_or("unknown CPU model"),
        env.memory_bytes.map_or("unknown".into(), |b| format!(
            "{:.1} GiB",
            b as f64 / f64::from(1 << 30)
        )),
    );
    let _ = writeln!(out, "Command: `{}`  ", env.command);
    let _ = writeln!(
        out,
        "Commit: {}\n",
        env.git_commit.as_deref().unwrap_or("unknown")
    );
    let _ = writeln!(out, "| Component | Version |\n| --- | --- |");
    for (name, version) in &env.versions {
        let _ = writeln!(out, "| {name} | {version} |");
    }
    let _ = writeln!(out, "\n### Setup\n");
    for line in SETUP {
        let _ = writeln!(out, "- {line}");
    }
    let mut kinds: Vec<SchedulerKind> = Vec::new();
    for section in sections {
        for kind in &section.options.schedulers {
            if !kinds.contains(kind) {
                kinds.push(*kind);
            }
        }
    }
    if !kinds.is_empty() {
        let _ = writeln!(out, "\nSchedulers:\n");
        for kind in &kinds {
            let _ = writeln!(out, "- **{}** — {}", kind.title(), describe(*kind));
        }
    }
    if let Some(section) = sections.first() {
        let o = section.options;
        let _ = writeln!(
            out,
            "\nkube-scheduler variants: client QPS {} / burst {}. The node agent republishes a node's NRT {} ms after a change.",
            o.qps,
            o.burst,
            o.nrt_debounce.as_millis()
        );
    }
    for section in sections {
        let _ = writeln!(out, "\n### {}\n", section.scenario.title());
        let _ = writeln!(out, "{}\n", setup_line(section));
        let _ = writeln!(out, "{}", table(section));
        for line in goals(section) {
            let _ = writeln!(out, "{line}  ");
        }
        let rejected = crate::rejections::render(
            section
                .results
                .iter()
                .map(|r| (r.kind, r.round, r.tally.rejections.as_slice())),
        );
        if !rejected.is_empty() {
            let _ = writeln!(out, "\n{rejected}");
        }
    }
    if let Some(updater) = updater {
        let _ = writeln!(out, "\n### {}\n", Scenario::Updater.title());
        let _ = writeln!(out, "{}", updater_section(updater));
    }
    let closing: Vec<String> = sections
        .iter()
        .flat_map(|section| {
            goals(section).into_iter().map(move |g| {
                format!(
                    "{}: {}",
                    section.scenario.title(),
                    g.trim_start_matches("Goal: ")
                )
            })
        })
        .chain(updater.into_iter().flat_map(|u| {
            updater_goals(u)
                .into_iter()
                .map(|g| format!("Updater: {}", g.trim_start_matches("Goal: ")))
        }))
        .collect();
    if !closing.is_empty() {
        let _ = writeln!(
            out,
            "\n### Goals (issue 17; never asserted)\n\nEach line gives the figure against the goal (and the ratio where the goal is one); where one is missed, the reason goes in a note (`--note`, listed under how the figures are measured).\n"
        );
        for line in closing {
            let _ = writeln!(out, "- {line}");
        }
    }
    let _ = writeln!(out, "\n### How the figures are measured\n");
    for note in NOTES
        .iter()
        .map(|s| s.to_string())
        .chain(extra_notes.iter().cloned())
    {
        let _ = writeln!(out, "- {note}");
    }
    out
}

const SETUP: [&str; 3] = [
    "Every scenario runs on a private control plane of its own: etcd, kube-apiserver and kwok as local processes; no controller-manager, no default scheduler.",
    "Every node's NRT says single-numa-node, container scope. A node agent in the runner plays the TAS updater for every node: it hands each bind to the node's kubelet, the referee (the kubelet's own managers, see below), and republishes the node's NRT from what the managers hold (free CPUs, memory, hugepages and devices per zone, pod-set fingerprint) after an admission, for every scheduler alike.",
    "Each figure is the median of the runs with the lowest and highest in parentheses (`median (min–max)`); runs of the schedulers are interleaved (round 1 of each, then round 2, ...), each on a clean slate.",
];

fn describe(kind: SchedulerKind) -> &'static str {
    match kind {
        SchedulerKind::Tas => {
            "`tas-scheduler` with its default configuration (FragmentationAware scoring, adaptive sampling of nodes, reserve cache resync 5 s)."
        }
        SchedulerKind::NumaPlugin => {
            "kube-scheduler v1.33 built from scheduler-plugins, profile with `NodeResourceTopologyMatch` at every extension point (filter, score, reserve), LeastAllocated, `cacheResyncPeriodSeconds: 5` (the project's documented cache setup)."
        }
        SchedulerKind::KubeScheduler => {
            "the upstream default profile; it knows nothing of NUMA zones."
        }
        SchedulerKind::BindOnly => {
            "no decision: binds pending pods round-robin over the nodes through `pods/binding`, many in flight. Not a scheduler: its kubelet rejections are expected and meaningless; its CPU and RSS are those of the whole runner (watch, pod creation, node agent included)."
        }
    }
}

const NOTES: [&str; 12] = [
    "Backlog binds/s: pods bound ÷ time from the first to the last bind the runner's watch saw; per-second p50/p90: the binds in each whole second from the first bind (the last, partial second left out), as scheduler_perf's SchedulingThroughput samples them. The scheduler starts after every pod exists and without a warm-up pod, so its CPU includes its start.",
    "First bind and makespan (every scenario): from the scheduler's start — its process spawned (the bind-only binder: started) — to the first and to the last bind of a measured pod the runner's watch saw. In backlog runs the scheduler starts after every pod exists, so these include its start-up (watches listing, leader election); in paced runs they also include the warm-up pod and the creation of the pods. Every scheduler is stopped after its run as the kubelet stops a container (SIGTERM, then SIGKILL after 15 s): killed outright, the TAS scheduler left its Lease held and the next run's scheduler waited the lease duration (15 s) before its first bind, as a successor of a crashed leader must.",
    "Paced bound/s: pods bound ÷ time from the first creation request to the last bind. The achieved creation rate is pods sent ÷ time from the first to the last creation request; where it is below the target, the latencies were taken at that lower rate.",
    "Goodput: pods bound minus pods the kubelet referee rejected (every reason). For the bind-only ceiling it means nothing: it ignores capacity.",
    "Scale decision times: the TAS scheduler's own `tas_scheduler_decision_duration_seconds` histogram (filter + score of one decision) read from its `/metrics` at the end of each run; mean = sum ÷ count, quantiles interpolated within the buckets (as PromQL's `histogram_quantile`), so they are only as fine as the buckets (100 µs, 250 µs, 500 µs, 1 ms, ...). kube-scheduler's own metrics are not read (its `/metrics` needs delegated authentication).",
    "Latency: from the runner sending the pod's create request to its watch seeing `spec.nodeName` set (a watch, not polling). The pod's `creationTimestamp` has one-second resolution, so the runner's own clock is used; everything runs on one machine.",
    "CPU: utime + stime of the scheduler process from `/proc/<pid>/stat`, from just before the first creation to the end of the run (startup and warm-up excluded). Peak RSS: `VmHWM` from `/proc/<pid>/status` at the end of the run (startup included).",
    "Kubelet rejections: every bind is admitted, in the order the runner's watch saw it per node, by the referee: the kubelet's own Topology, CPU, memory and device managers (k8s.io/kubernetes v1.34; Topology Manager single-numa-node, container scope, CPU manager static, memory manager Static, same zones as the NRTs). A TopologyAffinityError is a pod a real kubelet would have failed. The benchmark needs `TAS_REFEREE_BIN` (`make bench` sets it).",
    "Each scheduler starts fresh for each run; in paced runs it must first bind a BestEffort warm-up pod, which is deleted before the measured pods are created.",
    "Updater: one `tas-updater` process with its default flags (periodic-and-events, 10 s period, pods polled every 500 ms, 200 ms debounce, 10 min re-apply) on one node of 2 zones × 16 CPUs whose podresources server, sysfs and kubelet config are the referee's. A change is timed from just before the referee admits (or removes) a 2-CPU Guaranteed pod, whose Pod object is created bound to the node at the same time, to the NRT read (every 10 ms) showing the new free CPU count. The next change starts 1 to 2 s later (spread, so changes do not fall in step with the pod poll), so each finds the agent idle, as most admissions on a node do (back to back, a change rides on the publish the agent's previous write sets off, its watch seeing its own write, and the figure measures that). Peak RSS is `VmHWM` at the end of the run; of it anonymous is `RssAnon` then (heap and stacks), the rest being file-backed pages of the binary (its code, shared with the page cache and reclaimable). Idle writes: every watch event of the node's NRT during the idle window after the last run, extrapolated linearly to an hour.",
    "The machine is shared by the control plane, kwok, the runner and the scheduler: figures compare schedulers on the same machine, not absolute capacity.",
    "DRA: this scenario's control plane also runs kube-controller-manager, whose ResourceClaim controller generates each pod's claim from its template (the scheduler starts once every pod's status names its claim) and deallocates and deletes it when the pod goes (the next run starts once every claim is gone). A pod is aligned when every device of its claim's allocation (`status.allocation`, read after the run) has a `resource.kubernetes.io/numaNode` (from the ResourceSlices) among the zones of the exclusive CPUs the kubelet referee's CPU manager gave it; the share is over the admitted pods (kubelet rejections are counted apart). The Topology Manager ignores DRA devices, so an unaligned pod runs, with its GPU or NIC across the interconnect. Allocation cost: the TAS scheduler's mean decision time (filter + score, which includes allocating) and start → last bind of each scheduler, with claims against the same pods without claims, in runs of their own.",
];

#[cfg(test)]
pub(crate) mod tests;
