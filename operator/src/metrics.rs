//! Prometheus metrics of the operator (`tas_operator_*`) and its readiness, both served
//! by `tas_runtime::http` (`/metrics`, `/readyz`), and the same metrics as OpenTelemetry
//! instruments for OTLP export ([`Metrics::with_meter`]).
//!
//! The OpenTelemetry names (`tas_operator.reconciles`, `tas_operator.reconcile_duration`
//! in seconds, ...) become the Prometheus names again when a collector converts them.
//! Reconciles are recorded into both at once; the gauges are read from the Prometheus
//! ones when the meter collects.
//!
//! Labels are low-cardinality by construction: a reconcile's `result` is one of three
//! words, an operand's `component` one of two.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{
    Counter as OtelCounter, Histogram as OtelHistogram, Meter, ObservableGauge,
};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::fmt;
use std::time::Duration;
use tas_runtime::http::Readiness;
use tas_runtime::metrics::{self as runtime_metrics, ResultLabel};

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

    /// The OpenTelemetry `result` attribute.
    fn attribute(self) -> KeyValue {
        KeyValue::new("result", self.as_str())
    }
}

/// `component` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ComponentLabel {
    /// `updater` or `scheduler`.
    pub component: &'static str,
}

/// Upper bounds of the reconcile duration buckets, in seconds.
/// The `condition` label of [`Metrics::set_conditions`]: a condition type.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabel {
    /// `Available`, `Progressing` or `Degraded`.
    pub condition: &'static str,
}

/// The condition types the `tas_operator_condition` gauge reports.
const CONDITIONS: [&str; 3] = [
    tas_api::tas::status::condition_type::AVAILABLE,
    tas_api::tas::status::condition_type::PROGRESSING,
    tas_api::tas::status::condition_type::DEGRADED,
];

const DURATION_BUCKETS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// Values of the `component` label.
const COMPONENTS: [&str; 2] = ["updater", "scheduler"];

/// Every metric the operator exports, plus its readiness.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabel, Counter>,
    reconcile_duration: Family<ResultLabel, Histogram>,
    operands_ready: Family<ComponentLabel, Gauge>,
    stale_nrt_nodes: Gauge,
    conditions: Family<ConditionLabel, Gauge>,
    readiness: Readiness,
    otel: Option<OtelInstruments>,
}

