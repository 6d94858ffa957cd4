//! A fault proxy in front of kube-apiserver: an HTTPS endpoint that forwards requests
//! to the API server, or answers them with an error, or holds them without an answer,
//! as the test says — to put one client (a scheduler's pods, one leader candidate) on
//! a failing API server while every other client keeps the real one.
//!
//! It terminates TLS with kube-apiserver's own serving certificate and key (the files
//! kube-apiserver writes into the cluster's `certs/`), so a client that trusts the
//! cluster's CA and connects to `127.0.0.1` or `kubernetes.default.svc` verifies it
//! unchanged; bearer tokens pass through. Upstream it opens one HTTP/1.1 connection to
//! kube-apiserver per client connection.
//!
//! [`Fault`]s, applied to every request or only to those whose path contains a given
//! part ([`FaultProxy::set_for`]):
//! - [`Fault::Answer`]: a `Status` error with that code, and `Retry-After` if given (as
//!   API Priority and Fairness answers 429, or an overloaded server 503). Responses
//!   already streaming (watches) go on.
//! - [`Fault::Stall`]: requests are read and never answered; responses already
//!   streaming stop too. When the fault changes, every held request and stream is cut
//!   (its connection closed) — never forwarded late, as a partition that heals with the
//!   client long gone.
//!
//! ```no_run
//! # async fn demo(cluster: &tas_testcluster::TestCluster) -> Result<(), tas_testcluster::Error> {
//! use tas_testcluster::fault_proxy::{Fault, FaultProxy};
//!
//! let proxy = FaultProxy::start(cluster).await?;
//! // ... point a client at https://{proxy.addr()} ...
//! proxy.set(Fault::Answer { code: 429, retry_after: Some(1) });
//! proxy.set_for("/leases/", Fault::Stall);
//! proxy.set(Fault::Pass);
//! # Ok(()) }
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::{Error, TestCluster};

type ProxyBody = BoxBody<Bytes, ProxyError>;

/// Why the proxy dropped a request or a stream (its connection closes).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ProxyError(String);

impl ProxyError {
    fn from_any(e: impl std::fmt::Display) -> Self {
        Self(e.to_string())
    }
}

/// What the proxy does with the requests a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward them.
    Pass,
    /// Answer with a `Status` of this HTTP code, with `Retry-After` seconds if given.
    Answer { code: u16, retry_after: Option<u32> },
    /// Read them and never answer; stop the responses already streaming.
    Stall,
}

/// The fault in force and which requests it applies to.
#[derive(Debug, Clone)]
struct Plan {
    fault: Fault,
    /// Only requests whose path contains this (None: every request).
    path_part: Option<String>,
    /// Bumped on every change, so a held request knows the plan it was held under ended.
    generation: u64,
}

impl Plan {
    fn applies_to(&self, path: &str) -> bool {
        self.path_part.as_deref().is_none_or(|p| path.contains(p))
    }
}

/// How many requests the proxy forwarded, answered with an error, or held.
#[derive(Debug, Default)]
struct Counts {
    forwarded: AtomicU64,
    answered: AtomicU64,
    stalled: AtomicU64,
}

