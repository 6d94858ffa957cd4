//! The HTTP client of OTLP/HTTP export: hyper over rustls on ring with the system's
//! roots (as the gRPC exporter's TLS), so no system OpenSSL. The SDK exports from its
//! own threads, which have no Tokio runtime; hyper needs one, so each request runs as a
//! task on the runtime the client was made on and the SDK's thread waits for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use rustls::crypto::ring;

/// How long one export request may take (the SDK's default OTLP timeout).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// An [`HttpClient`] whose requests run on a Tokio runtime.
#[derive(Debug, Clone)]
pub(super) struct TokioHttpClient {
    client: HyperClient<HttpsConnector<HttpConnector>>,
    runtime: tokio::runtime::Handle,
}

impl TokioHttpClient {
    /// A client for `http://` and `https://` endpoints, running on the current Tokio
    /// runtime (`None` outside one).
    pub(super) fn new() -> Option<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let provider = Arc::new(ring::default_provider());
        let builder =
            match HttpsConnectorBuilder::new().with_provider_and_native_roots(provider.clone()) {
                Ok(builder) => builder,
                Err(error) => {
                    // Plain http:// still works; https:// fails per request, saying so.
                    tracing::warn!(%error, "no system root certificates for OTLP over https://");
                    let config = rustls::ClientConfig::builder_with_provider(provider)
                        .with_safe_default_protocol_versions()
                        .ok()?
                        .with_root_certificates(rustls::RootCertStore::empty())
                        .with_no_client_auth();
                    HttpsConnectorBuilder::new().with_tls_config(config)
                }
            };
        let connector = builder
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .build();
        Some(Self {
            client: HyperClient::new(connector, REQUEST_TIMEOUT, None),
            runtime,
        })
    }
}

impl HttpClient for TokioHttpClient {
    fn send_bytes<'client, 'call>(
        &'client self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'call>>
    where
        'client: 'call,
        Self: 'call,
    {
        let client = self.client.clone();
        let task = self
            .runtime
            .spawn(async move { client.send_bytes(request).await });
        Box::pin(async move { task.await.map_err(|e| -> HttpError { Box::new(e) })? })
    }
}
