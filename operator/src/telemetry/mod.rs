//! The operator's telemetry: logs to stderr as every TAS binary writes them, plus
//! OpenTelemetry traces and metrics over OTLP when an endpoint is configured
//! ([`otlp`]).
//!
//! Both hang off one `tracing` subscriber: the log layer filtered by `--log-level`, the
//! OpenTelemetry layer by its own filter, so quieter logs do not thin out the traces.

pub mod otlp;
mod switch;

pub use otlp::{Otlp, OtlpSettings};

use tas_runtime::telemetry::{LogFormat, TelemetryError, log_layer, warn_bad_filter};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Installs the global subscriber: logs as `tas_runtime::telemetry::init_logging`
/// writes them (a bad `level` falls back to info with a warning), and `otlp`'s
/// tracing layer.
pub fn init(level: &str, format: LogFormat, otlp: &Otlp) -> Result<(), TelemetryError> {
    let (logs, bad_filter) = log_layer(level, format);
    Registry::default()
        .with(logs)
        .with(otlp.tracing_layer())
        .try_init()?;
    warn_bad_filter(level, bad_filter);
    Ok(())
}
