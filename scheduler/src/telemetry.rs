//! The scheduler's OpenTelemetry: spans and metrics over OTLP through the pipelines of
//! `tas_runtime::telemetry::otlp`, when an endpoint is configured (the operator sets
//! `OTEL_EXPORTER_OTLP_ENDPOINT` from the object). Without one, [`Telemetry`] is off and
//! every call here returns at once.
//!
//! Traces (`service.name` `tas-scheduler`):
//!
//! ```text
//! schedule  k8s.pod.*, tas.scheduler.result, k8s.node.name + tas.numa.zones (+ tas.dra.devices,
//! │         tas.dra.aligned, tas.dra.outcome for a pod with resource claims)
//! │         or tas.scheduler.unschedulable_reason, nodes and feasible nodes
//! ├─ snapshot    reading nodes, pods, namespaces and topology views under their locks
//! ├─ prefilter   the cluster-wide counts of spread and inter-pod affinity
//! ├─ filter      every filter and the node-local score on every node
//! ├─ score       the cluster-wide scores of the feasible nodes
//! ├─ preempt     the victim search (unschedulable pods only)
//! └─ bind        the pods/binding request (after the attempt span ends)
//! ```
//!
//! The spans are built after the fact from measured times: the decision runs on a
//! blocking thread and carries no span machinery, only a few `Instant`s.
//!
//! Metrics, named as the Prometheus ones with a dot after the prefix (a collector's
//! Prometheus exporter gives the `/metrics` names back): `tas_scheduler.schedule_attempts`
//! (by `result`), `tas_scheduler.bind_errors`, `tas_scheduler.queue_depth`,
//! `tas_scheduler.invalid_node_topologies` and `tas_scheduler.leader` are read from the
//! Prometheus metrics when the meter collects, so both always agree;
//! `tas_scheduler.decision_duration` and `tas_scheduler.pod_scheduling_duration`
//! (seconds, the Prometheus buckets) are recorded here with the spans.

use crate::metrics::{ATTEMPT_RESULTS, DECISION_BUCKETS, E2E_BUCKETS, Metrics};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use opentelemetry::metrics::{Histogram, ObservableCounter, ObservableGauge};
use opentelemetry::trace::{Span as _, SpanBuilder, Status, TraceContextExt as _};
use opentelemetry::{Array, Context, KeyValue, Value};
use opentelemetry_sdk::trace::SdkTracer;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tas_runtime::metrics::ResultLabel;
use tas_runtime::telemetry::Otlp;

use crate::cycle::dra::{DraChoice, DraOutcome};

/// `service.name` of everything the scheduler exports.
pub const SERVICE_NAME: &str = "tas-scheduler";

/// How a scheduling attempt ended.
#[derive(Debug)]
pub enum AttemptOutcome<'a> {
    /// A node was chosen; the bind follows.
    Scheduled {
        /// The node.
        node: &'a str,
        /// The NUMA zones the kubelet would use (`None`: no aligned resource, or a node
        /// without topology).
        zones: Option<Vec<u32>>,
        /// The winning score.
        score: u32,
        /// The DRA devices allocated on the node for the pod's claims, if it has any.
        dra: Option<&'a DraChoice>,
    },
    /// No node fits.
    Unschedulable {
        /// The message the pod's condition and Event carry.
        reason: &'a str,
    },
    /// The pod cannot be scheduled as written (an unparsable request).
    Error {
        /// Why.
        message: &'a str,
    },
}

impl AttemptOutcome<'_> {
    fn result(&self) -> &'static str {
        match self {
            Self::Scheduled { .. } => "scheduled",
            Self::Unschedulable { .. } => "unschedulable",
            Self::Error { .. } => "error",
        }
    }
}

/// One scheduling attempt as measured.
#[derive(Debug)]
pub struct AttemptRecord<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// When the attempt started.
    pub started: SystemTime,
    /// Its phases, back to back from `started`, with their durations.
    pub phases: &'a [(&'static str, Duration)],
    /// The time of the decision itself (snapshot to choice), as the Prometheus
    /// `decision_duration_seconds` has it; `None` when no decision was made.
    pub decision: Option<Duration>,
    /// Nodes the decision looked at.
    pub nodes: usize,
    /// Nodes that passed every filter.
    pub feasible: usize,
    /// How it ended.
    pub outcome: AttemptOutcome<'a>,
}

/// One bind request as measured.
#[derive(Debug)]
pub struct BindRecord<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The node.
    pub node: &'a str,
    /// When the request was sent.
    pub started: SystemTime,
    /// How long it took.
    pub duration: Duration,
    /// Pod creation to bind, in seconds, when the bind succeeded.
    pub pod_scheduling_seconds: Option<f64>,
    /// The API server's answer on failure: HTTP status (if any) and message.
    pub error: Option<(Option<u16>, String)>,
}

