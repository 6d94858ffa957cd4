//! The small HTTPS server every TAS binary runs for the kubelet and Prometheus:
//!
//! | path | answer |
//! |---|---|
//! | `/healthz` | `200 ok` while the process serves at all (liveness), to anyone |
//! | `/readyz` | `200 ok` when [`Readiness`] says ready, else `503 not ready`; the reason only to a caller allowed to `get` `/metrics` |
//! | `/metrics` | the [`Metrics`] text, OpenMetrics format, to a caller allowed to `get` `/metrics` (401 without a valid token, 403 without the permission, 429 while too many unknown tokens are being reviewed) |
//!
//! By default ([`Security::Secure`]) the server speaks TLS only ([`tls`]: certificate
//! files, or self-signed at start) and asks the API server about each caller's bearer
//! token ([`auth`]: TokenReview + SubjectAccessReview, as kube-rbac-proxy does). The
//! kubelet's probes keep working on the same port: HTTPS probes skip certificate
//! verification and send no credentials, and `/healthz` and `/readyz` need none.
//! Certificate files are read again when they change ([`cert_reload`]): a rotated
//! certificate reaches new connections without a restart.
//! [`Security::Insecure`] (plain HTTP, no authentication) exists only behind an
//! explicit flag, for a trusted network or a proxy in front. At most
//! [`MAX_CONNECTIONS`] TLS connections are open at once; more are closed on accept.
//!
//! The component keeps a [`Readiness`] clone and flips it; the server only reads it.
//! A component adds its own routes (e.g. the scheduler's `/debug/reservations`) with
//! [`serve_with`]: they are served on the same listener, over the same TLS, and each
//! only to a caller allowed to `get` its own path (a non-resource URL, as for
//! `/metrics`). Through the API server's service proxy, which keeps no `Authorization`
//! header, the token travels in [`auth::PROXIED_AUTHORIZATION`].

pub mod auth;
mod cert_reload;
mod metrics;
mod readiness;
pub mod tls;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

pub use auth::{AuthError, Authorizer, Decision, Limits as AuthLimits};
pub use cert_reload::{RELOAD_INTERVAL, ReloadMetrics};
pub use metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};
pub use readiness::Readiness;
pub use tls::{CertSource, TlsError};

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// After shutdown, how long open connections get to finish the request in flight (an
/// idle keep-alive connection is closed at once); then they are cut.
pub const CONNECTION_DRAIN: Duration = Duration::from_secs(5);
/// TLS connections open at most (each holds a task and its buffers; scrapers and
/// probes need a handful). A connection past the bound is closed as soon as accepted.
pub const MAX_CONNECTIONS: usize = 256;

/// Whether and how callers are checked.
#[derive(Debug, Clone)]
pub enum Security {
    /// TLS with the certificate of `cert`; `/metrics` and the detail of `/readyz` only
    /// for callers `authorizer` allows.
    Secure {
        /// The serving certificate.
        cert: CertSource,
        /// Who may read.
        authorizer: Authorizer,
    },
    /// Plain HTTP, nobody checked, `/readyz` without detail. Only on explicit request.
    Insecure,
}

/// Where and how to serve: what a binary's flags say ([`crate::cli::CommonArgs::endpoint`]).
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Address to bind.
    pub address: SocketAddr,
    /// TLS and authorisation, or neither.
    pub security: Security,
}

impl Endpoint {
    /// Plain HTTP on `address`, for tests that run a component in-process.
    pub fn insecure(address: SocketAddr) -> Self {
        Self {
            address,
            security: Security::Insecure,
        }
    }

    /// Binds and serves until the process ends (or the socket fails).
    pub async fn serve(self, metrics: Metrics, readiness: Readiness) -> Result<(), ServeError> {
        self.serve_with(metrics, readiness, Router::new()).await
    }

