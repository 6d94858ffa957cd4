//! Which OTLP transport each signal uses, from the OpenTelemetry SDK's environment
//! variables: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`,
//! else `OTEL_EXPORTER_OTLP_PROTOCOL`, else gRPC (what TAS has always spoken, and what
//! the `otlpEndpoint` of the TopologyAwareScheduling object is documented as). The
//! specification's other value, `http/json`, and anything else are refused at start.

use std::fmt;

/// The env var naming the protocol of every signal.
pub const PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// The env var naming the protocol of traces (wins over [`PROTOCOL_ENV`]).
pub const TRACES_PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// The env var naming the protocol of metrics (wins over [`PROTOCOL_ENV`]).
pub const METRICS_PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL";

/// An OTLP transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC (collectors listen on 4317).
    #[default]
    Grpc,
    /// OTLP/HTTP with protobuf bodies, `POST <endpoint>/v1/traces` and `/v1/metrics`
    /// (collectors listen on 4318).
    HttpProtobuf,
}

impl Protocol {
    /// The value as the environment variables spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::HttpProtobuf => "http/protobuf",
        }
    }

    /// `value` of the env var `variable`.
    pub fn parse(variable: &'static str, value: &str) -> Result<Self, ProtocolError> {
        match value.trim() {
            "grpc" => Ok(Self::Grpc),
            "http/protobuf" => Ok(Self::HttpProtobuf),
            other => Err(ProtocolError {
                variable,
                value: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An OTLP protocol variable with a value TAS cannot export with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{variable}={value:?} is not an OTLP protocol TAS can export with: use \"grpc\" or \"http/protobuf\""
)]
pub struct ProtocolError {
    /// The variable.
    pub variable: &'static str,
    /// Its value.
    pub value: String,
}

/// The protocol of each signal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Protocols {
    /// Of traces.
    pub traces: Protocol,
    /// Of metrics.
    pub metrics: Protocol,
}

impl Protocols {
    /// Both signals over `protocol`.
    pub fn both(protocol: Protocol) -> Self {
        Self {
            traces: protocol,
            metrics: protocol,
        }
    }

    /// From the process's environment.
    pub fn from_env() -> Result<Self, ProtocolError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From the variables `lookup` gives (an empty value counts as unset).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ProtocolError> {
        let read = |name: &'static str| {
            lookup(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| Protocol::parse(name, &v))
                .transpose()
        };
        let general = read(PROTOCOL_ENV)?.unwrap_or_default();
        Ok(Self {
            traces: read(TRACES_PROTOCOL_ENV)?.unwrap_or(general),
            metrics: read(METRICS_PROTOCOL_ENV)?.unwrap_or(general),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn from(vars: &[(&str, &str)]) -> Result<Protocols, ProtocolError> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Protocols::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn grpc_unless_told_and_the_signal_variable_wins() {
        assert_eq!(from(&[]).unwrap(), Protocols::both(Protocol::Grpc));
        assert_eq!(
            from(&[(PROTOCOL_ENV, "http/protobuf")]).unwrap(),
            Protocols::both(Protocol::HttpProtobuf)
        );
        assert_eq!(
            from(&[
                (PROTOCOL_ENV, "http/protobuf"),
                (TRACES_PROTOCOL_ENV, "grpc")
            ])
            .unwrap(),
            Protocols {
                traces: Protocol::Grpc,
                metrics: Protocol::HttpProtobuf
            }
        );
        assert_eq!(
            from(&[(METRICS_PROTOCOL_ENV, "http/protobuf"), (PROTOCOL_ENV, "")]).unwrap(),
            Protocols {
                traces: Protocol::Grpc,
                metrics: Protocol::HttpProtobuf
            }
        );
    }

    #[test]
    fn an_unknown_protocol_is_refused_naming_the_variable() {
        let err = from(&[(TRACES_PROTOCOL_ENV, "http/json")]).unwrap_err();
        assert_eq!(err.variable, TRACES_PROTOCOL_ENV);
        let text = err.to_string();
        assert!(
            text.contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"http/json\"")
                && text.contains("\"grpc\" or \"http/protobuf\""),
            "{text}"
        );
        assert!(from(&[(PROTOCOL_ENV, "udp")]).is_err());
    }
}