/// The scheduler's spans and OTLP metrics; cheap to clone, off by default.
#[derive(Clone, Default)]
pub struct Telemetry(Option<Arc<Inner>>);

struct Inner {
    tracer: SdkTracer,
    decision: Histogram<f64>,
    pod_scheduling: Histogram<f64>,
    _counters: [ObservableCounter<u64>; 2],
    _gauges: [ObservableGauge<i64>; 3],
}

impl Telemetry {
    /// No spans, no OTLP metrics.
    pub fn off() -> Self {
        Self(None)
    }

    /// Spans on `otlp`'s tracer and the metrics on its meter, the counters and gauges
    /// read from `metrics`.
    pub fn new(otlp: &Otlp, metrics: &Metrics) -> Self {
        let meter = otlp.meter();
        let attempts = metrics.attempts.clone();
        let attempts = meter
            .u64_observable_counter("tas_scheduler.schedule_attempts")
            .with_description("Scheduling attempts by result")
            .with_callback(move |observer| {
                for result in ATTEMPT_RESULTS {
                    if let Some(counter) = attempts.get(&ResultLabel::new(result)) {
                        observer.observe(counter.get(), &[KeyValue::new("result", result)]);
                    }
                }
            })
            .build();
        let bind_errors = metrics.bind_errors.clone();
        let bind_errors = meter
            .u64_observable_counter("tas_scheduler.bind_errors")
            .with_description("Failed binding requests")
            .with_callback(move |observer| observer.observe(bind_errors.get(), &[]))
            .build();
        let gauge = |name: &'static str, description: &'static str, source: &_| {
            let source: prometheus_client::metrics::gauge::Gauge = Clone::clone(source);
            meter
                .i64_observable_gauge(name)
                .with_description(description)
                .with_callback(move |observer| observer.observe(source.get(), &[]))
                .build()
        };
        let gauges = [
            gauge(
                "tas_scheduler.queue_depth",
                "Pods waiting to be scheduled",
                &metrics.queue_depth,
            ),
            gauge(
                "tas_scheduler.invalid_node_topologies",
                "Nodes skipped because their NodeResourceTopology is unreadable",
                &metrics.invalid_topologies,
            ),
            gauge(
                "tas_scheduler.leader",
                "1 while this replica leads",
                &metrics.leader,
            ),
        ];
        let decision = meter
            .f64_histogram("tas_scheduler.decision_duration")
            .with_unit("s")
            .with_description("Filter + score time of one scheduling decision")
            .with_boundaries(DECISION_BUCKETS.to_vec())
            .build();
        let pod_scheduling = meter
            .f64_histogram("tas_scheduler.pod_scheduling_duration")
            .with_unit("s")
            .with_description("From pod creation to a successful bind")
            .with_boundaries(E2E_BUCKETS.to_vec())
            .build();
        Self(Some(Arc::new(Inner {
            tracer: otlp.tracer(),
            decision,
            pod_scheduling,
            _counters: [attempts, bind_errors],
            _gauges: gauges,
        })))
    }

    /// Whether anything is recorded (spans and metrics exported).
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Records an attempt: its span with one child per phase, and the decision time.
    /// Returns the context a bind span of this attempt hangs off.
    pub fn attempt(&self, record: &AttemptRecord<'_>) -> Option<Context> {
        let inner = self.0.as_ref()?;
        if let Some(decision) = record.decision {
            inner.decision.record(decision.as_secs_f64(), &[]);
        }
        let mut attributes = pod_attributes(record.pod);
        attributes.extend([
            KeyValue::new("tas.scheduler.result", record.outcome.result()),
            KeyValue::new("tas.scheduler.nodes", count(record.nodes)),
            KeyValue::new("tas.scheduler.feasible_nodes", count(record.feasible)),
        ]);
        match &record.outcome {
            AttemptOutcome::Scheduled {
                node,
                zones,
                score,
                dra,
            } => {
                attributes.push(KeyValue::new("k8s.node.name", node.to_string()));
                attributes.push(KeyValue::new("tas.scheduler.score", i64::from(*score)));
                if let Some(choice) = dra {
                    let devices = choice.devices().into_iter().map(Into::into).collect();
                    attributes.push(KeyValue::new(
                        "tas.dra.devices",
                        Value::Array(Array::String(devices)),
                    ));
                    attributes.push(KeyValue::new(
                        "tas.dra.aligned",
                        choice.outcome == DraOutcome::Aligned,
                    ));
                    attributes.push(KeyValue::new("tas.dra.outcome", choice.outcome.label()));
                }
                if let Some(zones) = zones {
                    let ids = zones.iter().map(|&z| i64::from(z)).collect();
                    attributes.push(KeyValue::new(
                        "tas.numa.zones",
                        Value::Array(Array::I64(ids)),
                    ));
                }
            }
            AttemptOutcome::Unschedulable { reason } => {
                attributes.push(KeyValue::new(
                    "tas.scheduler.unschedulable_reason",
                    reason.to_string(),
                ));
            }
            AttemptOutcome::Error { .. } => {}
        }
        let span = SpanBuilder::from_name("schedule")
            .with_start_time(record.started)
            .with_attributes(attributes)
            .start_with_context(&inner.tracer, &Context::new());
        let cx = Context::new().with_span(span);
        let mut at = record.started;
        for (name, duration) in record.phases {
            let mut phase = SpanBuilder::from_name(*name)
                .with_start_time(at)
                .start_with_context(&inner.tracer, &cx);
            at += *duration;
            phase.end_with_timestamp(at);
        }
        let span = cx.span();
        if let AttemptOutcome::Error { message } = &record.outcome {
            span.set_status(Status::error(message.to_string()));
        }
        span.end_with_timestamp(at);
        Some(cx)
    }

