//! The scheduler's debug endpoints: `GET /debug/reservations`, the reserve cache as JSON
//! ([`ReservationsReport`]), for `kubectl tas explain` and `kubectl tas nodes`, and
//! `GET /debug/decisions`, the recent scheduling attempts ([`DecisionsReport`], from
//! [`crate::decisions`]; `?namespace=&pod=&limit=` select), for `kubectl tas decisions`
//! and `kubectl tas gather`. Both are read through the API server's service proxy. They
//! are ordinary routes of the HTTP server (`tas_runtime::http`), so they are served, and
//! protected, like `/metrics`: only to a bearer token whose user may `get` the
//! non-resource URL of the route ([`RESERVATIONS_PATH`], [`DECISIONS_PATH`]; ClusterRole
//! `tas-debug-reader`). Through the service proxy, which keeps no `Authorization`
//! header, the token travels in [`TOKEN_HEADER`].
//!
//! Amounts are integers in the scheduler's units: CPU in millicores, memory and
//! hugepages in bytes, devices in units. Each node also lists its DRA devices
//! (ResourceSlices) per driver and NUMA zone: free, in use (allocated or in flight)
//! and unusable ([`DraDevices`]). Only the leader places pods, so only its
//! reservations matter; a follower answers with `leader: false` and the reservations
//! it observed (pods bound by others, when the foreign-pods policy reserves them).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{Query, RawQuery, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use crate::cache::{NodeInspection, ReservationInspection};
use crate::decisions::{DecisionQuery, DecisionsReport};
use crate::dra::{Inventory, inventory};
use crate::numa::Resources;
use crate::shared::Shared;

pub use crate::decisions::DECISIONS_PATH;

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
    /// The node's DRA devices per driver and NUMA zone; empty when no ResourceSlice
    /// reaches the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dra_devices: Vec<DraDevices>,
}

/// The DRA devices of one driver on one NUMA zone of a node.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DraDevices {
    /// The driver.
    pub driver: String,
    /// The NUMA id; absent when the devices publish no zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_id: Option<u32>,
    /// Free for the next pod.
    pub free: usize,
    /// Allocated to a claim, or in flight to one.
    pub in_use: usize,
    /// Never allocated by TAS (tainted, incomplete or invalid pool, unsupported).
    pub unusable: usize,
}

/// The rows of `inventory`, driver by driver, zones ascending (unknown first).
pub fn dra_devices(inventory: &Inventory) -> Vec<DraDevices> {
    inventory
        .iter()
        .flat_map(|(driver, zones)| {
            zones.iter().map(move |(zone, counts)| DraDevices {
                driver: driver.clone(),
                numa_id: *zone,
                free: counts.free,
                in_use: counts.in_use,
                unusable: counts.unusable,
            })
        })
        .collect()
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
            dra_devices: Vec::new(),
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

/// The report of the cache and the DRA devices now.
pub fn report(shared: &Shared) -> ReservationsReport {
    let mut nodes: Vec<NodeReservations> = shared
        .cache
        .inspect(Instant::now())
        .into_iter()
        .map(NodeReservations::from)
        .collect();
    let dra = shared.dra.read().snapshot();
    for (name, devices) in dra.devices.iter() {
        let rows = dra_devices(&inventory(devices, &dra.in_use));
        match nodes.iter_mut().find(|n| &n.node == name) {
            Some(node) => node.dra_devices = rows,
            None => nodes.push(NodeReservations {
                node: name.clone(),
                dra_devices: rows,
                ..NodeReservations::default()
            }),
        }
    }
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    ReservationsReport {
        scheduler_name: shared.settings.scheduler_name.clone(),
        leader: shared.metrics.leader.get() == 1,
        nodes,
    }
}

/// The debug routes, for [`tas_runtime::http::serve_with`].
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(RESERVATIONS_PATH, get(reservations))
        .route(DECISIONS_PATH, get(decisions))
        .with_state(shared)
}

/// The recent attempts [`DecisionQuery`] selects, newest first.
pub fn decisions_report(shared: &Shared, query: &DecisionQuery) -> DecisionsReport {
    DecisionsReport {
        scheduler_name: shared.settings.scheduler_name.clone(),
        leader: shared.metrics.leader.get() == 1,
        capacity: shared.decisions.capacity(),
        recorded: shared.decisions.recorded(),
        decisions: shared.decisions.query(query),
    }
}

/// The query string of `GET /debug/decisions` (what follows `?`; `None`: no `?`) read
/// as the endpoint reads it, with axum's `Query` extractor, and checked: the
/// [`DecisionQuery`], or the answer's message naming what is wrong.
pub fn decisions_query(raw: Option<&str>) -> Result<DecisionQuery, String> {
    let target = match raw {
        Some(query) => format!("{DECISIONS_PATH}?{query}"),
        None => DECISIONS_PATH.to_owned(),
    };
    let uri: Uri = target
        .parse()
        .map_err(|e| format!("{DECISIONS_PATH}: not a query string: {e}"))?;
    let Query(query) = Query::<DecisionQuery>::try_from_uri(&uri).map_err(|e| {
        format!(
            "{DECISIONS_PATH}: {}; the parameters are namespace, pod and limit",
            e.body_text()
        )
    })?;
    query
        .validate()
        .map_err(|e| format!("{DECISIONS_PATH}: {e}"))?;
    Ok(query)
}

