//! The operator's telemetry: logs to stderr as every TAS binary writes them, plus
//! OpenTelemetry traces and metrics over OTLP when an endpoint is configured — the
//! pipelines of `tas_runtime::telemetry::otlp`, shared with the operands, switched to
//! the object's endpoint on every reconcile.

pub use tas_runtime::telemetry::otlp;
pub use tas_runtime::telemetry::{Otlp, OtlpSettings};

use tas_runtime::telemetry::{LogFormat, TelemetryError};

/// `service.name` of everything the operator exports, and the name of its tracer and
/// meter.
pub const SERVICE_NAME: &str = "tas-operator";

/// Installs the global subscriber: logs as `tas_runtime::telemetry::init_logging`
/// writes them (a bad `level` falls back to info with a warning), and `otlp`'s
/// tracing layer.
pub fn init(level: &str, format: LogFormat, otlp: &Otlp) -> Result<(), TelemetryError> {
    tas_runtime::telemetry::init(level, format, Some(otlp))
}

/// The runtime's protocol for the object's `otlpProtocol`.
pub fn protocol(protocol: tas_api::tas::OtlpProtocol) -> tas_runtime::telemetry::Protocol {
    match protocol {
        tas_api::tas::OtlpProtocol::Grpc => tas_runtime::telemetry::Protocol::Grpc,
        tas_api::tas::OtlpProtocol::HttpProtobuf => tas_runtime::telemetry::Protocol::HttpProtobuf,
    }
}
