//! Logging: one `tracing` subscriber for the process, human-readable or JSON lines,
//! written to stderr (as the Kubernetes components do) and filtered by an
//! `EnvFilter` directive such as `info` or `info,kube=warn,tas_scheduler=debug` — and,
//! when an endpoint is configured, OpenTelemetry traces and metrics over OTLP
//! ([`otlp`]), the same for the three binaries.
//!
//! Both hang off one `tracing` subscriber ([`init`]): the log layer filtered by
//! `--log-level`, the OpenTelemetry layer by its own filter, so quieter logs do not thin
//! out the traces.

mod http_client;
pub mod otlp;
pub mod protocol;
mod switch;

pub use otlp::{OTLP_ENDPOINT_ENV, Otlp, OtlpSettings};
pub use protocol::{Protocol, ProtocolError, Protocols};

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::{SubscriberInitExt as _, TryInitError};
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The filter used when the requested one does not parse.
pub const FALLBACK_LEVEL: &str = "info";

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    #[default]
    Json,
    /// Human-readable lines.
    Text,
}

/// Errors of logging setup.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// Another global subscriber was installed first; permanent for this process.
    #[error("a global tracing subscriber is already installed: {0}")]
    AlreadyInstalled(#[from] TryInitError),
    /// An OTLP protocol variable names a protocol TAS cannot export with; permanent.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

/// Installs the global subscriber. `level` is an `EnvFilter` directive; a bad one
/// falls back to [`FALLBACK_LEVEL`] with a warning rather than failing start-up.
pub fn init_logging(level: &str, format: LogFormat) -> Result<(), TelemetryError> {
    let (logs, bad_filter) = log_layer(level, format);
    Registry::default().with(logs).try_init()?;
    warn_bad_filter(level, bad_filter);
    Ok(())
}

/// Installs the global subscriber: logs as [`init_logging`] writes them (a bad `level`
/// falls back to info with a warning), and `otlp`'s tracing layer when there is one.
pub fn init(level: &str, format: LogFormat, otlp: Option<&Otlp>) -> Result<(), TelemetryError> {
    let (logs, bad_filter) = log_layer(level, format);
    Registry::default()
        .with(logs)
        .with(otlp.map(Otlp::tracing_layer))
        .try_init()?;
    warn_bad_filter(level, bad_filter);
    Ok(())
}

/// The log layer every TAS binary writes through (stderr, `format`, filtered by
/// `level`), for a subscriber that stacks more layers on it (the
/// OpenTelemetry layer). With a bad `level`, the fallback filter and the parse error,
/// to pass to [`warn_bad_filter`] once the subscriber is installed.
pub fn log_layer<S>(level: &str, format: LogFormat) -> (BoxedLayer<S>, Option<String>)
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let (filter, bad_filter) = parse_filter(level);
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let layer = match format {
        LogFormat::Json => logs.json().with_filter(filter).boxed(),
        LogFormat::Text => logs.with_filter(filter).boxed(),
    };
    (layer, bad_filter)
}

/// Logs that the requested filter did not parse, if it did not.
pub fn warn_bad_filter(level: &str, bad_filter: Option<String>) {
    if let Some(error) = bad_filter {
        tracing::warn!(
            requested = level,
            %error,
            "invalid log filter; logging at {FALLBACK_LEVEL}"
        );
    }
}

/// A boxed layer of subscriber `S`.
pub type BoxedLayer<S> = Box<dyn Layer<S> + Send + Sync + 'static>;

/// The filter for `level`, or the fallback and the parse error.
fn parse_filter(level: &str) -> (EnvFilter, Option<String>) {
    match EnvFilter::try_new(level) {
        Ok(filter) => (filter, None),
        Err(e) => (EnvFilter::new(FALLBACK_LEVEL), Some(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_filters_parse_and_bad_ones_fall_back() {
        let (filter, error) = parse_filter("info,kube=warn,tas_scheduler=debug");
        assert!(error.is_none());
        assert!(filter.to_string().contains("kube=warn"));

        let (filter, error) = parse_filter("info,kube=loud");
        assert!(error.is_some());
        assert_eq!(filter.to_string(), FALLBACK_LEVEL);
    }
}
