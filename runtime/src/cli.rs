//! The flags every TAS binary shares. Each binary flattens [`CommonArgs`] into its own
//! arguments (`#[command(flatten)]`), so that the names, environment variables,
//! defaults and help read the same in the operator, the scheduler and the node agent.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::client::{self, ClientError};
use crate::http::{Authorizer, CertSource, Endpoint, Security};
use crate::identity;
use crate::telemetry::{self, LogFormat, Otlp, OtlpSettings, TelemetryError};

/// Kubeconfig, `/healthz`/`/readyz`/`/metrics` address and security, logging and
/// identity.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct CommonArgs {
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster
    /// service account).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Address of /healthz, /readyz and /metrics (HTTPS unless --insecure-http).
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
    /// Serving certificate (PEM chain) of the HTTPS endpoint; with
    /// --tls-private-key-file. Default: a self-signed certificate generated at start.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Serve /healthz, /readyz and /metrics over plain HTTP to anyone, without TLS or
    /// authorisation (only behind a proxy that does both, or on a trusted network).
    #[arg(long, conflicts_with_all = ["tls_cert_file", "tls_private_key_file"])]
    pub insecure_http: bool,
    /// Accept on /metrics (and the component's own routes) only bearer tokens meant for
    /// this audience (repeatable; e.g. a scraper's projected ServiceAccount token with
    /// `audience: tas-metrics`, which the component could not replay to the API server).
    /// Default: tokens meant for the API server itself, as ServiceAccount tokens are.
    #[arg(long = "auth-audience", conflicts_with = "insecure_http")]
    pub auth_audiences: Vec<String>,
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
        let otlp = Otlp::new(OtlpSettings::from_env(service, Some(self.identity()))?);
        otlp.use_endpoint(None);
        let otlp = otlp.endpoint().is_some().then_some(otlp);
        telemetry::init(&self.log_level, self.log_format, otlp.as_ref())?;
        Ok(otlp)
    }

    /// A client from `--kubeconfig`, or from the environment.
    pub async fn client(&self) -> Result<kube::Client, ClientError> {
        client::from_kubeconfig(self.kubeconfig.as_deref()).await
    }

    /// How the HTTP endpoint is secured: plain with `--insecure-http`; otherwise TLS
    /// with the certificate files or a self-signed certificate, and `/metrics`
    /// authorised by the API server that `client` talks to.
    pub fn security(&self, client: &kube::Client) -> Security {
        if self.insecure_http {
            return Security::Insecure;
        }
        let cert = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => CertSource::SelfSigned {
                names: crate::http::self_signed_names(&self.identity()),
            },
        };
        Security::Secure {
            cert,
            authorizer: Authorizer::with_audiences(client.clone(), self.auth_audiences.clone()),
        }
    }

    /// `--http-address` with [`Self::security`].
    pub fn endpoint(&self, client: &kube::Client) -> Endpoint {
        Endpoint {
            address: self.http_address,
            security: self.security(client),
        }
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
        assert!(!defaults.insecure_http);
        assert_eq!(defaults.tls_cert_file, None);
        assert!(defaults.auth_audiences.is_empty());

        let set = Binary::try_parse_from([
            "binary",
            "--kubeconfig=cluster/kubeconfig",
            "--http-address=127.0.0.1:9090",
            "--log-level=debug,kube=warn",
            "--log-format=text",
            "--identity=replica-a",
            "--tls-cert-file=certs/tls.crt",
            "--tls-private-key-file=certs/tls.key",
            "--auth-audience=tas-metrics",
            "--auth-audience=other",
        ])
        .unwrap()
        .common;
        assert_eq!(set.kubeconfig, Some(PathBuf::from("cluster/kubeconfig")));
        assert_eq!(set.http_address, "127.0.0.1:9090".parse().unwrap());
        assert_eq!(set.log_level, "debug,kube=warn");
        assert_eq!(set.log_format, LogFormat::Text);
        assert_eq!(set.identity(), "replica-a");
        assert_eq!(set.tls_cert_file, Some(PathBuf::from("certs/tls.crt")));
        assert_eq!(
            set.tls_private_key_file,
            Some(PathBuf::from("certs/tls.key"))
        );
        assert_eq!(set.auth_audiences, ["tas-metrics", "other"]);
    }

    #[test]
    fn plain_http_is_explicit_and_excludes_certificates() {
        let insecure = Binary::try_parse_from(["binary", "--insecure-http"])
            .unwrap()
            .common;
        assert!(insecure.insecure_http);
        let err =
            Binary::try_parse_from(["binary", "--insecure-http", "--tls-cert-file=a"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        let err = Binary::try_parse_from(["binary", "--tls-cert-file=a"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn an_unknown_log_format_is_refused() {
        let err = Binary::try_parse_from(["binary", "--log-format=xml"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
    }
}
