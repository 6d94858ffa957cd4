//! Client of the kubelet's podresources socket.
//!
//! Each call waits for its turn (the pacing slot, and the backoff deadline after a
//! failure), dials the socket if there is no connection, and runs under the per-call
//! timeout. A failure that leaves the connection suspect drops it, so the next call dials
//! afresh: that is how a kubelet restart, which replaces the socket, is survived. Every
//! wait is bounded, so a call always returns within `max_backoff + call_timeout` plus its
//! place in the pacing queue.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint, Uri};
use tracing::{debug, info};

use super::backoff::Backoff;
use super::error::{PodResourcesError, is_not_found};
use super::pacing::Pacer;
use super::stats::ClientStats;
use super::v1;
use super::v1::pod_resources_lister_client::PodResourcesListerClient;

type Lister = PodResourcesListerClient<Channel>;

/// Where the kubelet serves the API unless configured otherwise.
pub const DEFAULT_SOCKET_PATH: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// Receive limit; `List` on a big node exceeds gRPC's usual 4 MiB.
pub const DEFAULT_MAX_DECODING_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
/// Bound on one call, dialling included.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// 20 calls per second, a fifth of what the kubelet allows.
pub const DEFAULT_MIN_CALL_INTERVAL: Duration = Duration::from_millis(50);
/// Wait after the first failure.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between failed attempts.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The URI is never resolved: the connector dials the unix socket. `localhost` is the
/// authority gRPC clients conventionally send over unix sockets.
const UNUSED_URI: &str = "http://localhost";

/// Settings of a [`PodResourcesClient`]. Start from [`ClientConfig::new`] and override
/// fields with struct update syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The kubelet's podresources socket.
    pub socket_path: PathBuf,
    /// Largest response accepted, in bytes.
    pub max_decoding_message_size: usize,
    /// Bound on one call, dialling included.
    pub call_timeout: Duration,
    /// Least time between the starts of two calls; zero disables pacing.
    pub min_call_interval: Duration,
    /// Wait after the first failure; doubles with each further failure.
    pub initial_backoff: Duration,
    /// Cap of the wait between failed attempts.
    pub max_backoff: Duration,
}

impl ClientConfig {
    /// Defaults for everything but the socket path.
    pub fn new(socket_path: impl Into<PathBuf>) -> Self {
        Self {
            socket_path: socket_path.into(),
            max_decoding_message_size: DEFAULT_MAX_DECODING_MESSAGE_SIZE,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            min_call_interval: DEFAULT_MIN_CALL_INTERVAL,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self::new(DEFAULT_SOCKET_PATH)
    }
}

/// Where the client stands, for readiness and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// No connection; the next call dials at once.
    Disconnected,
    /// Connected, and the last call did not fail.
    Connected,
    /// The last call failed; the next one starts after `retry_in`.
    BackingOff {
        /// Time left before the next attempt.
        retry_in: Duration,
    },
}

/// Calls `GetAllocatableResources` and `List` on the kubelet. Share it behind an `Arc`;
/// concurrent calls are paced one after the other.
#[derive(Debug)]
pub struct PodResourcesClient {
    config: ClientConfig,
    stats: Arc<ClientStats>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    lister: Option<Lister>,
    ever_connected: bool,
    backoff: Backoff,
    /// No call starts before this, after a failure.
    retry_at: Option<Instant>,
    pacer: Pacer,
}

impl PodResourcesClient {
    /// A client that dials on its first call; creating it does no I/O.
    pub fn new(config: ClientConfig) -> Self {
        let inner = Inner {
            lister: None,
            ever_connected: false,
            backoff: Backoff::new(config.initial_backoff, config.max_backoff),
            retry_at: None,
            pacer: Pacer::new(config.min_call_interval),
        };
        Self {
            config,
            stats: Arc::default(),
            inner: Mutex::new(inner),
        }
    }

    /// The socket this client dials.
    pub fn socket_path(&self) -> &Path {
        &self.config.socket_path
    }

    /// Counters for metrics; they stay live after the client is dropped.
    pub fn stats(&self) -> Arc<ClientStats> {
        Arc::clone(&self.stats)
    }

    /// Whether a connection is established and has not failed since.
    pub fn is_connected(&self) -> bool {
        self.stats.is_connected()
    }

    /// Connection state and time left before the next attempt.
    pub fn state(&self) -> ConnectionState {
        let inner = self.lock();
        let now = Instant::now();
        match inner.retry_at {
            Some(at) if at > now => ConnectionState::BackingOff { retry_in: at - now },
            _ if inner.lister.is_some() => ConnectionState::Connected,
            _ => ConnectionState::Disconnected,
        }
    }

