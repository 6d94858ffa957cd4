//! The small HTTP server every TAS binary runs for the kubelet and Prometheus:
//!
//! | path | answer |
//! |---|---|
//! | `/healthz` | `200 ok` while the process serves at all (liveness) |
//! | `/readyz` | `200 ok` when [`Readiness`] says ready, else `503` with the reason |
//! | `/metrics` | the [`Metrics`] text, OpenMetrics format |
//!
//! The component keeps a [`Readiness`] clone and flips it; the server only reads it.
//! A component adds its own routes (e.g. the scheduler's `/debug/reservations`) with
//! [`serve_with`]: they are served like the others.

mod metrics;
mod readiness;

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tracing::{info, warn};

pub use metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};
pub use readiness::Readiness;

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    readiness: Readiness,
}

/// The routes, for embedding in a larger server.
pub fn router(metrics: Metrics, readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { metrics, readiness })
}

/// Binds `addr` and serves until the process ends (or the socket fails).
pub async fn serve(addr: SocketAddr, metrics: Metrics, readiness: Readiness) -> io::Result<()> {
    serve_with(addr, metrics, readiness, Router::new()).await
}

/// As [`serve`], with the component's `extra` routes next to the common ones.
pub async fn serve_with(
    addr: SocketAddr,
    metrics: Metrics,
    readiness: Readiness,
    extra: Router,
) -> io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    serve_on_with(listener, metrics, readiness, extra, std::future::pending()).await
}

/// Serves on an already bound `listener` until `shutdown` resolves, then finishes the
/// requests in flight.
pub async fn serve_on(
    listener: TcpListener,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_on_with(listener, metrics, readiness, Router::new(), shutdown).await
}

/// As [`serve_on`], with the component's `extra` routes next to the common ones.
pub async fn serve_on_with(
    listener: TcpListener,
    metrics: Metrics,
    readiness: Readiness,
    extra: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "serving /healthz, /readyz, /metrics and the component's routes");
    }
    axum::serve(listener, router(metrics, readiness).merge(extra))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn readyz(State(state): State<AppState>) -> Response {
    match state.readiness.check() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
    }
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    match state.metrics.render() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            warn!(error = %e, "encoding metrics failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "encoding metrics failed").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::Registry;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::sync::oneshot;

    use super::*;

    /// A response as seen on the wire: status code, headers (lowercased names), body.
    struct Reply {
        status: u16,
        headers: String,
        body: String,
    }

    async fn get(addr: SocketAddr, path: &str) -> Reply {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        Reply {
            status,
            headers: head.to_ascii_lowercase(),
            body: body.to_owned(),
        }
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics_over_tcp() {
        let registry = Arc::new(Mutex::new(Registry::default()));
        let zones: Gauge = Gauge::default();
        zones.set(2);
        registry
            .lock()
            .unwrap()
            .register("numa_zones", "NUMA zones seen", zones);
        let readiness = Readiness::not_ready("caches not synced");

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(serve_on(
            listener,
            Metrics::from(registry),
            readiness.clone(),
            async move {
                let _ = stopped.await;
            },
        ));

        let health = get(addr, "/healthz").await;
        assert_eq!((health.status, health.body.as_str()), (200, "ok"));

        let not_ready = get(addr, "/readyz").await;
        assert_eq!(not_ready.status, 503);
        assert_eq!(not_ready.body, "caches not synced");
        readiness.set_ready();
        let ready = get(addr, "/readyz").await;
        assert_eq!((ready.status, ready.body.as_str()), (200, "ok"));

        let metrics = get(addr, "/metrics").await;
        assert_eq!(metrics.status, 200);
        assert!(
            metrics
                .headers
                .contains("content-type: application/openmetrics-text"),
            "{}",
            metrics.headers
        );
        assert!(metrics.body.contains("numa_zones 2"), "{}", metrics.body);
        assert!(metrics.body.ends_with("# EOF\n"), "{}", metrics.body);

        assert_eq!(get(addr, "/nope").await.status, 404);

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_components_routes_are_served_beside_the_common_ones() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let extra = Router::new().route("/debug/thing", axum::routing::get(|| async { "thing" }));
        let server = tokio::spawn(serve_on_with(
            listener,
            Metrics::from_fn(|| Ok(String::new())),
            Readiness::not_ready("starting"),
            extra,
            std::future::pending(),
        ));
        let thing = get(addr, "/debug/thing").await;
        assert_eq!((thing.status, thing.body.as_str()), (200, "thing"));
        assert_eq!(get(addr, "/healthz").await.status, 200);
        server.abort();
    }

    #[tokio::test]
    async fn a_failing_metrics_source_answers_500() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Metrics::from_fn(|| Err(std::fmt::Error));
        let readiness = Readiness::not_ready("starting");
        let server = tokio::spawn(serve_on(
            listener,
            metrics,
            readiness,
            std::future::pending(),
        ));
        assert_eq!(get(addr, "/metrics").await.status, 500);
        server.abort();
    }
}
