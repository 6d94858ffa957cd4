//! The serving certificate of the HTTPS endpoint: read from PEM files (a cert-manager
//! Certificate or a Secret mounted into the pod), or generated self-signed at start.
//!
//! A self-signed certificate is what kube-rbac-proxy and controller-runtime fall back
//! to as well: the kubelet's HTTPS probes do not verify certificates, but a scraper
//! that verifies (the ServiceMonitors of config/prometheus do) needs files signed by a
//! CA it trusts. The key never leaves the process. Certificate files
//! are read again when they change ([`super::cert_reload`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::cert_reload::{self, ReloadMetrics};

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// PEM files: the certificate chain (leaf first) and its private key.
    Files {
        /// Certificate chain.
        cert: PathBuf,
        /// Private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
    },
    /// Generated at start for these DNS names, valid as long as rcgen's default.
    SelfSigned {
        /// Subject alternative names.
        names: Vec<String>,
    },
}

/// Why no TLS configuration could be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("reading {path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Generating the self-signed certificate failed.
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A rustls server configuration for `source`: TLS 1.2 and 1.3 on ring, no client
/// certificates (callers authenticate with a bearer token), HTTP/1.1 and HTTP/2. The
/// certificate is read once; [`reloading_server_config`] follows changed files.
pub fn server_config(source: &CertSource) -> Result<Arc<ServerConfig>, TlsError> {
    let (chain, key) = match source {
        CertSource::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
        CertSource::SelfSigned { names } => self_signed(names)?,
    };
    let config = builder()?.with_single_cert(chain, key)?;
    Ok(finish(config))
}

/// A watcher of certificate files, to run next to the server.
pub type Watcher = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// As [`server_config`], but certificate files are read again every `interval` and a
/// changed, usable pair is served to new connections (a broken one is logged, counted
/// in `metrics`, and the previous certificate kept); the watcher doing it is returned
/// for files, none for a self-signed certificate.
pub fn reloading_server_config(
    source: &CertSource,
    metrics: ReloadMetrics,
    interval: Duration,
) -> Result<(Arc<ServerConfig>, Option<Watcher>), TlsError> {
    match source {
        CertSource::SelfSigned { .. } => Ok((server_config(source)?, None)),
        CertSource::Files { cert, key } => {
            let (resolver, watcher) = cert_reload::watch(cert, key, provider(), metrics, interval)?;
            let config = builder()?.with_cert_resolver(resolver);
            Ok((finish(config), Some(Box::pin(watcher))))
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

fn builder()
-> Result<rustls::ConfigBuilder<ServerConfig, rustls::server::WantsServerCert>, TlsError> {
    Ok(ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth())
}

fn finish(mut config: ServerConfig) -> Arc<ServerConfig> {
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

fn self_signed(
    names: &[String],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let generated = rcgen::generate_simple_self_signed(names.to_vec())?;
    let key = PrivateKeyDer::Pkcs8(generated.signing_key.serialize_der().into());
    Ok((vec![generated.cert.der().clone()], key))
}

fn pem_error(path: &Path, message: impl ToString) -> TlsError {
    TlsError::Pem {
        path: path.to_owned(),
        message: message.to_string(),
    }
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|e| pem_error(path, e))?;
    read_chain_bytes(path, &bytes)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = std::fs::read(path).map_err(|e| pem_error(path, e))?;
    read_key_bytes(path, &bytes)
}

/// The certificate chain in `bytes`, the contents of `path`.
pub(super) fn read_chain_bytes(
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if chain.is_empty() {
        return Err(pem_error(path, "no CERTIFICATE block"));
    }
    Ok(chain)
}

/// The private key in `bytes`, the contents of `path`.
pub(super) fn read_key_bytes(
    path: &Path,
    bytes: &[u8],
) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(bytes).map_err(|e| pem_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_is_generated() {
        let names = vec!["localhost".to_owned()];
        assert!(server_config(&CertSource::SelfSigned { names }).is_ok());
    }

    #[test]
    fn certificate_files_are_read_and_bad_ones_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let generated = rcgen::generate_simple_self_signed(vec!["tas.test".to_owned()]).unwrap();
        let cert = dir.join("tls.crt");
        let key = dir.join("tls.key");
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        let files = CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        };
        assert!(server_config(&files).is_ok());

        let swapped = CertSource::Files {
            cert: key.clone(),
            key: cert.clone(),
        };
        let err = server_config(&swapped).unwrap_err().to_string();
        assert!(err.contains("tls.key"), "{err}");
    }
}