    /// Resources the kubelet can allocate exclusively, with their NUMA nodes.
    pub async fn get_allocatable(
        &self,
    ) -> Result<v1::AllocatableResourcesResponse, PodResourcesError> {
        let timeout = self.config.call_timeout;
        self.call("GetAllocatableResources", |mut lister| async move {
            let request = with_timeout(v1::AllocatableResourcesRequest {}, timeout);
            lister.get_allocatable_resources(request).await
        })
        .await
    }

    /// Resources the kubelet has assigned to each pod's containers.
    pub async fn list(&self) -> Result<v1::ListPodResourcesResponse, PodResourcesError> {
        let timeout = self.config.call_timeout;
        self.call("List", |mut lister| async move {
            lister
                .list(with_timeout(v1::ListPodResourcesRequest {}, timeout))
                .await
        })
        .await
    }

    async fn call<T, F, Fut>(&self, method: &'static str, rpc: F) -> Result<T, PodResourcesError>
    where
        F: FnOnce(Lister) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let start = self.reserve_start();
        tokio::time::sleep_until(start).await;
        self.stats.record_call();
        let timeout = self.config.call_timeout;
        let result = match tokio::time::timeout(timeout, self.attempt(method, rpc)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(PodResourcesError::Timeout {
                path: self.config.socket_path.clone(),
                method,
                timeout,
            }),
        };
        self.settle(result.as_ref().err());
        result
    }

    /// Start time of the next call: after any backoff, and in its pacing slot.
    fn reserve_start(&self) -> Instant {
        let mut inner = self.lock();
        let now = Instant::now();
        let earliest = inner.retry_at.map_or(now, |at| at.max(now));
        inner.pacer.reserve(earliest)
    }

    async fn attempt<T, F, Fut>(&self, method: &'static str, rpc: F) -> Result<T, PodResourcesError>
    where
        F: FnOnce(Lister) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        // A separate statement, so the lock is released before dialling.
        let cached = self.lock().lister.clone();
        let lister = match cached {
            Some(lister) => lister,
            None => self.connect().await?,
        };
        rpc(lister)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| {
                PodResourcesError::from_status(
                    self.config.socket_path.clone(),
                    method,
                    self.config.call_timeout,
                    status,
                )
            })
    }

    async fn connect(&self) -> Result<Lister, PodResourcesError> {
        let path = self.config.socket_path.clone();
        // Checked first so that "kubelet not there" reads differently from "kubelet
        // there but not answering"; an unreadable directory is left to the dial to report.
        if let Ok(false) = tokio::fs::try_exists(&path).await {
            return Err(PodResourcesError::SocketMissing { path });
        }
        let dial_path = path.clone();
        let connector = tower::service_fn(move |_: Uri| {
            let path = dial_path.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        });
        let channel = Endpoint::from_static(UNUSED_URI)
            .connect_with_connector(connector)
            .await
            .map_err(|source| {
                if is_not_found(&source) {
                    PodResourcesError::SocketMissing { path: path.clone() }
                } else {
                    PodResourcesError::Connect {
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        let lister =
            Lister::new(channel).max_decoding_message_size(self.config.max_decoding_message_size);

        let reconnect = {
            let mut inner = self.lock();
            let reconnect = inner.ever_connected;
            inner.ever_connected = true;
            inner.lister = Some(lister.clone());
            self.stats.record_connect(reconnect);
            reconnect
        };
        if reconnect {
            info!(socket = %path.display(), "reconnected to the kubelet podresources API");
        } else {
            debug!(socket = %path.display(), "connected to the kubelet podresources API");
        }
        Ok(lister)
    }

    /// Updates backoff, connection and counters after a call.
    fn settle(&self, error: Option<&PodResourcesError>) {
        let mut inner = self.lock();
        let Some(error) = error else {
            inner.backoff.reset();
            inner.retry_at = None;
            return;
        };
        self.stats.record_error(error.kind());
        let delay = inner.backoff.next_delay();
        inner.retry_at = Some(Instant::now() + delay);
        if error.breaks_connection() {
            inner.lister = None;
            self.stats.record_disconnect();
        }
        debug!(%error, retry_in = ?delay, "kubelet podresources call failed");
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state stays consistent even if a holder panicked: every update is a
        // single assignment.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sends the deadline along, so the kubelet can give up on its side too.
fn with_timeout<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}
