//! The scheduler's debug endpoint, `GET /debug/reservations`: the reserve cache as JSON
//! ([`ReservationsReport`]), for `kubectl tas explain` and `kubectl tas nodes`, which read
//! it through the API server's service proxy. It is an ordinary route of the HTTP server
//! (`tas_runtime::http`), so it is served, and protected, like `/metrics`: only to a
//! bearer token whose user may `get` the non-resource URL [`RESERVATIONS_PATH`]
//! (ClusterRole `tas-debug-reader`). Through the service proxy, which keeps no
//! `Authorization` header, the token travels in [`TOKEN_HEADER`].
//!
//! Amounts are integers in the scheduler's units: CPU in millicores, memory and
//! hugepages in bytes, devices in units. Only the leader places pods, so only its
//! reservations matter; a follower answers with `leader: false` and the reservations
//! it observed (pods bound by others, when the foreign-pods policy reserves them).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use crate::cache::{NodeInspection, ReservationInspection};
use crate::numa::Resources;
use crate::shared::Shared;

/// The endpoint's path.
pub const RESERVATIONS_PATH: &str = "/debug/reservations";

/// The header that carries `Bearer <token>` through the API server's service proxy.
pub use tas_runtime::http::auth::PROXIED_AUTHORIZATION as TOKEN_HEADER;

/// The answer of [`RESERVATIONS_PATH`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReservationsReport {
    /// The `spec.schedulerName` this scheduler serves.
    pub scheduler_name: String,
    /// Whether this replica leads (places pods).
    pub leader: bool,
    /// Every node the reserve cache knows, by name.
    pub nodes: Vec<NodeReservations>,
}

impl ReservationsReport {
    /// The entry of `node`, if the cache knows it.
    pub fn node(&self, node: &str) -> Option<&NodeReservations> {
        self.nodes.iter().find(|n| n.node == node)
    }
}

/// One node of the reserve cache.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeReservations {
    /// Node name.
    pub node: String,
    /// Whether the node has a NodeResourceTopology object.
    pub has_topology: bool,
    /// Why that object cannot be used, if it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_error: Option<String>,
    /// `true` when the scheduler's view is the latest NRT as published (no reservation
    /// on top of it); `false` while reservations wait for the NRT to confirm them.
    pub confirmed: bool,
    /// Seconds since the oldest pending reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_seconds: Option<f64>,
    /// The pod fingerprint the latest NRT carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nrt_fingerprint: Option<String>,
    /// The fingerprint of the pods the scheduler believes on the node (NRT's method).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_fingerprint: Option<String>,
    /// Whether they agree; absent when the NRT carries no usable fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint_match: Option<bool>,
    /// Pods the scheduler believes bound to the node.
    pub pods: usize,
    /// Reservations held on every zone of the node.
    #[serde(default)]
    pub reservations: Vec<Reservation>,
    /// The scheduler's view: each zone's free amounts with the reservations subtracted.
    #[serde(default)]
    pub zones: Vec<ZoneFree>,
    /// Seconds since the NRT's writer last wrote it, present only when that writer
    /// stopped (`tas.dev/heartbeat` older than `missedHeartbeats` periods): the pods
    /// bound since stay reserved until it writes again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_stopped_seconds: Option<f64>,
}

/// One NUMA zone of the scheduler's view.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ZoneFree {
    /// NUMA id (the NRT zone `node-<id>`).
    pub numa_id: u32,
    /// Free per resource.
    pub available: BTreeMap<String, i64>,
}

/// A reservation: what the view holds back on each of its zones for one pod.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod UID.
    pub uid: String,
    /// Reserved when seen bound, not placed by this scheduler.
    pub foreign: bool,
    /// Seconds since it was made.
    pub age_seconds: f64,
    /// Per resource, in the units of the module documentation.
    pub amounts: BTreeMap<String, i64>,
    /// The NUMA ids it is held back on, when narrowed to the zones the kubelet can
    /// give the pod; absent: every zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<u32>>,
}

impl From<NodeInspection> for NodeReservations {
    fn from(n: NodeInspection) -> Self {
        Self {
            node: n.node,
            has_topology: n.has_topology,
            topology_error: n.topology_error,
            confirmed: n.has_topology && !n.dirty,
            dirty_seconds: n.dirty_seconds,
            nrt_fingerprint: n.nrt_fingerprint,
            scheduler_fingerprint: n.scheduler_fingerprint,
            fingerprint_match: n.fingerprint_match,
            pods: n.pods,
            reservations: n.reservations.into_iter().map(Reservation::from).collect(),
            zones: n
                .zones
                .into_iter()
                .map(|(numa_id, free)| ZoneFree {
                    numa_id,
                    available: free.into_iter().collect(),
                })
                .collect(),
            writer_stopped_seconds: n.writer_stopped_seconds,
        }
    }
}

impl From<ReservationInspection> for Reservation {
    fn from(r: ReservationInspection) -> Self {
        Self {
            namespace: r.namespace,
            name: r.name,
            uid: r.uid,
            foreign: r.foreign,
            age_seconds: r.age_seconds,
            amounts: amounts(&r.amounts),
            zones: r.zones.map(|z| z.iter().collect()),
        }
    }
}

fn amounts(r: &Resources) -> BTreeMap<String, i64> {
    r.iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The report of the cache now.
pub fn report(shared: &Shared) -> ReservationsReport {
    ReservationsReport {
        scheduler_name: shared.settings.scheduler_name.clone(),
        leader: shared.metrics.leader.get() == 1,
        nodes: shared
            .cache
            .inspect(Instant::now())
            .into_iter()
            .map(NodeReservations::from)
            .collect(),
    }
}

/// The debug routes, for [`tas_runtime::http::serve_with`].
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(RESERVATIONS_PATH, get(reservations))
        .with_state(shared)
}

/// The report, built off the async workers: it walks every node.
async fn reservations(State(shared): State<Arc<Shared>>) -> Response {
    match tokio::task::spawn_blocking(move || report(&shared)).await {
        Ok(report) => axum::Json(report).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "building the reservations report");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "building the report failed",
            )
                .into_response()
        }
    }
}
