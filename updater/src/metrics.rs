//! Prometheus metrics of the node agent (`tas_updater_*`), all low-cardinality, and the
//! same as OpenTelemetry instruments for OTLP export ([`Metrics::with_meter`]):
//! `tas_updater.publishes` (by `result`), `tas_updater.errors` (by `kind`) and
//! `tas_updater.podresources_call_duration` are recorded into both at once; two
//! histograms exist only there: `tas_updater.publish_duration` (by `trigger` and
//! `result`) and `tas_updater.write_duration` (the apply request of a publish that
//! wrote), in seconds.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter as OtelCounter, Histogram as OtelHistogram, Meter};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tas_runtime::metrics::{self as runtime_metrics, ResultLabel};

/// Every `kind` of `errors_total` (docs/user-guide.md#metrics-and-telemetry).
pub const ERROR_KINDS: [&str; 10] = [
    "socket_missing",
    "unavailable",
    "rate_limited",
    "timeout",
    "other",
    "sysfs",
    "kubelet_config",
    "apply",
    "pod_exclude",
    "pod_poll",
];

/// Label of an error's kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// e.g. `socket_missing`, `podresources`, `apply`, `sysfs`.
    pub kind: &'static str,
}

/// Label of a podresources call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabel {
    /// `list` or `get_allocatable`.
    pub call: &'static str,
}

/// Every metric the agent exports.
pub struct Metrics {
    registry: Registry,
    /// Publish attempts by result: `applied`, `unchanged` or `error`.
    pub publishes: Family<ResultLabel, Counter>,
    /// Errors by kind.
    pub errors: Family<KindLabel, Counter>,
    /// podresources call latency.
    pub podresources_latency: Family<CallLabel, Histogram>,
    /// Polls of the pods on the node by result: `changed`, `unchanged` or `error`.
    pub pod_polls: Family<ResultLabel, Counter>,
    /// Seconds since the object was last confirmed (written or found unchanged).
    last_publish_age: Gauge<f64, AtomicU64>,
    /// Unix time of the last confirmation.
    last_publish_time: Gauge<f64, AtomicU64>,
    last_publish: Mutex<Option<Instant>>,
    /// The longest time the agent promises between two confirmations.
    publish_interval: Gauge<f64, AtomicU64>,
    otel: Option<OtelInstruments>,
}

/// The OpenTelemetry instruments, recorded with the Prometheus metrics.
struct OtelInstruments {
    publishes: OtelCounter<u64>,
    errors: OtelCounter<u64>,
    podresources_latency: OtelHistogram<f64>,
    publish_duration: OtelHistogram<f64>,
    write_duration: OtelHistogram<f64>,
}

