//! `/healthz`, `/readyz` and `/metrics`.
//!
//! Liveness only says the process serves HTTP. Readiness turns true after the first
//! successful publish and false while the kubelet's socket is unreachable, with the reason
//! in the response body so `kubectl describe pod` shows why.

use crate::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Readiness as the agent sees it.
#[derive(Debug, Default)]
pub struct Readiness {
    not_ready: Mutex<Option<String>>,
}

impl Readiness {
    /// Not ready until told otherwise.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            not_ready: Mutex::new(Some(reason.into())),
        }
    }

    /// Mark ready.
    pub fn ready(&self) {
        if let Ok(mut r) = self.not_ready.lock() {
            *r = None;
        }
    }

    /// Mark not ready, saying why.
    pub fn not_ready(&self, reason: impl Into<String>) {
        if let Ok(mut r) = self.not_ready.lock() {
            *r = Some(reason.into());
        }
    }

    /// `None` when ready, else the reason.
    pub fn reason(&self) -> Option<String> {
        self.not_ready
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|_| Some("readiness state poisoned".to_owned()))
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
}

/// The router (exposed for tests).
pub fn router(metrics: Arc<Metrics>, readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { metrics, readiness })
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    match s.readiness.reason() {
        None => (StatusCode::OK, "ok".to_owned()),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
    }
}

async fn metrics_text(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

/// Serve until the process ends. Binding errors are returned (e.g. port in use).
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router(metrics, readiness)).await
}
