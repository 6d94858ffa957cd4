//! The markdown report: setup, a summary of medians with the TAS ratios, then one table
//! per metric with every run. Pure: [`render`] takes the figures and the environment.

use std::fmt::Write;

use crate::Options;
use crate::environment::Environment;
use crate::run::RunResult;
use crate::schedulers::SchedulerKind;
use crate::stats::{median, ratio};

/// One metric: how to read it from a run and how to print it.
struct Metric {
    title: &'static str,
    value: fn(&RunResult) -> Option<f64>,
    format: fn(f64) -> String,
}

fn count(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

const METRICS: [Metric; 10] = [
    Metric {
        title: "Throughput (bound pods/s, first creation → last bind)",
        value: |r| Some(r.throughput),
        format: |v| format!("{v:.1}"),
    },
    Metric {
        title: "Latency p50 (creation → bound, ms)",
        value: |r| r.p50.map(|d| d.as_secs_f64() * 1e3),
        format: |v| format!("{v:.0}"),
    },
    Metric {
        title: "Latency p99 (creation → bound, ms)",
        value: |r| r.p99.map(|d| d.as_secs_f64() * 1e3),
        format: |v| format!("{v:.0}"),
    },
    Metric {
        title: "Scheduler CPU (s, user + system, during the run)",
        value: |r| Some(r.cpu.as_secs_f64()),
        format: |v| format!("{v:.2}"),
    },
    Metric {
        title: "Scheduler peak RSS (MiB, VmHWM)",
        value: |r| Some(r.peak_rss_bytes as f64 / f64::from(1 << 20)),
        format: |v| format!("{v:.0}"),
    },
    Metric {
        title: "Kubelet rejections: TopologyAffinityError",
        value: |r| Some(r.tally.topology_errors() as f64),
        format: count,
    },
    Metric {
        title: "Kubelet rejections: other (OutOfcpu, OutOfpods, ...)",
        value: |r| Some(r.tally.other_rejections() as f64),
        format: count,
    },
    Metric {
        title: "Pods left unscheduled",
        value: |r| Some((r.pods - r.bound) as f64),
        format: count,
    },
    Metric {
        title: "Pod creation rate achieved (pods/s)",
        value: |r| Some(r.creation_rate),
        format: |v| format!("{v:.1}"),
    },
    Metric {
        title: "NRT writes by the node agent",
        value: |r| Some(r.published.writes as f64),
        format: count,
    },
];

/// Median of `metric` over `kind`'s runs.
fn median_of(results: &[RunResult], kind: SchedulerKind, metric: &Metric) -> Option<f64> {
    let values: Vec<f64> = results
        .iter()
        .filter(|r| r.kind == kind)
        .filter_map(|r| (metric.value)(r))
        .collect();
    median(&values)
}

/// Renders the report. `schedulers` fixes the row order; `extra_notes` are appended.
pub fn render(
    env: &Environment,
    options: &Options,
    results: &[RunResult],
    extra_notes: &[String],
) -> String {
    let mut out = String::new();
    let kinds: Vec<SchedulerKind> = options.schedulers.clone();
    let shape = &options.shape;
    let workload = &options.workload;
    let load = workload.total_cpus() as f64 * 100.0 / shape.total_cpus().max(1) as f64;
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
    let sizes: Vec<String> = workload.cpu_sizes.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "- Private control plane: etcd, kube-apiserver and kwok as local processes; no controller-manager, no default scheduler."
    );
    let _ = writeln!(
        out,
        "- {} kwok nodes, each {} NUMA zones × {} CPUs / {} GiB; every node's NRT says single-numa-node, container scope.",
        shape.nodes, shape.zones, shape.zone_cpus, shape.zone_memory_gib
    );
    let _ = writeln!(
        out,
        "- {} Guaranteed single-container pods of {} CPUs (drawn evenly, same sequence for every scheduler), {} GiB of memory per CPU: {} CPUs requested, {load:.0}% of the cluster.",
        workload.pods,
        sizes.join("/"),
        workload.memory_per_cpu_gib,
        workload.total_cpus()
    );
    let _ = writeln!(
        out,
        "- Pods created at {} pods/s (at most {} creations in flight); {} run(s) per scheduler, interleaved, each on a clean slate; figures are medians of the runs.",
        options.rate, options.create_concurrency, options.runs
    );
    let _ = writeln!(
        out,
        "- A node agent in the runner plays the TAS updater for every node: it admits each bind into a kubelet model of the node and republishes the node's NRT (free CPUs and memory per zone, pod-set fingerprint) {} ms after a change, for every scheduler alike.",
        options.nrt_debounce.as_millis()
    );
    let _ = writeln!(
        out,
        "- kube-scheduler variants: client QPS {} / burst {}. A run ends when every pod is bound or nothing was bound for {} s after the last creation.\n",
        options.qps,
        options.burst,
        options.idle_timeout.as_secs()
    );
    let _ = writeln!(out, "Schedulers:\n");
    for kind in &kinds {
        let _ = writeln!(out, "- **{}** — {}", kind.title(), describe(*kind));
    }

    let _ = writeln!(out, "\n### Summary (medians)\n");
    let _ = writeln!(
        out,
        "| Scheduler | pods/s | p50 ms | p99 ms | CPU s | peak RSS MiB | TopologyAffinityError | other rejections | unscheduled |"
    );
    let _ = writeln!(
        out,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let summary = [0, 1, 2, 3, 4, 5, 6, 7];
    for kind in &kinds {
        let cells: Vec<String> = summary
            .iter()
            .map(|&m| median_of(results, *kind, &METRICS[m]).map_or("–".into(), METRICS[m].format))
            .collect();
        let _ = writeln!(out, "| {} | {} |", kind.title(), cells.join(" | "));
    }
    let ratios = ratio_lines(results, &kinds);
    if !ratios.is_empty() {
        let _ = writeln!(out, "\n{}", ratios.join("\n"));
    }

    let _ = writeln!(out, "\n### Every run\n");
    let rounds = options.runs.max(1);
    for metric in &METRICS {
        let _ = writeln!(out, "**{}**\n", metric.title);
        let header: Vec<String> = (1..=rounds).map(|r| format!("run {r}")).collect();
        let _ = writeln!(out, "| Scheduler | {} | median |", header.join(" | "));
        let _ = writeln!(out, "| --- |{} ---: |", " ---: |".repeat(rounds as usize));
        for kind in &kinds {
            let cells: Vec<String> = (1..=rounds)
                .map(|round| {
                    results
                        .iter()
                        .find(|r| r.kind == *kind && r.round == round)
                        .and_then(|r| (metric.value)(r))
                        .map_or("–".into(), metric.format)
                })
                .collect();
            let m = median_of(results, *kind, metric).map_or("–".into(), metric.format);
            let _ = writeln!(out, "| {} | {} | {m} |", kind.title(), cells.join(" | "));
        }
        let _ = writeln!(out);
    }

    let _ = writeln!(out, "### How the figures are measured\n");
    for note in NOTES
        .iter()
        .map(|s| s.to_string())
        .chain(extra_notes.iter().cloned())
    {
        let _ = writeln!(out, "- {note}");
    }
    out
}

fn describe(kind: SchedulerKind) -> &'static str {
    match kind {
        SchedulerKind::Tas => {
            "`tas-scheduler` with its default configuration (LeastAllocated, reserve cache resync 5 s)."
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

/// "TAS vs X" lines for the NUMA plugin and the bind-only ceiling.
fn ratio_lines(results: &[RunResult], kinds: &[SchedulerKind]) -> Vec<String> {
    let has = |k| kinds.contains(&k);
    let m = |kind, i: usize| median_of(results, kind, &METRICS[i]);
    let mut lines = Vec::new();
    if !has(SchedulerKind::Tas) {
        return lines;
    }
    for other in [SchedulerKind::NumaPlugin, SchedulerKind::KubeScheduler] {
        if !has(other) {
            continue;
        }
        let fmt = |i: usize| {
            m(SchedulerKind::Tas, i)
                .zip(m(other, i))
                .and_then(|(a, b)| ratio(a, b))
                .map_or("–".into(), |r| format!("{r:.2}×"))
        };
        lines.push(format!(
            "TAS ÷ {}: throughput {} (higher is better); p50 latency {}, p99 latency {}, CPU {}, peak RSS {} (lower is better).  ",
            other.title(),
            fmt(0),
            fmt(1),
            fmt(2),
            fmt(3),
            fmt(4)
        ));
    }
    if has(SchedulerKind::BindOnly) {
        let share = m(SchedulerKind::Tas, 0)
            .zip(m(SchedulerKind::BindOnly, 0))
            .and_then(|(a, b)| ratio(a, b))
            .map_or("–".into(), |r| format!("{:.0}%", r * 100.0));
        lines.push(format!(
            "TAS reaches {share} of the bind-only ceiling's throughput."
        ));
    }
    lines
}

const NOTES: [&str; 6] = [
    "Throughput: pods bound ÷ time from the first creation request to the last bind the runner's watch saw.",
    "Latency: from the runner sending the pod's create request to its watch seeing `spec.nodeName` set (a watch, not polling). The pod's `creationTimestamp` has one-second resolution, so the runner's own clock is used; everything runs on one machine.",
    "CPU: utime + stime of the scheduler process from `/proc/<pid>/stat`, from just before the first creation to the end of the run (startup and warm-up excluded). Peak RSS: `VmHWM` from `/proc/<pid>/status` at the end of the run (startup included).",
    "Kubelet rejections: after each run every placement is replayed, in bind order per node, through the referee: the kubelet's own Topology, CPU, memory and device managers (k8s.io/kubernetes v1.34; Topology Manager single-numa-node, container scope, CPU manager static, memory manager Static, same zones as the NRTs). A TopologyAffinityError is a pod a real kubelet would have failed. Without `TAS_REFEREE_BIN` (`make bench` sets it) the node simulator's Rust model judges instead.",
    "Each scheduler starts fresh for each run and must first bind a BestEffort warm-up pod, which is deleted before the measured pods are created.",
    "The machine is shared by the control plane, kwok, the runner and the scheduler: figures compare schedulers on the same machine, not absolute capacity.",
];

#[cfg(test)]
mod tests;