    /// As [`Endpoint::serve`], with the component's `extra` routes.
    pub async fn serve_with(
        self,
        metrics: Metrics,
        readiness: Readiness,
        extra: Router,
    ) -> Result<(), ServeError> {
        serve_with(self.address, self.security, metrics, readiness, extra).await
    }
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("binding {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The socket error.
        source: io::Error,
    },
    /// No TLS configuration.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Serving failed.
    #[error("serving: {0}")]
    Io(#[from] io::Error),
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    readiness: Readiness,
    authorizer: Option<Authorizer>,
}

/// The routes, for embedding in a larger server. Without an `authorizer`, `/metrics`
/// is open (the [`Security::Insecure`] mode).
pub fn router(metrics: Metrics, readiness: Readiness, authorizer: Option<Authorizer>) -> Router {
    routes().with_state(AppState {
        metrics,
        readiness,
        authorizer,
    })
}

fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
}

/// Binds `addr` and serves until the process ends (or the socket fails).
pub async fn serve(
    addr: SocketAddr,
    security: Security,
    metrics: Metrics,
    readiness: Readiness,
) -> Result<(), ServeError> {
    serve_with(addr, security, metrics, readiness, Router::new()).await
}

/// As [`serve`], with the component's `extra` routes next to the common ones.
pub async fn serve_with(
    addr: SocketAddr,
    security: Security,
    metrics: Metrics,
    readiness: Readiness,
    extra: Router,
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind {
            address: addr,
            source,
        })?;
    serve_on_with(
        listener,
        security,
        metrics,
        readiness,
        extra,
        std::future::pending(),
    )
    .await
}

/// Serves on an already bound `listener` until `shutdown` resolves. Plain HTTP
/// finishes the requests in flight; TLS connections end with the process.
pub async fn serve_on(
    listener: TcpListener,
    security: Security,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_on_with(
        listener,
        security,
        metrics,
        readiness,
        Router::new(),
        shutdown,
    )
    .await
}

/// As [`serve_on`], with the component's `extra` routes next to the common ones.
pub async fn serve_on_with(
    listener: TcpListener,
    security: Security,
    metrics: Metrics,
    readiness: Readiness,
    extra: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().ok();
    match security {
        Security::Insecure => {
            warn!(
                ?addr,
                "serving /healthz, /readyz and /metrics over plain HTTP without authentication (--insecure-http)"
            );
            // axum's graceful shutdown waits for every connection to end: bounded here.
            let (signalled_tx, signalled) = tokio::sync::oneshot::channel();
            let serving = axum::serve(listener, router(metrics, readiness, None).merge(extra))
                .with_graceful_shutdown(async move {
                    shutdown.await;
                    let _ = signalled_tx.send(());
                });
            let deadline = async {
                if signalled.await.is_ok() {
                    tokio::time::sleep(CONNECTION_DRAIN).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                served = serving => served?,
                () = deadline => warn!(?addr, "connections still open {CONNECTION_DRAIN:?} after shutdown; cutting them"),
            }
            Ok(())
        }
        Security::Secure { cert, authorizer } => {
            let mut own = prometheus_client::registry::Registry::default();
            let reloads = ReloadMetrics::register(&mut own);
            let (config, watcher) = tls::reloading_server_config(&cert, reloads, RELOAD_INTERVAL)?;
            let metrics = metrics.with(std::sync::Arc::new(own).into());
            let acceptor = TlsAcceptor::from(config);
            // Stops with the server (dropped at return).
            let _watching = watcher.map(|w| AbortOnDrop(tokio::spawn(w)));
            info!(
                ?addr,
                "serving /healthz, /readyz and /metrics over HTTPS (/metrics authorised by the API server)"
            );
            let state = AppState {
                metrics,
                readiness,
                authorizer: Some(authorizer),
            };
            // (axum refuses a route layer on a router without routes.)
            let extra = if extra.has_routes() {
                extra.route_layer(middleware::from_fn_with_state(
                    state.clone(),
                    authorize_route,
                ))
            } else {
                extra
            };
            let app = routes().with_state(state).merge(extra);
            serve_tls(listener, acceptor, app, shutdown, MAX_CONNECTIONS).await
        }
    }
}

/// A task that ends when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The TLS accept loop. Every connection runs on its own task, kept in a set: on
/// shutdown the listener closes, each connection is told to finish (hyper's graceful
/// shutdown: an idle keep-alive connection closes at once, one with a request in flight
/// after its answer), and whatever is still open after [`CONNECTION_DRAIN`] is cut. So
/// no connection outlives the server (a scraper's keep-alive connection would otherwise
/// stay open as long as the process, and its task with it).
async fn serve_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    max_connections: usize,
) -> Result<(), ServeError> {
    tokio::pin!(shutdown);
    let places = std::sync::Arc::new(tokio::sync::Semaphore::new(max_connections));
    let (closing_tx, closing) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    debug!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            // Reap finished connections as they end, so the set stays small.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            () = &mut shutdown => break,
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            // Refused before the handshake, so a flood of idle connections costs a
            // socket each only until they are dropped here.
            debug!(%peer, max_connections, "too many open connections; closing a new one");
            drop(stream);
            continue;
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        let mut closing = closing.clone();
        // Each handshake on its own task, so that a slow client stalls nobody else.
        connections.spawn(async move {
            let _place = place;
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => return debug!(%peer, "TLS handshake timed out"),
            };
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = async { let _ = closing.wait_for(|c| *c).await; } => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = served {
                debug!(%peer, error = %e, "serving a connection");
            }
        });
    }
    drop(listener);
    closing_tx.send_replace(true);
    let open = connections.len();
    let drained = tokio::time::timeout(CONNECTION_DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            open,
            left = connections.len(),
            "connections still open {CONNECTION_DRAIN:?} after shutdown; cutting them"
        );
        connections.abort_all();
    } else if open > 0 {
        debug!(open, "connections drained");
    }
    Ok(())
}