/// The OpenTelemetry side: the synchronous instruments a reconcile records into, and
/// the gauges' callbacks (kept here so they live as long as the metrics).
struct OtelInstruments {
    reconciles: OtelCounter<u64>,
    reconcile_duration: OtelHistogram<f64>,
    _gauges: [ObservableGauge<i64>; 2],
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric under the `tas_operator` prefix.
    pub fn new() -> Self {
        let mut registry = runtime_metrics::registry("tas_operator");
        let reconciles = Family::<ResultLabel, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles of the TopologyAwareScheduling object by result",
            reconciles.clone(),
        );
        let reconcile_duration = Family::<ResultLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(DURATION_BUCKETS)
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
        let conditions = Family::<ConditionLabel, Gauge>::default();
        registry.register(
            "condition",
            "1 while the TopologyAwareScheduling object's condition (Available, Progressing, Degraded) is True, else 0; set by the leader",
            conditions.clone(),
        );
        for condition in CONDITIONS {
            let _ = conditions.get_or_create(&ConditionLabel { condition });
        }
        let metrics = Self {
            registry,
            reconciles,
            reconcile_duration,
            operands_ready,
            stale_nrt_nodes,
            conditions,
            readiness: Readiness::not_ready("the controller's caches are not synced yet"),
            otel: None,
        };
        // Every series exists from the start, at zero: a missing series cannot be told
        // apart from a scrape problem, and rate() needs the zero to start from.
        for result in ReconcileResult::ALL {
            let label = ResultLabel::new(result.as_str());
            let _ = metrics.reconciles.get_or_create(&label);
            let _ = metrics.reconcile_duration.get_or_create(&label);
        }
        metrics.set_operands_ready(0, 0);
        metrics
    }

    /// The Prometheus metrics, also recorded as OpenTelemetry instruments of `meter`
    /// (exported while an OTLP endpoint is configured).
    pub fn with_meter(meter: &Meter) -> Self {
        let mut metrics = Self::new();
        let reconciles = meter
            .u64_counter("tas_operator.reconciles")
            .with_description("Reconciles of the TopologyAwareScheduling object by result")
            .with_unit("{reconcile}")
            .build();
        let reconcile_duration = meter
            .f64_histogram("tas_operator.reconcile_duration")
            .with_description("Duration of a reconcile by result")
            .with_unit("s")
            .with_boundaries(DURATION_BUCKETS.to_vec())
            .build();
        // As on the Prometheus side, every result is a series from the start.
        for result in ReconcileResult::ALL {
            reconciles.add(0, &[result.attribute()]);
        }
        let ready = metrics.operands_ready.clone();
        let operands_ready = meter
            .i64_observable_gauge("tas_operator.operands_ready")
            .with_description(
                "Ready pods per operand: node agents (updater) and scheduler replicas (scheduler)",
            )
            .with_unit("{pod}")
            .with_callback(move |observer| {
                for component in COMPONENTS {
                    let value = ready.get_or_create(&ComponentLabel { component }).get();
                    observer.observe(value, &[KeyValue::new("component", component)]);
                }
            })
            .build();
        let stale = metrics.stale_nrt_nodes.clone();
        let stale_nrt_nodes = meter
            .i64_observable_gauge("tas_operator.stale_nrt_nodes")
            .with_description("Nodes of the node groups without a fresh NodeResourceTopology")
            .with_unit("{node}")
            .with_callback(move |observer| observer.observe(stale.get(), &[]))
            .build();
        metrics.otel = Some(OtelInstruments {
            reconciles,
            reconcile_duration,
            _gauges: [operands_ready, stale_nrt_nodes],
        });
        metrics
    }

    /// Records one reconcile.
    pub fn reconciled(&self, result: ReconcileResult, took: Duration) {
        let label = ResultLabel::new(result.as_str());
        self.reconciles.get_or_create(&label).inc();
        self.reconcile_duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
        if let Some(otel) = &self.otel {
            let attributes = [result.attribute()];
            otel.reconciles.add(1, &attributes);
            otel.reconcile_duration
                .record(took.as_secs_f64(), &attributes);
        }
    }

    /// Reconciles so far, all results together.
    pub fn reconcile_count(&self) -> u64 {
        ReconcileResult::ALL
            .into_iter()
            .map(|r| {
                self.reconciles
                    .get_or_create(&ResultLabel::new(r.as_str()))
                    .get()
            })
            .sum()
    }

    /// Sets the ready pods of the node agents and of the scheduler.
    pub fn set_operands_ready(&self, updater: i64, scheduler: i64) {
        for (component, value) in COMPONENTS.into_iter().zip([updater, scheduler]) {
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
    /// Records which of the object's conditions are True.
    pub fn set_conditions(&self, conditions: &[tas_api::tas::Condition]) {
        for condition in CONDITIONS {
            let on = conditions
                .iter()
                .any(|c| c.type_ == condition && c.status == "True");
            self.conditions
                .get_or_create(&ConditionLabel { condition })
                .set(i64::from(on));
        }
    }

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
        runtime_metrics::encode(&self.registry)
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
        let degraded: tas_api::tas::Condition = serde_json::from_value(serde_json::json!({
            "type": "Degraded", "status": "True", "reason": "ApplyFailed", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        m.set_conditions(&[degraded]);
        let text = m.render().unwrap();
        for want in [
            "tas_operator_reconciles_total{result=\"success\"} 1",
            "tas_operator_reconciles_total{result=\"transient_error\"} 1",
            "tas_operator_reconcile_duration_seconds_count{result=\"success\"} 1",
            "tas_operator_operands_ready{component=\"updater\"} 3",
            "tas_operator_operands_ready{component=\"scheduler\"} 1",
            "tas_operator_stale_nrt_nodes 2",
            "tas_operator_condition{condition=\"Degraded\"} 1",
            "tas_operator_condition{condition=\"Available\"} 0",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        assert_eq!(m.reconcile_count(), 2);
        assert!(!m.is_ready());
        m.set_ready();
        assert!(m.is_ready());
    }
}