    /// Records a bind request: its span (a child of the attempt's, when given) and, on
    /// success, the pod's creation-to-bind time.
    pub fn bind(&self, attempt: Option<&Context>, record: &BindRecord<'_>) {
        let Some(inner) = &self.0 else {
            return;
        };
        if let Some(seconds) = record.pod_scheduling_seconds {
            inner.pod_scheduling.record(seconds, &[]);
        }
        let mut attributes = pod_attributes(record.pod);
        attributes.push(KeyValue::new("k8s.node.name", record.node.to_owned()));
        attributes.push(KeyValue::new(
            "tas.scheduler.result",
            if record.error.is_none() {
                "bound"
            } else {
                "error"
            },
        ));
        if let Some((Some(code), _)) = &record.error {
            attributes.push(KeyValue::new("http.response.status_code", i64::from(*code)));
        }
        let parent = attempt.cloned().unwrap_or_default();
        let mut span = SpanBuilder::from_name("bind")
            .with_start_time(record.started)
            .with_attributes(attributes)
            .start_with_context(&inner.tracer, &parent);
        if let Some((_, message)) = &record.error {
            span.set_status(Status::error(message.clone()));
        }
        span.end_with_timestamp(record.started + record.duration);
    }
}

/// The pod's semantic-convention attributes.
fn pod_attributes(pod: &Pod) -> Vec<KeyValue> {
    vec![
        KeyValue::new("k8s.namespace.name", pod.namespace().unwrap_or_default()),
        KeyValue::new("k8s.pod.name", pod.name_any()),
        KeyValue::new("k8s.pod.uid", pod.uid().unwrap_or_default()),
    ]
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tas_runtime::telemetry::OtlpSettings;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}
        }))
        .unwrap()
    }

    const PHASES: [(&str, Duration); 2] = [
        ("snapshot", Duration::from_micros(5)),
        ("filter", Duration::from_micros(20)),
    ];

    fn record(pod: &Pod) -> AttemptRecord<'_> {
        AttemptRecord {
            pod,
            started: SystemTime::now(),
            phases: &PHASES,
            decision: Some(Duration::from_micros(5)),
            nodes: 1,
            feasible: 1,
            outcome: AttemptOutcome::Scheduled {
                node: "n",
                zones: Some(vec![0, 1]),
                score: 7,
                dra: None,
            },
        }
    }

    #[test]
    fn off_records_nothing() {
        let t = Telemetry::off();
        assert!(!t.is_on());
        assert!(t.attempt(&record(&pod())).is_none());
    }

    #[test]
    fn an_attempt_span_is_the_parent_of_its_bind() {
        // Export off (no endpoint): the spans are still made, then dropped.
        let otlp = Otlp::new(OtlpSettings {
            service: SERVICE_NAME,
            ..OtlpSettings::default()
        });
        let t = Telemetry::new(&otlp, &Metrics::new());
        assert!(t.is_on());
        let pod = pod();
        let cx = t.attempt(&record(&pod)).expect("a context for the bind");
        let span = cx.span();
        let parent = span.span_context();
        assert!(parent.is_valid() && parent.is_sampled(), "{parent:?}");
        t.bind(
            Some(&cx),
            &BindRecord {
                pod: &pod,
                node: "n",
                started: SystemTime::now(),
                duration: Duration::from_millis(1),
                pod_scheduling_seconds: Some(0.5),
                error: None,
            },
        );
    }
}
