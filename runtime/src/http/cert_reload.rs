//! Serving certificate files re-read while the server runs, so that a rotated
//! certificate (cert-manager renewing its Secret, OpenShift's service CA, a Secret
//! volume the kubelet updates by swapping a symlink) is served without a restart.
//!
//! ```text
//! cert + key files ──poll every RELOAD_INTERVAL──► changed? ──parse──► ok ──► swap ──► new handshakes
//!                                                                   └─ broken ─► keep the old one,
//!                                                                                log + count, naming the file
//! ```
//!
//! The server's rustls configuration asks [`ReloadingCert`] for the certificate on
//! every handshake; [`watch`] replaces it when the files' contents change and parse
//! into a certificate chain and a matching key. Contents, not modification times, are
//! compared: a Secret volume's atomic symlink swap keeps the files' own times. A
//! half-written rotation (the certificate new, the key still old) is refused like any
//! broken pair and taken once the second file follows.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tracing::{info, warn};

use super::tls::{TlsError, read_chain_bytes, read_key_bytes};

/// How often the files are read for changes. A Secret volume itself follows its
/// Secret within a minute or so; ten seconds more do not matter and cost two small
/// reads.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The certificate handed to every new TLS handshake; swapped by [`watch`].
#[derive(Debug)]
pub struct ReloadingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ReloadingCert {
    fn new(first: CertifiedKey) -> Self {
        Self {
            current: RwLock::new(Arc::new(first)),
        }
    }

    /// The certificate served now.
    fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(key);
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The file a reload error is about.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FileLabel {
    file: String,
}

/// The reload counters, served with the component's own metrics.
#[derive(Debug, Clone, Default)]
pub struct ReloadMetrics {
    reloads: Counter,
    errors: Family<FileLabel, Counter>,
}

impl ReloadMetrics {
    /// Registers `tas_serving_certificate_reloads_total` and
    /// `tas_serving_certificate_reload_errors_total{file}` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "tas_serving_certificate_reloads",
            "Times new serving certificate files were read and served to new connections",
            metrics.reloads.clone(),
        );
        registry.register(
            "tas_serving_certificate_reload_errors",
            "Times changed serving certificate files could not be used (the previous certificate stays), by file",
            metrics.errors.clone(),
        );
        metrics
    }
}

/// The certificate and key files as last read (used or refused), and where they are.
struct Files {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    seen: (Vec<u8>, Vec<u8>),
}

/// A certificate pair that could not be used, and the file at fault.
struct Refused {
    file: PathBuf,
    error: TlsError,
}

impl Files {
    /// The certificate and key in `cert` and `key`, which must be usable now.
    fn certified_key(
        cert: &Path,
        key: &Path,
        provider: &CryptoProvider,
        bytes: &(Vec<u8>, Vec<u8>),
    ) -> Result<CertifiedKey, Refused> {
        let refused = |file: &Path, error| Refused {
            file: file.to_owned(),
            error,
        };
        let chain = read_chain_bytes(cert, &bytes.0).map_err(|e| refused(cert, e))?;
        let private = read_key_bytes(key, &bytes.1).map_err(|e| refused(key, e))?;
        CertifiedKey::from_der(chain, private, provider).map_err(|e| Refused {
            file: key.to_owned(),
            error: TlsError::Pem {
                path: key.to_owned(),
                message: format!("does not match the certificate in {}: {e}", cert.display()),
            },
        })
    }

    /// The new certificate when the files changed since the last read and are usable.
    async fn poll(&mut self) -> Option<Result<CertifiedKey, Refused>> {
        let read = |path: PathBuf| async move {
            tokio::fs::read(&path).await.map_err(|e| Refused {
                error: TlsError::Pem {
                    path: path.clone(),
                    message: e.to_string(),
                },
                file: path,
            })
        };
        let now = match (read(self.cert.clone()).await, read(self.key.clone()).await) {
            (Ok(cert), Ok(key)) => (cert, key),
            (Err(refused), _) | (_, Err(refused)) => return Some(Err(refused)),
        };
        if now == self.seen {
            return None;
        }
        let outcome = Self::certified_key(&self.cert, &self.key, &self.provider, &now);
        self.seen = now;
        Some(outcome)
    }
}

/// Reads `cert` and `key` now: the resolver serving them, and the watcher that keeps
/// it current (to spawn next to the server). Fails if the files are not usable now.
pub fn watch(
    cert: &Path,
    key: &Path,
    provider: Arc<CryptoProvider>,
    metrics: ReloadMetrics,
    interval: Duration,
) -> Result<
    (
        Arc<ReloadingCert>,
        impl Future<Output = ()> + Send + 'static,
    ),
    TlsError,
> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            message: e.to_string(),
        })
    };
    let seen = (read(cert)?, read(key)?);
    let first = Files::certified_key(cert, key, &provider, &seen).map_err(|r| r.error)?;
    let resolver = Arc::new(ReloadingCert::new(first));
    let mut files = Files {
        cert: cert.to_owned(),
        key: key.to_owned(),
        provider,
        seen,
    };
    let target = resolver.clone();
    let watcher = async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            match files.poll().await {
                None => {}
                Some(Ok(key)) => {
                    target.replace(key);
                    metrics.reloads.inc();
                    info!(cert = %files.cert.display(), key = %files.key.display(), "serving the new certificate to new connections");
                }
                Some(Err(Refused { file, error })) => {
                    metrics
                        .errors
                        .get_or_create(&FileLabel {
                            file: file.display().to_string(),
                        })
                        .inc();
                    warn!(file = %file.display(), %error, "the changed serving certificate files cannot be used; still serving the previous certificate");
                }
            }
        }
    };
    Ok((resolver, watcher))
}

#[cfg(test)]
mod tests;
