//! An in-memory kubelet serving the podresources API on a unix socket, for the updater's
//! tests: answers a test sets, restarts and rate limits on demand. It judges nothing;
//! the simulator's nodes are served by the referee (the kubelet's own server).
//!
//! A [`FakeKubelet`] holds what `GetAllocatableResources` and `List` answer; setters
//! replace it while the server runs. [`FakeKubelet::serve`] binds a socket and returns a
//! [`FakeKubeletHandle`]; shutting the handle down and serving again on the same path is
//! a kubelet restart as a client sees it. The contents survive restarts, as the state of
//! a real node does. The kubelet's rate limit can be emulated; it is off by default.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};
use tracing::debug;

use tas_podresources::v1;
use tas_podresources::v1::pod_resources_lister_server::{
    PodResourcesLister, PodResourcesListerServer,
};

/// How long [`FakeKubeletHandle::shutdown`] lets open connections drain before it stops
/// waiting.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A token bucket like the kubelet's: `burst` calls at once, refilled at `qps`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Calls per second in the long run.
    pub qps: f64,
    /// Calls accepted back to back from a full bucket.
    pub burst: u32,
}

impl RateLimit {
    /// The limit the kubelet applies to this API.
    pub const KUBELET: RateLimit = RateLimit {
        qps: 100.0,
        burst: 10,
    };
}

/// Calls received per RPC, rejected ones included, and how many were rate-limited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// `List` calls.
    pub list: u64,
    /// `GetAllocatableResources` calls.
    pub get_allocatable: u64,
    /// `Get` calls.
    pub get: u64,
    /// Calls answered `ResourceExhausted`.
    pub rate_limited: u64,
}

/// What the fake kubelet answers, shared by all its servers. Cloning shares the state.
#[derive(Debug, Clone, Default)]
pub struct FakeKubelet {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    resources: RwLock<Resources>,
    behaviour: Mutex<Behaviour>,
    list_calls: AtomicU64,
    allocatable_calls: AtomicU64,
    get_calls: AtomicU64,
    rate_limited: AtomicU64,
}

#[derive(Debug, Default)]
struct Resources {
    allocatable: v1::AllocatableResourcesResponse,
    pods: Vec<v1::PodResources>,
}

#[derive(Debug, Default)]
struct Behaviour {
    limiter: Option<TokenBucket>,
    delay: Duration,
}

#[derive(Debug)]
struct TokenBucket {
    limit: RateLimit,
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    fn new(limit: RateLimit, now: Instant) -> Self {
        Self {
            limit,
            tokens: f64::from(limit.burst),
            refilled: now,
        }
    }

