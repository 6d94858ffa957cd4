//! Prometheus metrics of the scheduler (`tas_scheduler_*`), all low-cardinality.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tas_runtime::metrics::{self as runtime_metrics, ResultLabel};

/// Upper bounds of the pod creation → bind latency buckets, in seconds.
pub const E2E_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Upper bounds of the decision time buckets, in seconds.
pub const DECISION_BUCKETS: [f64; 10] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
];
/// Every `result` of [`Metrics::attempts`].
pub const ATTEMPT_RESULTS: [&str; 4] = ["scheduled", "unschedulable", "preempted", "error"];

/// Every metric the scheduler exports.
pub struct Metrics {
    /// The registry (also holds the cache's metrics).
    pub registry: Registry,
    /// Scheduling attempts by result: `scheduled`, `unschedulable`, `preempted`
    /// (victims evicted for the pod) or `error`.
    pub attempts: Family<ResultLabel, Counter>,
    /// Pod creation → bind latency.
    pub e2e_latency: Histogram,
    /// Time of one decision (filter + score).
    pub decision_latency: Histogram,
    /// Pods waiting in the queue.
    pub queue_depth: Gauge,
    /// Failed binds.
    pub bind_errors: Counter,
    /// Nodes skipped because their NRT is unreadable.
    pub invalid_topologies: Gauge,
    /// 1 while this replica is the leader.
    pub leader: Gauge,
    /// NRT objects refused (each arrival of an unreadable or insane object), by the
    /// problem's code (`too_large`, `amounts_out_of_order`, `duplicate_zone`, ...).
    pub refused_topologies: Family<ProblemLabel, Counter>,
    /// Backing-off pods woken by a node's topology change (only those that could fit
    /// that node).
    pub topology_wakeups: Counter,
    /// Preemption victim searches run (skipped when no lower-priority pod exists on a
    /// node the pod may use).
    pub preemption_searches: Counter,
    /// Allocations of pods' resource claims by outcome: `aligned` (every device in the
    /// zones of the pod's CPUs and memory), `unaligned` (`draAlignment: Preferred`),
    /// `unconstrained` (no zones to line up with), `failed` (the claims could not be
    /// allocated, or their writes failed).
    pub dra_allocations: Family<OutcomeLabel, Counter>,
}

/// The `outcome` label of [`Metrics::dra_allocations`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// `aligned`, `unaligned`, `unconstrained` or `failed`.
    pub outcome: &'static str,
}

/// The `problem` label: a short code naming why an object was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProblemLabel {
    /// The code, e.g. `amounts_out_of_order`.
    pub problem: &'static str,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Register every metric.
    pub fn new() -> Self {
        let mut registry = runtime_metrics::registry("tas_scheduler");
        let attempts = Family::<ResultLabel, Counter>::default();
        registry.register(
            "schedule_attempts",
            "Scheduling attempts by result",
            attempts.clone(),
        );
        let e2e_latency = Histogram::new(E2E_BUCKETS);
        registry.register(
            "pod_scheduling_duration_seconds",
            "From pod creation to a successful bind",
            e2e_latency.clone(),
        );
        let decision_latency = Histogram::new(DECISION_BUCKETS);
        registry.register(
            "decision_duration_seconds",
            "Filter + score time of one scheduling decision",
            decision_latency.clone(),
        );
        let queue_depth = Gauge::default();
        registry.register(
            "queue_depth",
            "Pods waiting to be scheduled",
            queue_depth.clone(),
        );
        let bind_errors = Counter::default();
        registry.register(
            "bind_errors",
            "Failed binding requests",
            bind_errors.clone(),
        );
        let invalid_topologies = Gauge::default();
        registry.register(
            "invalid_node_topologies",
            "Nodes skipped because their NodeResourceTopology is unreadable",
            invalid_topologies.clone(),
        );
        let leader = Gauge::default();
        registry.register("leader", "1 while this replica leads", leader.clone());
        let refused_topologies = Family::<ProblemLabel, Counter>::default();
        registry.register(
            "refused_node_topologies",
            "NodeResourceTopology objects refused as unreadable or insane, by problem",
            refused_topologies.clone(),
        );
        let topology_wakeups = Counter::default();
        registry.register(
            "topology_wakeups",
            "Backing-off pods woken early by a node's NodeResourceTopology change because they could fit that node",
            topology_wakeups.clone(),
        );
        let preemption_searches = Counter::default();
        registry.register(
            "preemption_searches",
            "Preemption victim searches run for unschedulable pods",
            preemption_searches.clone(),
        );
        let dra_allocations = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "dra_allocations",
            "Allocations of pods' resource claims by outcome (aligned, unaligned, unconstrained, failed)",
            dra_allocations.clone(),
        );
        // Every result at 0 from the start: a rate over a series that appears only at
        // its first increment misses that increment, and a panel shows "no data"
        // rather than zero.
        for result in ATTEMPT_RESULTS {
            let _ = attempts.get_or_create(&ResultLabel::new(result));
        }
        Self {
            registry,
            attempts,
            e2e_latency,
            decision_latency,
            queue_depth,
            bind_errors,
            invalid_topologies,
            leader,
            refused_topologies,
            topology_wakeups,
            preemption_searches,
            dra_allocations,
        }
    }

    /// Count a DRA allocation by outcome.
    pub fn dra_allocation(&self, outcome: &'static str) {
        self.dra_allocations
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// Count a refused NRT object.
    pub fn refused_topology(&self, problem: &'static str) {
        self.refused_topologies
            .get_or_create(&ProblemLabel { problem })
            .inc();
    }

    /// Count an attempt.
    pub fn attempt(&self, result: &'static str) {
        self.attempts.get_or_create(&ResultLabel::new(result)).inc();
    }
}
