//! OpenTelemetry traces and metrics over OTLP (gRPC, or HTTP/protobuf when
//! `OTEL_EXPORTER_OTLP_PROTOCOL` says so: [`super::protocol`]), shared by the three TAS binaries:
//! to the endpoint the TopologyAwareScheduling object names (the operator learns it on
//! every reconcile; the operator passes it to its operands as
//! `OTEL_EXPORTER_OTLP_ENDPOINT`), else to `OTEL_EXPORTER_OTLP_ENDPOINT`, else nowhere.
//!
//! ```text
//! tracing spans (own crate) ─► tracing layer ─┐
//! spans built on Otlp::tracer ────────────────┴► tracer provider ─► batch ─► SpanSwitch ─┐
//! instruments of Otlp::meter ─► meter provider ─► periodic reader ─► MetricSwitch ───────┤
//!                                                                                        ▼
//!                        Otlp::use_endpoint (start, every reconcile) ─► Slot: OTLP exporter | none
//! ```
//!
//! The operator only knows the endpoint once the object is read, long after the
//! `tracing` subscriber is installed, and it may change. So the providers are built
//! once, at start, and only the exporters behind them are swapped (`switch.rs`): the
//! `tracing` layer and the metric instruments never change. Spans and metric points
//! not yet exported at a switch go to the new endpoint; metrics are cumulative, so a
//! new collector gets totals since the process started. The operands read the endpoint
//! once, at start (the operator rolls their pods when it changes).
//!
//! Nothing here blocks the caller: the exporters connect lazily and export from the
//! SDK's own threads, the span queue drops when full, and failures are logged with a
//! rate limit.

use super::http_client::TokioHttpClient;
use super::protocol::{Protocol, ProtocolError, Protocols};
use super::switch::{MetricSwitch, Slot, SpanSwitch};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::tonic_types::transport::ClientTlsConfig;
use opentelemetry_otlp::{
    ExporterBuildError, MetricExporter, SpanExporter, WithExportConfig as _, WithHttpConfig as _,
    WithTonicConfig as _,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanExporter as _,
};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// The env var the endpoint comes from when the object names none (the
/// OpenTelemetry SDK's own; the operator sets it on its operands).
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// How long a shutdown may spend flushing each signal (both flush at once).
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(4);
/// Deadline of the whole flush, as a shutdown step (`crate::shutdown::step`).
pub const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// How the exporters behave; [`OtlpSettings::from_env`] for the binary.
#[derive(Debug, Clone, Default)]
pub struct OtlpSettings {
    /// `service.name` of everything exported (`tas-operator`, `tas-scheduler`,
    /// `tas-updater`), also the name of the tracer and the meter. The crate of the same
    /// name (`-` as `_`) is the `tracing` target [`Otlp::tracing_layer`] exports.
    pub service: &'static str,
    /// Endpoint used while the object names none (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fallback_endpoint: Option<String>,
    /// The transport of each signal (`OTEL_EXPORTER_OTLP_PROTOCOL` and the per-signal
    /// variables; gRPC by default).
    pub protocols: Protocols,
    /// `service.instance.id`: which replica exported (its pod name).
    pub instance: Option<String>,
    /// Time between metric exports; when unset `OTEL_METRIC_EXPORT_INTERVAL`, else 60 s.
    pub metric_interval: Option<Duration>,
    /// Longest a finished span waits for its batch; when unset
    /// `OTEL_BSP_SCHEDULE_DELAY`, else 5 s.
    pub span_delay: Option<Duration>,
}