    fn try_take(&mut self, now: Instant) -> bool {
        let refill = now.duration_since(self.refilled).as_secs_f64() * self.limit.qps;
        self.tokens = (self.tokens + refill).min(f64::from(self.limit.burst));
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl FakeKubelet {
    /// A kubelet with nothing allocatable and no pods.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the `GetAllocatableResources` answer.
    pub fn set_allocatable(&self, allocatable: v1::AllocatableResourcesResponse) {
        self.write().allocatable = allocatable;
    }

    /// The current `GetAllocatableResources` answer.
    pub fn allocatable(&self) -> v1::AllocatableResourcesResponse {
        self.read().allocatable.clone()
    }

    /// Replaces all pods.
    pub fn set_pods(&self, pods: Vec<v1::PodResources>) {
        self.write().pods = pods;
    }

    /// The current pods, in `List` order.
    pub fn pods(&self) -> Vec<v1::PodResources> {
        self.read().pods.clone()
    }

    /// Adds a pod, or replaces the one with the same namespace and name.
    pub fn upsert_pod(&self, pod: v1::PodResources) {
        let mut resources = self.write();
        match resources
            .pods
            .iter_mut()
            .find(|p| p.namespace == pod.namespace && p.name == pod.name)
        {
            Some(existing) => *existing = pod,
            None => resources.pods.push(pod),
        }
    }

    /// Removes a pod; returns it if it was there.
    pub fn remove_pod(&self, namespace: &str, name: &str) -> Option<v1::PodResources> {
        let mut resources = self.write();
        let index = resources
            .pods
            .iter()
            .position(|p| p.namespace == namespace && p.name == name)?;
        Some(resources.pods.remove(index))
    }

    /// Rejects calls beyond `limit` with `ResourceExhausted`; `None` accepts every call.
    /// Setting a limit starts with a full bucket.
    pub fn set_rate_limit(&self, limit: Option<RateLimit>) {
        self.behaviour().limiter = limit.map(|limit| TokenBucket::new(limit, Instant::now()));
    }

    /// Delays every accepted answer, e.g. to make a client time out.
    pub fn set_response_delay(&self, delay: Duration) {
        self.behaviour().delay = delay;
    }

    /// Calls received so far, over all servers of this kubelet.
    pub fn calls(&self) -> CallCounts {
        let shared = &self.shared;
        CallCounts {
            list: shared.list_calls.load(Ordering::Relaxed),
            get_allocatable: shared.allocatable_calls.load(Ordering::Relaxed),
            get: shared.get_calls.load(Ordering::Relaxed),
            rate_limited: shared.rate_limited.load(Ordering::Relaxed),
        }
    }

    /// Serves the API on a unix socket at `path`, replacing a file left there (as the
    /// kubelet does). Must be called within a Tokio runtime; the server runs until the
    /// handle is shut down or dropped.
    pub fn serve(&self, path: impl Into<PathBuf>) -> Result<FakeKubeletHandle, FakeKubeletError> {
        let path = path.into();
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(FakeKubeletError::NoRuntime);
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(FakeKubeletError::Bind { path, source }),
        }
        let listener = match UnixListener::bind(&path) {
            Ok(listener) => listener,
            Err(source) => return Err(FakeKubeletError::Bind { path, source }),
        };
        let service = PodResourcesListerServer::new(Service {
            shared: Arc::clone(&self.shared),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                // A dropped sender stops the server too.
                let _ = stopped.await;
            });
        let task = tokio::spawn(server);
        debug!(socket = %path.display(), "fake kubelet serving");
        Ok(FakeKubeletHandle {
            path,
            stop: Some(stop),
            task: Some(task),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Resources> {
        self.shared
            .resources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Resources> {
        self.shared
            .resources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn behaviour(&self) -> MutexGuard<'_, Behaviour> {
        self.shared.behaviour()
    }
}

impl Shared {
    fn behaviour(&self) -> MutexGuard<'_, Behaviour> {
        self.behaviour
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts the call, applies the rate limit, then the response delay.
    async fn admit(&self, calls: &AtomicU64) -> Result<(), Status> {
        calls.fetch_add(1, Ordering::Relaxed);
        let delay = {
            let mut behaviour = self.behaviour();
            let now = Instant::now();
            let accepted = behaviour
                .limiter
                .as_mut()
                .is_none_or(|bucket| bucket.try_take(now));
            if !accepted {
                self.rate_limited.fetch_add(1, Ordering::Relaxed);
                return Err(Status::resource_exhausted(
                    "rejected by the fake kubelet's rate limit",
                ));
            }
            behaviour.delay
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }

    fn resources(&self) -> std::sync::RwLockReadGuard<'_, Resources> {
        self.resources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The gRPC service of one server; all servers of a kubelet share its state.
struct Service {
    shared: Arc<Shared>,
}

#[tonic::async_trait]
impl PodResourcesLister for Service {
    async fn list(
        &self,
        _request: Request<v1::ListPodResourcesRequest>,
    ) -> Result<Response<v1::ListPodResourcesResponse>, Status> {
        self.shared.admit(&self.shared.list_calls).await?;
        let pod_resources = self.shared.resources().pods.clone();
        Ok(Response::new(v1::ListPodResourcesResponse {
            pod_resources,
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _request: Request<v1::AllocatableResourcesRequest>,
    ) -> Result<Response<v1::AllocatableResourcesResponse>, Status> {
        self.shared.admit(&self.shared.allocatable_calls).await?;
        Ok(Response::new(self.shared.resources().allocatable.clone()))
    }

    async fn get(
        &self,
        request: Request<v1::GetPodResourcesRequest>,
    ) -> Result<Response<v1::GetPodResourcesResponse>, Status> {
        self.shared.admit(&self.shared.get_calls).await?;
        let wanted = request.into_inner();
        let pod = self
            .shared
            .resources()
            .pods
            .iter()
            .find(|p| p.namespace == wanted.pod_namespace && p.name == wanted.pod_name)
            .cloned();
        match pod {
            Some(pod) => Ok(Response::new(v1::GetPodResourcesResponse {
                pod_resources: Some(pod),
            })),
            None => Err(Status::not_found(format!(
                "pod {}/{} not found",
                wanted.pod_namespace, wanted.pod_name
            ))),
        }
    }
}

/// A running fake kubelet server. Dropping it stops the server and removes the socket
/// without waiting; [`shutdown`](Self::shutdown) waits for open connections to close.
#[derive(Debug)]
pub struct FakeKubeletHandle {
    path: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
}

impl FakeKubeletHandle {
    /// The socket the server listens on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting connections, lets open ones close (for at most a few seconds),
    /// and removes the socket file.
    pub async fn shutdown(mut self) -> Result<(), FakeKubeletError> {
        if let Some(stop) = self.stop.take() {
            // An error means the server is already gone.
            let _ = stop.send(());
        }
        let result = match self.task.take() {
            None => Ok(()),
            Some(mut task) => match tokio::time::timeout(SHUTDOWN_GRACE, &mut task).await {
                Ok(Ok(served)) => served.map_err(FakeKubeletError::Serve),
                Ok(Err(join)) => Err(FakeKubeletError::Join(join)),
                Err(_elapsed) => {
                    task.abort();
                    Ok(())
                }
            },
        };
        remove_socket(&self.path);
        result
    }
}

impl Drop for FakeKubeletHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            remove_socket(&self.path);
        }
    }
}

fn remove_socket(path: &Path) {
    if let Err(error) = std::fs::remove_file(path)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        debug!(socket = %path.display(), %error, "cannot remove fake kubelet socket");
    }
}

/// Failure to start or stop a [`FakeKubelet`] server.
#[derive(Debug, thiserror::Error)]
pub enum FakeKubeletError {
    /// [`FakeKubelet::serve`] was called outside a Tokio runtime.
    #[error("the fake kubelet must be started within a Tokio runtime")]
    NoRuntime,
    /// The socket could not be created.
    #[error("cannot bind fake kubelet socket {}", path.display())]
    Bind {
        /// Socket path.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// The server stopped with an error.
    #[error("fake kubelet server failed")]
    Serve(#[source] tonic::transport::Error),
    /// The server task panicked or was cancelled.
    #[error("fake kubelet server task failed")]
    Join(#[source] tokio::task::JoinError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_allows_a_burst_then_refills_at_qps() {
        let start = Instant::now();
        let limit = RateLimit {
            qps: 10.0,
            burst: 2,
        };
        let mut bucket = TokenBucket::new(limit, start);
        assert!(bucket.try_take(start));
        assert!(bucket.try_take(start));
        assert!(!bucket.try_take(start));
        let later = start + Duration::from_millis(100);
        assert!(bucket.try_take(later));
        assert!(!bucket.try_take(later));
        // A long pause refills only up to the burst.
        let much_later = later + Duration::from_secs(60);
        assert!(bucket.try_take(much_later));
        assert!(bucket.try_take(much_later));
        assert!(!bucket.try_take(much_later));
    }

    #[test]
    fn upsert_replaces_by_namespace_and_name() {
        let kubelet = FakeKubelet::new();
        let pod = |ns: &str, name: &str, cpus: Vec<i64>| v1::PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: vec![v1::ContainerResources {
                name: "c".into(),
                cpu_ids: cpus,
                ..Default::default()
            }],
        };
        kubelet.upsert_pod(pod("a", "p", vec![1]));
        kubelet.upsert_pod(pod("b", "p", vec![2]));
        kubelet.upsert_pod(pod("a", "p", vec![3]));
        let pods = kubelet.pods();
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[0].containers[0].cpu_ids, [3]);
        assert_eq!(
            kubelet.remove_pod("b", "p").map(|p| p.namespace),
            Some("b".into())
        );
        assert!(kubelet.remove_pod("b", "p").is_none());
    }

    #[test]
    fn serve_outside_a_runtime_is_an_error() {
        let error = FakeKubelet::new().serve("kubelet.sock").err();
        assert!(matches!(error, Some(FakeKubeletError::NoRuntime)));
    }
}
