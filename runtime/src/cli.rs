//! The flags every TAS binary shares. Each binary flattens [`CommonArgs`] into its own
//! arguments (`#[command(flatten)]`), so that the names, environment variables,
//! defaults and help read the same in the operator, the scheduler and the node agent.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::client::{self, ClientError};
use crate::identity;
use crate::telemetry::{self, LogFormat, Otlp, OtlpSettings, TelemetryError};

/// Kubeconfig, `/healthz`/`/readyz`/`/metrics` address, logging and identity.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct CommonArgs {
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster
    /// service account).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub http_address: SocketAddr,
    /// Log filter: a level (error, warn, info, debug, trace) or a tracing directive such
    /// as `info,kube=warn`.
    #[arg(long, env = "TAS_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, env = "TAS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// This replica's name in Leases, Events and logs (default: $POD_NAME, else the host
    /// name).
    #[arg(long)]
    pub identity: Option<String>,
}

impl CommonArgs {
    /// Installs the process's logging as `--log-level` and `--log-format` say.
    pub fn init_logging(&self) -> Result<(), TelemetryError> {
        telemetry::init_logging(&self.log_level, self.log_format)
    }

    /// Installs the process's logging, and OTLP export as `service` (traces of its own
    /// crate's `tracing` spans, and whatever it records on the returned pipelines' tracer
    /// and meter) when `OTEL_EXPORTER_OTLP_ENDPOINT` names a collector; `None` without
    /// one. Runs on a Tokio runtime (the gRPC channel's worker is spawned there).
    pub fn init_telemetry(&self, service: &'static str) -> Result<Option<Otlp>, TelemetryError> {
        let otlp = Otlp::new(OtlpSettings::from_env(service, Some(self.identity())));
        otlp.use_endpoint(None);
        let otlp = otlp.endpoint().is_some().then_some(otlp);
        telemetry::init(&self.log_level, self.log_format, otlp.as_ref())?;
        Ok(otlp)
    }

    /// A client from `--kubeconfig`, or from the environment.
    pub async fn client(&self) -> Result<kube::Client, ClientError> {
        client::from_kubeconfig(self.kubeconfig.as_deref()).await
    }

    /// This replica's identity: `--identity`, else `$POD_NAME`, else the host name.
    pub fn identity(&self) -> String {
        identity::identity(self.identity.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Binary {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn every_flag_parses_with_its_default_and_explicitly() {
        let defaults = Binary::try_parse_from(["binary"]).unwrap().common;
        assert_eq!(defaults.http_address, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(defaults.log_format, LogFormat::Json);
        assert_eq!(defaults.identity, None);

        let set = Binary::try_parse_from([
            "binary",
            "--kubeconfig=cluster/kubeconfig",
            "--http-address=127.0.0.1:9090",
            "--log-level=debug,kube=warn",
            "--log-format=text",
            "--identity=replica-a",
        ])
        .unwrap()
        .common;
        assert_eq!(set.kubeconfig, Some(PathBuf::from("cluster/kubeconfig")));
        assert_eq!(set.http_address, "127.0.0.1:9090".parse().unwrap());
        assert_eq!(set.log_level, "debug,kube=warn");
        assert_eq!(set.log_format, LogFormat::Text);
        assert_eq!(set.identity(), "replica-a");
    }

    #[test]
    fn an_unknown_log_format_is_refused() {
        let err = Binary::try_parse_from(["binary", "--log-format=xml"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
    }
}