/// The caller's bearer token: from `Authorization`, else from the header the API
/// server's service proxy passes on.
fn request_token(headers: &HeaderMap) -> Option<&str> {
    [header::AUTHORIZATION.as_str(), auth::PROXIED_AUTHORIZATION]
        .into_iter()
        .find_map(|name| auth::bearer_token(headers.get(name).and_then(|v| v.to_str().ok())))
}

/// The caller's decision for `path`, or the response refusing it.
async fn authorize(state: &AppState, headers: &HeaderMap, path: &str) -> Result<(), Response> {
    let Some(authorizer) = &state.authorizer else {
        return Ok(());
    };
    match authorizer.decide(request_token(headers), path).await {
        Ok(Decision::Allowed) => Ok(()),
        Ok(Decision::Unauthenticated) => {
            Err((StatusCode::UNAUTHORIZED, "Unauthorized").into_response())
        }
        Ok(Decision::Forbidden) => Err((StatusCode::FORBIDDEN, "Forbidden").into_response()),
        Err(AuthError::Busy) => {
            debug!("refusing a request: too many token reviews");
            let mut refused =
                (StatusCode::TOO_MANY_REQUESTS, "too many token reviews").into_response();
            refused
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            Err(refused)
        }
        Err(e) => {
            warn!(error = %e, "cannot authorise a request");
            Err((StatusCode::SERVICE_UNAVAILABLE, "authorization unavailable").into_response())
        }
    }
}

/// A component's own route: only for a caller allowed to `get` the route's path (the
/// route as declared, so that the permission names what the caller reads).
async fn authorize_route(
    State(state): State<AppState>,
    path: MatchedPath,
    request: Request,
    next: Next,
) -> Response {
    if let Err(refused) = authorize(&state, request.headers(), path.as_str()).await {
        return refused;
    }
    next.run(request).await
}

async fn readyz(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Err(reason) = state.readiness.check() else {
        return (StatusCode::OK, "ok").into_response();
    };
    // The reason may carry internal error text: only for a caller who may read the
    // metrics. Not `get /readyz`: the API server's default ClusterRole
    // system:public-info-viewer grants that to everyone.
    let detailed = state.authorizer.is_some()
        && request_token(&headers).is_some()
        && authorize(&state, &headers, "/metrics").await.is_ok();
    let body = if detailed {
        reason
    } else {
        "not ready".to_owned()
    };
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

async fn metrics_text(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = authorize(&state, &headers, "/metrics").await {
        return refused;
    }
    match state.metrics.render() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            warn!(error = %e, "encoding metrics failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "encoding metrics failed").into_response()
        }
    }
}

/// The names a self-signed certificate is made for: `localhost` and this host's name.
pub fn self_signed_names(identity: &str) -> Vec<String> {
    let mut names = vec!["localhost".to_owned()];
    if !identity.is_empty() && identity != "localhost" {
        names.push(identity.to_owned());
    }
    names
}

#[cfg(test)]
mod tests;
