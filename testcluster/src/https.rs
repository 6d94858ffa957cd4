//! A bare HTTPS GET for tests of the TAS binaries' endpoints, which serve a
//! self-signed certificate: like the kubelet's HTTPS probes, it does not verify the
//! server's certificate (the tests check who may read, not who serves).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Accepts any server certificate, checking only that the handshake is signed by it.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS connector that trusts any server certificate (HTTP/1.1 only).
pub fn insecure_tls_connector() -> TlsConnector {
    let provider = Arc::new(ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// TLS over `tcp` to the server at `ip`, trusting any certificate.
pub async fn tls_connect_insecure(
    tcp: TcpStream,
    ip: std::net::IpAddr,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    insecure_tls_connector()
        .connect(ServerName::IpAddress(ip.into()), tcp)
        .await
}

/// `GET https://addr/path`, with `Authorization: Bearer token` when given: the status
/// code and the body. Times out after 10 seconds.
pub async fn https_get(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let work = async {
        let tcp = TcpStream::connect(addr).await?;
        let tls = tls_connect_insecure(tcp, addr.ip()).await?;
        get_over(tls, &addr.to_string(), path, token).await
    };
    tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "https_get timed out"))?
}

/// `GET path` over an open connection (HTTP/1.0, so the server closes it).
pub async fn get_over(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    host: &str,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n{auth}\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    // A server may close a TLS connection without close_notify; keep what arrived.
    if let Err(e) = stream.read_to_end(&mut raw).await
        && raw.is_empty()
    {
        return Err(e);
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {head}")))?;
    Ok((code, body.to_owned()))
}