impl OtlpSettings {
    /// The fallback endpoint from `OTEL_EXPORTER_OTLP_ENDPOINT` and the protocols from
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` (and its per-signal variants); the SDK reads its
    /// other `OTEL_*` variables (headers, timeouts, intervals) itself. An unknown
    /// protocol is an error naming the variable.
    pub fn from_env(
        service: &'static str,
        instance: Option<String>,
    ) -> Result<Self, ProtocolError> {
        Ok(Self {
            service,
            fallback_endpoint: std::env::var(OTLP_ENDPOINT_ENV).ok(),
            protocols: Protocols::from_env()?,
            instance,
            ..Self::default()
        })
    }
}

/// The endpoint to export to: the object's, else the fallback, else none (an empty
/// string counts as unset).
pub fn resolve_endpoint<'a>(
    from_object: Option<&'a str>,
    fallback: Option<&'a str>,
) -> Option<&'a str> {
    let set = |e: &&str| !e.trim().is_empty();
    from_object.filter(set).or(fallback.filter(set))
}

/// The process's OpenTelemetry pipelines; cheap to clone (shared).
#[derive(Clone)]
pub struct Otlp(Arc<Inner>);

struct Inner {
    service: &'static str,
    fallback_endpoint: Option<String>,
    protocols: Protocols,
    resource: Resource,
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    spans: Arc<Slot<SpanExporter>>,
    metrics: Arc<Slot<MetricExporter>>,
    /// The endpoint and protocols last chosen by [`Otlp::use_target`] (even if they
    /// could not be used), so that every reconcile does not rebuild or re-warn.
    chosen: Mutex<Option<(String, Protocols)>>,
}

impl Otlp {
    /// Builds the pipelines with export off; [`Self::use_endpoint`] turns it on.
    pub fn new(settings: OtlpSettings) -> Self {
        let mut resource = Resource::builder()
            .with_service_name(settings.service)
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
        if let Some(instance) = settings.instance {
            resource = resource.with_attribute(KeyValue::new("service.instance.id", instance));
        }
        let resource = resource.build();

        let spans = Slot::new("traces");
        let mut batch = BatchConfigBuilder::default();
        if let Some(delay) = settings.span_delay {
            batch = batch.with_scheduled_delay(delay);
        }
        let tracer_provider = SdkTracerProvider::builder()
            .with_resource(resource.clone())
            .with_span_processor(
                BatchSpanProcessor::builder(SpanSwitch(spans.clone()))
                    .with_batch_config(batch.build())
                    .build(),
            )
            .build();

        let metrics = Slot::new("metrics");
        let meter_provider = SdkMeterProvider::builder()
            .with_resource(resource.clone())
            .with_reader(
                PeriodicReader::builder(MetricSwitch(metrics.clone()))
                    // Zero keeps the SDK's default (env or 60 s).
                    .with_interval(settings.metric_interval.unwrap_or_default())
                    .build(),
            )
            .build();

        Self(Arc::new(Inner {
            service: settings.service,
            fallback_endpoint: settings.fallback_endpoint,
            protocols: settings.protocols,
            resource,
            tracer_provider,
            meter_provider,
            spans,
            metrics,
            chosen: Mutex::new(None),
        }))
    }

    /// The layer that turns the binary's own `tracing` spans (those of the crate named
    /// like the service — the operator's reconcile span, the updater's publish span —
    /// and the events in them, at info and above) into OpenTelemetry spans. Other
    /// crates' spans stay out: the gRPC client's would describe the export itself.
    pub fn tracing_layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let target = self.0.service.replace('-', "_");
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer())
            .with_filter(Targets::new().with_target(target, tracing::Level::INFO))
    }

    /// The tracer for spans built directly with the OpenTelemetry API (the scheduler's,
    /// whose timings are measured, not spanned by `tracing`).
    pub fn tracer(&self) -> SdkTracer {
        self.0.tracer_provider.tracer(self.0.service)
    }

    /// The meter the binary's OTLP metrics are recorded with.
    pub fn meter(&self) -> Meter {
        self.0.meter_provider.meter(self.0.service)
    }

    /// `service.name` of what this exports.
    pub fn service(&self) -> &'static str {
        self.0.service
    }

    /// The endpoint chosen last, if any.
    pub fn endpoint(&self) -> Option<String> {
        self.0
            .chosen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(endpoint, _)| endpoint.clone())
    }

    /// Exports to the object's endpoint, else the fallback, else nowhere. Cheap when
    /// nothing changes, so it runs on every reconcile; must run on a Tokio runtime (the
    /// gRPC channel's worker is spawned there). An endpoint that cannot be used (a
    /// malformed URL) turns export off with a warning until the endpoint changes.
    pub fn use_endpoint(&self, from_object: Option<&str>) {
        self.use_target(from_object, None);
    }

    /// As [`Self::use_endpoint`], both signals over `protocol` (the object's) when
    /// given, else over the protocols of the environment.
    pub fn use_target(&self, from_object: Option<&str>, protocol: Option<Protocol>) {
        let wanted = resolve_endpoint(from_object, self.0.fallback_endpoint.as_deref());
        let protocols = protocol.map_or(self.0.protocols, Protocols::both);
        let mut chosen = self.0.chosen.lock().unwrap_or_else(PoisonError::into_inner);
        if chosen.as_ref().map(|(e, p)| (e.as_str(), *p)) == wanted.map(|w| (w, protocols)) {
            return;
        }
        let exporters = match wanted {
            None => {
                tracing::info!("OTLP export off: no endpoint configured");
                None
            }
            Some(endpoint) => match self.0.exporters(endpoint, protocols) {
                Ok(exporters) => {
                    let Protocols { traces, metrics } = protocols;
                    tracing::info!(endpoint, %traces, %metrics, "exporting traces and metrics over OTLP");
                    Some(exporters)
                }
                Err(error) => {
                    tracing::warn!(endpoint, %error, "cannot export to this OTLP endpoint; OTLP export off");
                    None
                }
            },
        };
        let (spans, metrics) = match (wanted, exporters) {
            (Some(endpoint), Some((spans, metrics))) => {
                (Some((endpoint, spans)), Some((endpoint, metrics)))
            }
            _ => (None, None),
        };
        // The replaced exporters only drop their gRPC client: an export still running
        // on them finishes (or fails) on its own.
        if let Some(old) = self.0.spans.set(spans) {
            let _ = old.shutdown();
        }
        if let Some(old) = self.0.metrics.set(metrics) {
            let _ = opentelemetry_sdk::metrics::exporter::PushMetricExporter::shutdown(&*old);
        }
        *chosen = wanted.map(|w| (w.to_owned(), protocols));
    }

    /// Exports what is pending and stops both pipelines, spending at most a few
    /// seconds per signal when the collector does not answer.
    pub async fn shutdown(&self) {
        // The SDK's shutdowns block: off the async threads, both signals at once, so a
        // collector that does not answer costs one timeout, not two.
        let traces = self.0.clone();
        let spans = tokio::task::spawn_blocking(move || {
            if let Err(error) = traces
                .tracer_provider
                .shutdown_with_timeout(SHUTDOWN_TIMEOUT)
            {
                tracing::debug!(%error, "stopping the OTLP trace pipeline");
            }
        });
        let meters = self.0.clone();
        let metrics = tokio::task::spawn_blocking(move || {
            if let Err(error) = meters
                .meter_provider
                .shutdown_with_timeout(SHUTDOWN_TIMEOUT)
            {
                tracing::debug!(%error, "stopping the OTLP metrics pipeline");
            }
        });
        let flushed = crate::shutdown::step("OTLP flush", FLUSH_LIMIT, async {
            futures::future::join(spans, metrics).await
        })
        .await;
        if let Some((spans, metrics)) = flushed {
            for error in [spans.err(), metrics.err()].into_iter().flatten() {
                tracing::warn!(%error, "flushing OpenTelemetry data");
            }
        }
    }
}

impl Inner {
    /// Both exporters for `endpoint`, each over its protocol; TLS with the system's
    /// roots for `https://`.
    fn exporters(
        &self,
        endpoint: &str,
        protocols: Protocols,
    ) -> Result<(SpanExporter, MetricExporter), ExporterBuildError> {
        let mut spans = match protocols.traces {
            Protocol::Grpc => {
                let mut b = SpanExporter::builder().with_tonic().with_endpoint(endpoint);
                if let Some(tls) = grpc_tls(endpoint) {
                    b = b.with_tls_config(tls);
                }
                b.build()?
            }
            Protocol::HttpProtobuf => SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(signal_url(endpoint, "traces"))
                .with_http_client(http_client()?)
                .build()?,
        };
        // The provider gives its resource to the switch, not to exporters made later.
        spans.set_resource(&self.resource);

        let metrics = match protocols.metrics {
            Protocol::Grpc => {
                let mut b = MetricExporter::builder()
                    .with_tonic()
                    .with_endpoint(endpoint)
                    .with_temporality(Temporality::Cumulative);
                if let Some(tls) = grpc_tls(endpoint) {
                    b = b.with_tls_config(tls);
                }
                b.build()?
            }
            Protocol::HttpProtobuf => MetricExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(signal_url(endpoint, "metrics"))
                .with_temporality(Temporality::Cumulative)
                .with_http_client(http_client()?)
                .build()?,
        };
        Ok((spans, metrics))
    }
}