/// `GET /debug/decisions?namespace=&pod=&limit=`: 400 naming the parameter when the
/// query is not one ([`decisions_query`]).
async fn decisions(State(shared): State<Arc<Shared>>, RawQuery(raw): RawQuery) -> Response {
    match decisions_query(raw.as_deref()) {
        Ok(query) => axum::Json(decisions_report(&shared, &query)).into_response(),
        Err(why) => (StatusCode::BAD_REQUEST, why).into_response(),
    }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::test_support::dra::{DRIVER, allocated, claim, slice};

    #[test]
    fn each_node_lists_its_dra_devices_per_driver_and_zone() {
        let shared = crate::test_support::shared();
        {
            let mut dra = shared.dra.write();
            dra.upsert_node("a", BTreeMap::new());
            dra.upsert_slice(slice(
                "a-gpus",
                "a",
                &[("gpu-0", 0), ("gpu-1", 0), ("gpu-2", 1)],
            ));
            dra.upsert_claim(allocated(
                claim("ns", "c", DRIVER, 1),
                "a",
                "a",
                &["gpu-1"],
                &[],
            ));
        }
        let report = report(&shared);
        let a = report.node("a").expect("a node with devices is listed");
        let row = |zone| DraDevices {
            driver: DRIVER.into(),
            numa_id: Some(zone),
            ..DraDevices::default()
        };
        assert_eq!(
            a.dra_devices,
            [
                DraDevices {
                    free: 1,
                    in_use: 1,
                    ..row(0)
                },
                DraDevices { free: 1, ..row(1) },
            ]
        );
        let json = serde_json::to_value(a).expect("json");
        assert_eq!(json["draDevices"][0]["inUse"], 1);
        assert_eq!(json["draDevices"][1]["numaId"], 1);
    }

    /// `GET uri` on the debug routes (no authorisation: that is the server's, tested in
    /// `e2e/tests/metrics_auth.rs`): status and body.
    async fn get(shared: &Arc<Shared>, uri: &str) -> (u16, String) {
        use http_body_util::BodyExt as _;
        use tower::ServiceExt as _;
        let request = axum::http::Request::get(uri)
            .body(axum::body::Body::empty())
            .expect("request");
        let answer = router(shared.clone())
            .oneshot(request)
            .await
            .expect("answer");
        let status = answer.status().as_u16();
        let body = answer.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[test]
    fn the_query_reads_back_what_kubectl_tas_writes() {
        assert_eq!(decisions_query(None), Ok(DecisionQuery::default()));
        assert_eq!(decisions_query(Some("")), Ok(DecisionQuery::default()));
        let query = DecisionQuery {
            namespace: Some("team a+b/%".into()),
            pod: Some("web-0&limit=1".into()),
            limit: Some(7),
        };
        let written = query.to_query_string();
        assert_eq!(decisions_query(Some(&written)), Ok(query), "{written}");
        for (raw, says) in [
            ("limit=-1", "limit"),
            ("namespace=a&namespace=b", "duplicate field `namespace`"),
            ("namespace=", "namespace must not be empty"),
            ("a b", "not a query string"),
        ] {
            let why = decisions_query(Some(raw)).expect_err(raw);
            assert!(why.starts_with(DECISIONS_PATH), "{raw}: {why}");
            assert!(why.contains(says), "{raw}: {why}");
        }
    }

    #[tokio::test]
    async fn decisions_are_served_newest_first_as_the_query_selects() {
        use crate::decisions::{DecisionOutcome, DecisionRecord};
        let shared = crate::test_support::shared();
        for (ns, pod) in [("a", "p"), ("b", "q"), ("a", "r")] {
            let who = (ns.into(), pod.into(), format!("uid-{pod}"));
            let mut r = DecisionRecord::new(
                "2026-01-02T03:04:05Z".into(),
                who,
                DecisionOutcome::Unschedulable,
            );
            r.message = Some("0/1 nodes are available: 1 Insufficient cpu (n).".into());
            shared.decisions.record(r);
        }
        let (code, body) = get(&shared, DECISIONS_PATH).await;
        assert_eq!(code, 200, "{body}");
        let all: DecisionsReport = serde_json::from_str(&body).expect("a report");
        let pods: Vec<&str> = all.decisions.iter().map(|d| d.pod.as_str()).collect();
        assert_eq!(pods, ["r", "q", "p"]);
        assert_eq!(all.recorded, 3);
        assert_eq!(all.capacity, crate::decisions::DEFAULT_CAPACITY as usize);

        let (code, body) = get(&shared, "/debug/decisions?namespace=a&limit=1").await;
        assert_eq!(code, 200, "{body}");
        let some: DecisionsReport = serde_json::from_str(&body).expect("a report");
        assert_eq!(some.decisions.len(), 1);
        assert_eq!(some.decisions[0].pod, "r");
        let (_, body) = get(&shared, "/debug/decisions?namespace=a&pod=p").await;
        let one: DecisionsReport = serde_json::from_str(&body).expect("a report");
        assert_eq!(one.decisions[0].uid, "uid-p");

        for (uri, says) in [
            ("/debug/decisions?limit=0", "limit must be at least 1"),
            ("/debug/decisions?limit=many", "limit"),
            ("/debug/decisions?node=n", "node"),
            ("/debug/decisions?pod=", "pod must not be empty"),
        ] {
            let (code, body) = get(&shared, uri).await;
            assert_eq!(code, 400, "{uri}: {body}");
            assert!(body.contains(says), "{uri}: {body}");
        }
    }
}
