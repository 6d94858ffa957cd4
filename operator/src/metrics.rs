//! Prometheus metrics of the operator (`tas_operator_*`) and its readiness, both served
//! by `tas_runtime::http` (`/metrics`, `/readyz`).
//!
//! Labels are low-cardinality by construction: a reconcile's `result` is one of three
//! words, an operand's `component` one of two.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::fmt;
use std::time::Duration;
use tas_runtime::http::Readiness;

/// How a reconcile ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Everything applied (or nothing to do).
    Success,
    /// A failure that a retry may fix; requeued with backoff.
    TransientError,
    /// A failure only a change of the object (or the nodes) can fix; reported as Degraded.
    PermanentError,
}

impl ReconcileResult {
    /// Every result.
    pub const ALL: [Self; 3] = [Self::Success, Self::TransientError, Self::PermanentError];

    fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::TransientError => "transient_error",
            Self::PermanentError => "permanent_error",
        }
    }
}

/// `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `success`, `transient_error` or `permanent_error`.
    pub result: &'static str,
}

/// `component` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ComponentLabel {
    /// `updater` or `scheduler`.
    pub component: &'static str,
}

/// Every metric the operator exports, plus its readiness.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabel, Counter>,
    reconcile_duration: Family<ResultLabel, Histogram>,
    operands_ready: Family<ComponentLabel, Gauge>,
    stale_nrt_nodes: Gauge,
    readiness: Readiness,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric under the `tas_operator` prefix.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("tas_operator");
        let reconciles = Family::<ResultLabel, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles of the TopologyAwareScheduling object by result",
            reconciles.clone(),
        );
        let reconcile_duration = Family::<ResultLabel, Histogram>::new_with_constructor(|| {
            Histogram::new([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0])
        });
        registry.register(
            "reconcile_duration_seconds",
            "Duration of a reconcile by result",
            reconcile_duration.clone(),
        );
        let operands_ready = Family::<ComponentLabel, Gauge>::default();
        registry.register(
            "operands_ready",
            "Ready pods per operand: node agents (updater) and scheduler replicas (scheduler)",
            operands_ready.clone(),
        );
        let stale_nrt_nodes = Gauge::default();
        registry.register(
            "stale_nrt_nodes",
            "Nodes of the node groups without a fresh NodeResourceTopology (agent not ready, or object missing or empty)",
            stale_nrt_nodes.clone(),
        );
        let metrics = Self {
            registry: root,
            reconciles,
            reconcile_duration,
            operands_ready,
            stale_nrt_nodes,
            readiness: Readiness::not_ready("the controller's caches are not synced yet"),
        };
        // Every series exists from the start, at zero: a missing series cannot be told
        // apart from a scrape problem, and rate() needs the zero to start from.
        for result in ReconcileResult::ALL {
            let label = ResultLabel {
                result: result.as_str(),
            };
            let _ = metrics.reconciles.get_or_create(&label);
            let _ = metrics.reconcile_duration.get_or_create(&label);
        }
        metrics.set_operands_ready(0, 0);
        metrics
    }

    /// Records one reconcile.
    pub fn reconciled(&self, result: ReconcileResult, took: Duration) {
        let label = ResultLabel {
            result: result.as_str(),
        };
        self.reconciles.get_or_create(&label).inc();
        self.reconcile_duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// Reconciles so far, all results together.
    pub fn reconcile_count(&self) -> u64 {
        ReconcileResult::ALL
            .into_iter()
            .map(|r| {
                self.reconciles
                    .get_or_create(&ResultLabel { result: r.as_str() })
                    .get()
            })
            .sum()
    }

    /// Sets the ready pods of the node agents and of the scheduler.
    pub fn set_operands_ready(&self, updater: i64, scheduler: i64) {
        for (component, value) in [("updater", updater), ("scheduler", scheduler)] {
            self.operands_ready
                .get_or_create(&ComponentLabel { component })
                .set(value);
        }
    }

    /// Sets the number of nodes without a fresh NodeResourceTopology.
    pub fn set_stale_nrt_nodes(&self, nodes: i64) {
        self.stale_nrt_nodes.set(nodes);
    }

    /// Marks the operator ready (`/readyz`): its caches are synced.
    pub fn set_ready(&self) {
        self.readiness.set_ready();
    }

    /// Whether the operator is ready.
    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready()
    }

    /// The readiness `/readyz` reports (shared: flipping a clone flips this).
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// The metrics in the OpenMetrics text format.
    pub fn render(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_the_documented_names() {
        let m = Metrics::new();
        assert!(
            m.render()
                .unwrap()
                .contains("tas_operator_reconciles_total{result=\"permanent_error\"} 0"),
            "series exist at zero from the start"
        );
        m.reconciled(ReconcileResult::Success, Duration::from_millis(30));
        m.reconciled(ReconcileResult::TransientError, Duration::from_millis(5));
        m.set_operands_ready(3, 1);
        m.set_stale_nrt_nodes(2);
        let text = m.render().unwrap();
        for want in [
            "tas_operator_reconciles_total{result=\"success\"} 1",
            "tas_operator_reconciles_total{result=\"transient_error\"} 1",
            "tas_operator_reconcile_duration_seconds_count{result=\"success\"} 1",
            "tas_operator_operands_ready{component=\"updater\"} 3",
            "tas_operator_operands_ready{component=\"scheduler\"} 1",
            "tas_operator_stale_nrt_nodes 2",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        assert_eq!(m.reconcile_count(), 2);
        assert!(!m.is_ready());
        m.set_ready();
        assert!(m.is_ready());
    }
}