/// Upper bounds of the podresources call latency buckets, in seconds.
const PODRESOURCES_BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// Upper bounds of the publish and write duration buckets, in seconds.
const PUBLISH_BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Register every metric under the `tas_updater` prefix.
    pub fn new() -> Self {
        let mut registry = runtime_metrics::registry("tas_updater");
        let publishes = Family::<ResultLabel, Counter>::default();
        registry.register(
            "publishes",
            "NodeResourceTopology publish attempts by result (applied, unchanged, error)",
            publishes.clone(),
        );
        let errors = Family::<KindLabel, Counter>::default();
        registry.register("errors", "Errors by kind", errors.clone());
        // Every kind at 0 from the start: a rate over a series that appears only at its
        // first increment misses that increment, and a panel shows "no data" rather
        // than zero.
        for kind in ERROR_KINDS {
            let _ = errors.get_or_create(&KindLabel { kind });
        }
        let podresources_latency = Family::<CallLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(PODRESOURCES_BUCKETS)
        });
        registry.register(
            "podresources_call_duration_seconds",
            "Latency of kubelet podresources calls",
            podresources_latency.clone(),
        );
        let pod_polls = Family::<ResultLabel, Counter>::default();
        registry.register(
            "pod_polls",
            "Polls of the kubelet's podresources List for pod changes by result (changed, unchanged, error)",
            pod_polls.clone(),
        );
        let last_publish_age = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "last_publish_age_seconds",
            "Seconds since the NodeResourceTopology was last confirmed up to date (-1: never)",
            last_publish_age.clone(),
        );
        let last_publish_time = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "last_publish_timestamp_seconds",
            "Unix time the NodeResourceTopology was last confirmed up to date",
            last_publish_time.clone(),
        );
        let publish_interval = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "publish_interval_seconds",
            "Longest time between two confirmations the agent promises: its refresh period, \
             or in events-only mode its heartbeat period",
            publish_interval.clone(),
        );
        last_publish_age.set(-1.0);
        Self {
            registry,
            publishes,
            errors,
            podresources_latency,
            pod_polls,
            last_publish_age,
            last_publish_time,
            last_publish: Mutex::new(None),
            publish_interval,
            otel: None,
        }
    }

    /// [`Metrics::new`], also recording on `meter` for OTLP export.
    pub fn with_meter(meter: &Meter) -> Self {
        let seconds = |name: &'static str, description: &'static str, buckets: &[f64]| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(buckets.to_vec())
                .build()
        };
        let otel = OtelInstruments {
            publishes: meter
                .u64_counter("tas_updater.publishes")
                .with_description("NodeResourceTopology publish attempts by result")
                .build(),
            errors: meter
                .u64_counter("tas_updater.errors")
                .with_description("Errors by kind")
                .build(),
            podresources_latency: seconds(
                "tas_updater.podresources_call_duration",
                "Latency of kubelet podresources calls",
                &PODRESOURCES_BUCKETS,
            ),
            publish_duration: seconds(
                "tas_updater.publish_duration",
                "Observing the node and publishing its NodeResourceTopology, by trigger and result",
                &PUBLISH_BUCKETS,
            ),
            write_duration: seconds(
                "tas_updater.write_duration",
                "The apply request of a publish that wrote the NodeResourceTopology",
                &PUBLISH_BUCKETS,
            ),
        };
        Self {
            otel: Some(otel),
            ..Self::new()
        }
    }

    /// Record the latency of a podresources call.
    pub fn podresources_call(&self, call: &'static str, took: Duration) {
        let seconds = took.as_secs_f64();
        self.podresources_latency
            .get_or_create(&CallLabel { call })
            .observe(seconds);
        if let Some(otel) = &self.otel {
            otel.podresources_latency
                .record(seconds, &[KeyValue::new("call", call)]);
        }
    }

    /// Record a poll of the pods on the node: whether what the kubelet listed `changed`.
    pub fn pod_polled(&self, changed: bool) {
        let result = if changed { "changed" } else { "unchanged" };
        self.pod_polls
            .get_or_create(&ResultLabel::new(result))
            .inc();
    }

    /// Record a failed poll of the pods on the node (also `errors_total{kind="pod_poll"}`).
    pub fn pod_poll_failed(&self) {
        self.pod_polls
            .get_or_create(&ResultLabel::new("error"))
            .inc();
        self.errors
            .get_or_create(&KindLabel { kind: "pod_poll" })
            .inc();
        if let Some(otel) = &self.otel {
            otel.errors.add(1, &[KeyValue::new("kind", "pod_poll")]);
        }
    }

    /// Record how long a publish took (`result`: `applied`, `unchanged` or `error`) and
    /// its write, if it wrote (OTLP only).
    pub fn publish_took(
        &self,
        trigger: &'static str,
        result: &'static str,
        took: Duration,
        write: Option<Duration>,
    ) {
        let Some(otel) = &self.otel else {
            return;
        };
        otel.publish_duration.record(
            took.as_secs_f64(),
            &[
                KeyValue::new("trigger", trigger),
                KeyValue::new("result", result),
            ],
        );
        if let Some(write) = write {
            otel.write_duration.record(write.as_secs_f64(), &[]);
        }
    }

    /// The longest time the agent will go between two confirmations (its ticker), for
    /// alerts that judge `last_publish_age_seconds` against it.
    pub fn set_publish_interval(&self, interval: std::time::Duration) {
        self.publish_interval.set(interval.as_secs_f64());
    }

    /// Record a successful publish (written or unchanged).
    pub fn published(&self, applied: bool) {
        let result = if applied { "applied" } else { "unchanged" };
        self.publishes
            .get_or_create(&ResultLabel::new(result))
            .inc();
        if let Some(otel) = &self.otel {
            otel.publishes.add(1, &[KeyValue::new("result", result)]);
        }
        if let Ok(mut last) = self.last_publish.lock() {
            *last = Some(Instant::now());
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        self.last_publish_time.set(now);
    }

    /// A publish left the object to another writer (`publishes_total{result="yielded"}`).
    pub fn yielded(&self) {
        self.publishes
            .get_or_create(&ResultLabel::new("yielded"))
            .inc();
    }

    /// The kubelet's configuration could not be read, yet the agent published (with the
    /// last settings read): an error of kind `kubelet_config`, not a failed publish.
    pub fn kubelet_config_problem(&self) {
        self.errors
            .get_or_create(&KindLabel {
                kind: "kubelet_config",
            })
            .inc();
    }

    /// Count an `--exclude-pods` entry left out as malformed (errors{kind="pod_exclude"}).
    pub fn pod_exclude_ignored(&self) {
        self.errors
            .get_or_create(&KindLabel {
                kind: "pod_exclude",
            })
            .inc();
    }

    /// Record a failed attempt.
    pub fn failed(&self, kind: &'static str) {
        self.publishes
            .get_or_create(&ResultLabel::new("error"))
            .inc();
        self.errors.get_or_create(&KindLabel { kind }).inc();
        if let Some(otel) = &self.otel {
            otel.publishes.add(1, &[KeyValue::new("result", "error")]);
            otel.errors.add(1, &[KeyValue::new("kind", kind)]);
        }
    }

    /// The OpenMetrics text exposition, with the publish age computed now.
    pub fn render(&self) -> Result<String, fmt::Error> {
        if let Ok(last) = self.last_publish.lock()
            && let Some(at) = *last
        {
            self.last_publish_age.set(at.elapsed().as_secs_f64());
        }
        runtime_metrics::encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_every_metric() {
        let m = Metrics::new();
        m.published(true);
        m.published(false);
        m.failed("apply");
        m.pod_polled(true);
        m.pod_polled(false);
        m.pod_poll_failed();
        m.podresources_latency
            .get_or_create(&CallLabel { call: "list" })
            .observe(0.002);
        let text = m.render().unwrap();
        for want in [
            "tas_updater_publishes_total{result=\"applied\"} 1",
            "tas_updater_publishes_total{result=\"unchanged\"} 1",
            "tas_updater_publishes_total{result=\"error\"} 1",
            "tas_updater_errors_total{kind=\"apply\"} 1",
            "tas_updater_errors_total{kind=\"pod_poll\"} 1",
            "tas_updater_pod_polls_total{result=\"changed\"} 1",
            "tas_updater_pod_polls_total{result=\"unchanged\"} 1",
            "tas_updater_pod_polls_total{result=\"error\"} 1",
            "tas_updater_podresources_call_duration_seconds_count{call=\"list\"} 1",
            "tas_updater_last_publish_age_seconds",
            "tas_updater_last_publish_timestamp_seconds",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
    }

    #[test]
    fn age_is_negative_before_the_first_publish() {
        let text = Metrics::new().render().unwrap();
        assert!(
            text.contains("tas_updater_last_publish_age_seconds -1"),
            "{text}"
        );
    }
}