/// The running proxy; dropping it stops accepting connections.
pub struct FaultProxy {
    addr: SocketAddr,
    plan: watch::Sender<Plan>,
    counts: Arc<Counts>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy on a loopback port in front of `cluster`'s kube-apiserver,
    /// forwarding everything.
    pub async fn start(cluster: &TestCluster) -> Result<Self, Error> {
        let upstream = cluster.api_server_addr()?;
        let (cert, key) = cluster.serving_cert_files();
        let chain = CertificateDer::pem_file_iter(&cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| proxy_error(format!("reading {}: {e}", cert.display())))?;
        let key = PrivateKeyDer::from_pem_file(&key)
            .map_err(|e| proxy_error(format!("reading {}: {e}", key.display())))?;
        let mut tls = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| proxy_error(format!("TLS config: {e}")))?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::io("binding the fault proxy"))?;
        let addr = listener
            .local_addr()
            .map_err(Error::io("the fault proxy's address"))?;
        let (plan, _) = watch::channel(Plan {
            fault: Fault::Pass,
            path_part: None,
            generation: 0,
        });
        let counts = Arc::new(Counts::default());
        let shared = Arc::new(Shared {
            upstream,
            plan: plan.subscribe(),
            counts: counts.clone(),
        });
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (acceptor, shared) = (acceptor.clone(), shared.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(client).await {
                        serve(TokioIo::new(tls), shared).await;
                    }
                });
            }
        });
        Ok(Self {
            addr,
            plan,
            counts,
            accept,
        })
    }

    /// Where clients connect (`https://<addr>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Applies `fault` to every request from now on.
    pub fn set(&self, fault: Fault) {
        self.replace(fault, None);
    }

    /// Applies `fault` to the requests whose path contains `path_part` (say
    /// `/leases/`) from now on, and forwards the others.
    pub fn set_for(&self, path_part: &str, fault: Fault) {
        self.replace(fault, Some(path_part.to_owned()));
    }

    fn replace(&self, fault: Fault, path_part: Option<String>) {
        self.plan.send_modify(|plan| {
            *plan = Plan {
                fault,
                path_part,
                generation: plan.generation + 1,
            }
        });
    }

    /// Requests forwarded to kube-apiserver so far.
    pub fn forwarded(&self) -> u64 {
        self.counts.forwarded.load(Ordering::Relaxed)
    }

    /// Requests answered with a [`Fault::Answer`] so far.
    pub fn answered(&self) -> u64 {
        self.counts.answered.load(Ordering::Relaxed)
    }

    /// Requests held by a [`Fault::Stall`] so far.
    pub fn stalled(&self) -> u64 {
        self.counts.stalled.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn proxy_error(reason: String) -> Error {
    Error::Startup {
        component: "fault proxy",
        reason,
        log_tail: String::new(),
    }
}

/// What every client connection shares.
struct Shared {
    upstream: SocketAddr,
    plan: watch::Receiver<Plan>,
    counts: Arc<Counts>,
}

/// Serves one client connection: its requests in turn, each forwarded on the
/// connection's own upstream connection, opened on first use.
async fn serve(io: TokioIo<tokio_rustls::server::TlsStream<TcpStream>>, shared: Arc<Shared>) {
    let upstream: Arc<Mutex<Option<SendRequest<Incoming>>>> = Arc::default();
    let service = service_fn(move |request: Request<Incoming>| {
        let (shared, upstream) = (shared.clone(), upstream.clone());
        async move { handle(request, &shared, &upstream).await }
    });
    // Ends when the client goes, or when a handler fails (closing the connection).
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await;
}

async fn handle(
    request: Request<Incoming>,
    shared: &Shared,
    upstream: &Mutex<Option<SendRequest<Incoming>>>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let plan = shared.plan.borrow().clone();
    let path = request.uri().path().to_owned();
    if plan.applies_to(&path) {
        match plan.fault {
            Fault::Pass => {}
            Fault::Answer { code, retry_after } => {
                shared.counts.answered.fetch_add(1, Ordering::Relaxed);
                return Ok(status_response(code, retry_after));
            }
            Fault::Stall => {
                shared.counts.stalled.fetch_add(1, Ordering::Relaxed);
                plan_changed(shared.plan.clone(), plan.generation).await;
                return Err(ProxyError::from_any(
                    "held by a stall that ended; dropping the connection",
                ));
            }
        }
    }
    let response = forward(request, shared.upstream, upstream).await?;
    shared.counts.forwarded.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = response.into_parts();
    Ok(Response::from_parts(
        parts,
        stall_aware(body, shared.plan.clone(), path),
    ))
}

/// Sends `request` on the connection's upstream connection, (re)opening it if needed.
async fn forward(
    request: Request<Incoming>,
    addr: SocketAddr,
    upstream: &Mutex<Option<SendRequest<Incoming>>>,
) -> Result<Response<Incoming>, ProxyError> {
    let mut slot = upstream.lock().await;
    let reusable = slot.as_ref().is_some_and(|s| !s.is_closed());
    if !reusable {
        *slot = Some(connect(addr).await?);
    }
    let sender = slot.as_mut().expect("just set");
    sender.ready().await.map_err(ProxyError::from_any)?;
    sender
        .send_request(request)
        .await
        .map_err(ProxyError::from_any)
}

async fn connect(addr: SocketAddr) -> Result<SendRequest<Incoming>, ProxyError> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(ProxyError::from_any)?;
    let name = ServerName::IpAddress(addr.ip().into());
    let tls = crate::insecure_tls_connector()
        .connect(name, tcp)
        .await
        .map_err(ProxyError::from_any)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(ProxyError::from_any)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// `body`, cut off by a stall that applies to `path`: it stops passing frames then, and
/// ends with an error (the connection closes) once the stall is over.
fn stall_aware(body: Incoming, plan: watch::Receiver<Plan>, path: String) -> ProxyBody {
    let stream = futures::stream::unfold(Some((body, plan)), move |state| {
        let path = path.clone();
        async move {
            let (mut body, mut plan) = state?;
            loop {
                tokio::select! {
                    frame = body.frame() => {
                        let frame: Frame<Bytes> = match frame? {
                            Ok(frame) => frame,
                            Err(e) => return Some((Err(ProxyError::from_any(e)), None)),
                        };
                        return Some((Ok(frame), Some((body, plan))));
                    }
                    changed = plan.changed() => {
                        let current = plan.borrow_and_update().clone();
                        if changed.is_err() || (current.fault == Fault::Stall && current.applies_to(&path)) {
                            plan_changed(plan, current.generation).await;
                            return Some((Err(ProxyError::from_any("stream cut by a stall")), None));
                        }
                    }
                }
            }
        }
    });
    BodyExt::boxed(StreamBody::new(stream))
}

/// Resolves when the plan is no longer the one of `generation` (or never, once the
/// proxy is gone: its connections then die with the runtime).
async fn plan_changed(mut plan: watch::Receiver<Plan>, generation: u64) {
    if plan.wait_for(|p| p.generation != generation).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// A Kubernetes `Status` error answer.
fn status_response(code: u16, retry_after: Option<u32>) -> Response<ProxyBody> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let reason = match code {
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        500 => "InternalError",
        504 => "Timeout",
        _ => "Unknown",
    };
    let mut body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("the fault proxy answers {code}"),
        "reason": reason,
        "code": code,
    });
    if let Some(seconds) = retry_after {
        body["details"] = serde_json::json!({ "retryAfterSeconds": seconds });
    }
    let mut response = Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(seconds) = retry_after {
        response = response.header(http::header::RETRY_AFTER, seconds.to_string());
    }
    let full = Full::new(Bytes::from(body.to_string())).map_err(|e: Infallible| match e {});
    response
        .body(BodyExt::boxed(full))
        .expect("a valid status response")
}
