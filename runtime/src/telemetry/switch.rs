//! Exporters whose destination can change while the process runs.
//!
//! The tracer and meter providers live as long as the process (the `tracing` layer and
//! the metric instruments hold them); what changes with the configured endpoint is only
//! the OTLP exporter behind them. [`SpanSwitch`] and [`MetricSwitch`] are the exporters
//! the providers see: each forwards a batch to the exporter currently in its [`Slot`],
//! or drops it when there is none (export off).
//!
//! They also decide what a failed export costs: nothing for the caller (the SDK's
//! background thread), and a rate-limited log line ([`Failures`]) instead of the SDK's
//! error per batch, because a collector that is down should not flood the operator's log.

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// At most one warning per signal in this window while exports keep failing; the
/// failures in between are logged at debug level.
pub const WARN_EVERY: Duration = Duration::from_secs(300);

/// The exporter currently in use and the endpoint it sends to.
struct Target<E> {
    endpoint: Arc<str>,
    exporter: Arc<E>,
}

impl<E> Clone for Target<E> {
    fn clone(&self) -> Self {
        Self {
            endpoint: self.endpoint.clone(),
            exporter: self.exporter.clone(),
        }
    }
}

/// Where one signal's exports go, swapped by `Otlp::use_endpoint`.
pub struct Slot<E> {
    /// `traces` or `metrics`, for the log.
    signal: &'static str,
    target: RwLock<Option<Target<E>>>,
    failures: Mutex<Failures>,
}

impl<E> Slot<E> {
    /// An empty slot: exports are dropped until an exporter is set.
    pub fn new(signal: &'static str) -> Arc<Self> {
        Arc::new(Self {
            signal,
            target: RwLock::new(None),
            failures: Mutex::new(Failures::default()),
        })
    }

    /// Sends future exports to `exporter` (at `endpoint`), or nowhere; returns the
    /// exporter that was in use, for the caller to shut down.
    pub fn set(&self, next: Option<(&str, E)>) -> Option<Arc<E>> {
        let next = next.map(|(endpoint, exporter)| Target {
            endpoint: endpoint.into(),
            exporter: Arc::new(exporter),
        });
        // A new destination starts with a clean record: its first failure warns.
        *self.failures.lock().unwrap_or_else(PoisonError::into_inner) = Failures::default();
        let mut target = self.target.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *target, next).map(|t| t.exporter)
    }

    fn current(&self) -> Option<Target<E>> {
        self.target
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Logs the outcome of an export to `target`, unless the slot moved on meanwhile.
    fn report(&self, target: &Target<E>, result: OTelSdkResult) {
        let still_current = self
            .current()
            .is_some_and(|t| Arc::ptr_eq(&t.exporter, &target.exporter));
        if !still_current {
            return;
        }
        let verdict = self
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(result.is_ok(), Instant::now());
        let (signal, endpoint) = (self.signal, &*target.endpoint);
        match (verdict, result) {
            (Verdict::Warn { suppressed }, Err(error)) => tracing::warn!(
                signal,
                endpoint,
                %error,
                failures_since_last_warning = suppressed,
                "OTLP export failed; telemetry is dropped until the collector answers"
            ),
            (Verdict::Debug, Err(error)) => {
                tracing::debug!(signal, endpoint, %error, "OTLP export failed")
            }
            (Verdict::Recovered, _) => tracing::info!(signal, endpoint, "OTLP export recovered"),
            _ => {}
        }
    }
}

/// How to log the latest export outcome.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// A success like the one before it.
    Quiet,
    /// The first success after failures that were warned about.
    Recovered,
    /// A failure worth a warning; `suppressed` failures were only logged at debug
    /// level since the last warning.
    Warn { suppressed: u64 },
    /// A failure within [`WARN_EVERY`] of the last warning.
    Debug,
}

/// The rate limit of export-failure warnings.
#[derive(Debug, Default)]
struct Failures {
    last_warning: Option<Instant>,
    since_warning: u64,
    /// A warning was logged and no success seen since.
    warned: bool,
}

impl Failures {
    fn record(&mut self, ok: bool, now: Instant) -> Verdict {
        if ok {
            return if std::mem::take(&mut self.warned) {
                Verdict::Recovered
            } else {
                Verdict::Quiet
            };
        }
        let due = self
            .last_warning
            .is_none_or(|last| now.saturating_duration_since(last) >= WARN_EVERY);
        if due {
            self.last_warning = Some(now);
            self.warned = true;
            Verdict::Warn {
                suppressed: std::mem::take(&mut self.since_warning),
            }
        } else {
            self.since_warning += 1;
            Verdict::Debug
        }
    }
}

/// The span exporter the tracer provider sees.
pub struct SpanSwitch<E>(pub Arc<Slot<E>>);

impl<E> fmt::Debug for SpanSwitch<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpanSwitch")
            .field("endpoint", &self.0.current().map(|t| t.endpoint))
            .finish()
    }
}

impl<E: SpanExporter + 'static> SpanExporter for SpanSwitch<E> {
    /// Always Ok: a failure is logged here, rate-limited, rather than by the SDK.
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if let Some(target) = self.0.current() {
            let result = target.exporter.export(batch).await;
            self.0.report(&target, result);
        }
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        match self.0.set(None) {
            Some(exporter) => exporter.shutdown_with_timeout(timeout),
            None => Ok(()),
        }
    }
}

/// The metric exporter the meter provider's periodic reader sees.
pub struct MetricSwitch<E>(pub Arc<Slot<E>>);

impl<E: PushMetricExporter> PushMetricExporter for MetricSwitch<E> {
    /// Always Ok: a failure is logged here, rate-limited, rather than by the SDK.
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        if let Some(target) = self.0.current() {
            let result = target.exporter.export(metrics).await;
            self.0.report(&target, result);
        }
        Ok(())
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        match self.0.set(None) {
            Some(exporter) => exporter.shutdown_with_timeout(timeout),
            None => Ok(()),
        }
    }

    /// Cumulative, so a collector that joins late (or a new endpoint) gets totals.
    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_collector_warns_once_per_window_and_once_on_recovery() {
        let start = Instant::now();
        let mut f = Failures::default();
        assert_eq!(f.record(true, start), Verdict::Quiet);
        assert_eq!(f.record(false, start), Verdict::Warn { suppressed: 0 });
        let mut t = start;
        for _ in 0..10 {
            t += Duration::from_secs(5);
            assert_eq!(f.record(false, t), Verdict::Debug);
        }
        assert_eq!(
            f.record(false, start + WARN_EVERY),
            Verdict::Warn { suppressed: 10 }
        );
        assert_eq!(f.record(true, start + WARN_EVERY), Verdict::Recovered);
        assert_eq!(f.record(true, start + WARN_EVERY), Verdict::Quiet);
        // Flapping within the window: debug only, and no second "recovered".
        let later = start + WARN_EVERY + Duration::from_secs(10);
        assert_eq!(f.record(false, later), Verdict::Debug);
        assert_eq!(f.record(true, later), Verdict::Quiet);
    }
}