fn grpc_tls(endpoint: &str) -> Option<ClientTlsConfig> {
    endpoint
        .starts_with("https://")
        .then(|| ClientTlsConfig::new().with_native_roots())
}

fn http_client() -> Result<TokioHttpClient, ExporterBuildError> {
    TokioHttpClient::new().ok_or_else(|| {
        ExporterBuildError::InternalFailure(
            "OTLP/HTTP export needs a Tokio runtime to send its requests on".to_owned(),
        )
    })
}

/// The URL a signal is posted to over OTLP/HTTP: the endpoint (the collector's base
/// URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` and the object's `otlpEndpoint` name it) plus
/// `/v1/<signal>`, as the specification builds it from the general endpoint.
fn signal_url(endpoint: &str, signal: &str) -> String {
    format!("{}/v1/{signal}", endpoint.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_wins_over_the_environment() {
        let env = Some("http://env:4317");
        assert_eq!(
            resolve_endpoint(Some("http://cr:4317"), env),
            Some("http://cr:4317")
        );
        assert_eq!(resolve_endpoint(None, env), env);
        assert_eq!(resolve_endpoint(Some(""), env), env);
        assert_eq!(resolve_endpoint(None, Some(" ")), None);
        assert_eq!(resolve_endpoint(None, None), None);
    }

    #[test]
    fn signals_are_posted_under_the_endpoint() {
        assert_eq!(
            signal_url("http://collector:4318", "traces"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            signal_url("https://collector:4318/otlp/", "metrics"),
            "https://collector:4318/otlp/v1/metrics"
        );
    }

    #[tokio::test]
    async fn endpoints_switch_without_a_collector() {
        let otlp = Otlp::new(OtlpSettings {
            service: "tas-test",
            fallback_endpoint: Some("http://127.0.0.1:1".into()),
            ..OtlpSettings::default()
        });
        assert_eq!(otlp.endpoint(), None, "off until told");
        otlp.use_endpoint(None);
        assert_eq!(otlp.endpoint().as_deref(), Some("http://127.0.0.1:1"));
        otlp.use_endpoint(Some("http://127.0.0.1:2"));
        assert_eq!(otlp.endpoint().as_deref(), Some("http://127.0.0.1:2"));
        // A URL the exporter refuses is remembered, so it is not retried per reconcile.
        otlp.use_endpoint(Some("not a url"));
        assert_eq!(otlp.endpoint().as_deref(), Some("not a url"));
        // Nothing listens: shutting down still returns promptly.
        otlp.use_endpoint(None);
        tokio::time::timeout(Duration::from_secs(30), otlp.shutdown())
            .await
            .expect("shutdown is bounded");
    }
}
