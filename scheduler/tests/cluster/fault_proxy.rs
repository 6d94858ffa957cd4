//! A plain-HTTP proxy in front of kube-apiserver for one scheduler process: it forwards
//! every request with the test's own credentials (through `kube::Client::send`), can
//! start refusing Lease writes with 503 while everything else passes, delays bind
//! requests, can change a ResourceClaim just before a write to it goes on (so that
//! the write, made against the version its sender read, meets a real 409 Conflict),
//! and records when each Lease write, bind and claim write reached it and how it was
//! answered.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{self, Method, StatusCode};
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// One Lease write or bind the API server answered.
#[derive(Debug, Clone)]
pub struct Answered {
    /// When the request reached the proxy.
    pub arrived: Instant,
    pub status: StatusCode,
}

#[derive(Default)]
pub struct Record {
    pub lease_updates: Vec<Answered>,
    pub binds: Vec<Answered>,
    /// Writes to ResourceClaims (PATCH or PUT, the status subresource included).
    pub claim_writes: Vec<Answered>,
}

struct Inner {
    client: kube::Client,
    refuse_lease_updates: AtomicBool,
    /// How many of the next claim writes find their claim changed first.
    touch_claims: AtomicUsize,
    bind_delay: Duration,
    record: Mutex<Record>,
}

pub struct FaultProxy {
    addr: SocketAddr,
    inner: Arc<Inner>,
    server: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Serves on a loopback port, forwarding through `client`.
    pub async fn start(client: kube::Client, bind_delay: Duration) -> Self {
        let inner = Arc::new(Inner {
            client,
            refuse_lease_updates: AtomicBool::new(false),
            touch_claims: AtomicUsize::new(0),
            bind_delay,
            record: Mutex::new(Record::default()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            inner,
            server,
        }
    }

    /// A kubeconfig that reaches the API server through this proxy.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: proxy, cluster: {{server: \"http://{}\"}}}}]\n\
             users: [{{name: proxy, user: {{}}}}]\n\
             contexts: [{{name: proxy, context: {{cluster: proxy, user: proxy}}}}]\n\
             current-context: proxy\n",
            self.addr
        )
    }

    /// A client that reaches the API server through this proxy.
    pub fn client(&self) -> kube::Client {
        let url = format!("http://{}", self.addr).parse().expect("proxy URL");
        kube::Client::try_from(kube::Config::new(url)).expect("proxy client")
    }

    /// From now on every Lease write (create or update) is answered 503 without reaching the API server.
    pub fn refuse_lease_updates(&self) {
        self.inner
            .refuse_lease_updates
            .store(true, Ordering::SeqCst);
    }

    /// The next `n` writes to a ResourceClaim find it changed (an annotation written
    /// straight to the API server just before the write is forwarded).
    pub fn touch_next_claim_writes(&self, n: usize) {
        self.inner.touch_claims.store(n, Ordering::SeqCst);
    }

    pub fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.inner.record.lock().expect("record")
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn forward(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    // On its own task: a request that reached the proxy is carried out even if the
    // client goes away (exits) meanwhile, as an API server would.
    tokio::spawn(forward_detached(inner, request))
        .await
        .unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY))
}

async fn forward_detached(inner: Arc<Inner>, request: Request) -> Response {
    let arrived = Instant::now();
    let path = request.uri().path().to_owned();
    // A create (the first acquisition) or an update (a renewal).
    let lease_update = matches!(*request.method(), Method::PUT | Method::POST)
        && path.starts_with("/apis/coordination.k8s.io/");
    let bind = request.method() == Method::POST && path.ends_with("/binding");
    if lease_update && inner.refuse_lease_updates.load(Ordering::SeqCst) {
        return status(StatusCode::SERVICE_UNAVAILABLE);
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return status(StatusCode::BAD_REQUEST);
    };
    if bind {
        tokio::time::sleep(inner.bind_delay).await;
    }
    let claim_write = matches!(parts.method, Method::PATCH | Method::PUT)
        .then(|| claim_of(&path))
        .flatten();
    if let Some((namespace, name)) = &claim_write
        && inner
            .touch_claims
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        touch(&inner.client, namespace, name).await;
    }
    let mut upstream = http::Request::builder()
        .method(parts.method)
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for (name, value) in &parts.headers {
        if name != http::header::HOST {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = upstream
        .body(kube::client::Body::from(bytes.to_vec()))
        .expect("request");
    let response = match inner.client.send(upstream).await {
        Ok(response) => response,
        Err(_) => return status(StatusCode::BAD_GATEWAY),
    };
    if lease_update || bind || claim_write.is_some() {
        let answered = Answered {
            arrived,
            status: response.status(),
        };
        let mut record = inner.record.lock().expect("record");
        if bind {
            record.binds.push(answered);
        } else if lease_update {
            record.lease_updates.push(answered);
        } else {
            record.claim_writes.push(answered);
        }
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Body::new(body))
}

/// Namespace and name of the ResourceClaim a request path names
/// (`/apis/resource.k8s.io/<version>/namespaces/<ns>/resourceclaims/<name>[/status]`).
fn claim_of(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/apis/resource.k8s.io/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [_, "namespaces", ns, "resourceclaims", name, ..] => {
            Some(((*ns).to_owned(), (*name).to_owned()))
        }
        _ => None,
    }
}

/// Writes an annotation to the claim: a new resourceVersion.
async fn touch(client: &kube::Client, namespace: &str, name: &str) {
    let api: kube::Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        kube::Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {
        "test.tas.dev/touched": format!("{:?}", std::time::SystemTime::now())}}});
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("claim changed");
}

fn status(code: StatusCode) -> Response {
    Response::builder()
        .status(code)
        .body(Body::empty())
        .expect("response")
}
