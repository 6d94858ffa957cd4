//! The operator's telemetry: logs to stderr as every TAS binary writes them, plus
//! OpenTelemetry traces and metrics over OTLP when an endpoint is configured
//! ([`otlp`]).
//!
//! Both hang off one `tracing` subscriber: the log layer filtered by `--log-level`, the
//! OpenTelemetry layer by its own filter, so quieter logs do not thin out the traces.

pub mod otlp;
mod switch;

pub use otlp::{Otlp, OtlpSettings};

use tas_runtime::telemetry::{FALLBACK_LEVEL, TelemetryError};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _, Registry};

/// Installs the global subscriber: logs as `tas_runtime::telemetry::init_logging`
/// writes them (a bad `level` falls back to info with a warning), and `otlp`'s
/// tracing layer.
pub fn init(level: &str, json: bool, otlp: &Otlp) -> Result<(), TelemetryError> {
    let (filter, bad_filter) = match EnvFilter::try_new(level) {
        Ok(filter) => (filter, None),
        Err(e) => (EnvFilter::new(FALLBACK_LEVEL), Some(e.to_string())),
    };
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = if json {
        logs.json().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    Registry::default()
        .with(logs)
        .with(otlp.tracing_layer())
        .try_init()?;
    if let Some(error) = bad_filter {
        tracing::warn!(
            requested = level,
            %error,
            "invalid log filter; logging at {FALLBACK_LEVEL}"
        );
    }
    Ok(())
}
