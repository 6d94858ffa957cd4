//! Time-based NRT freshness on the real API server: a node whose agent stopped writing
//! (its `tas.dev/heartbeat` older than `missedHeartbeats` periods) is listed in
//! `status.nodeGroups[].staleNodes` and makes `Degraded=True` (`StaleTopology`) naming
//! it; a fresh write clears it, and a node that goes stale by time alone, with no
//! event, is noticed through the reconcile's requeue.

use crate::harness::*;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use std::time::{Duration, SystemTime};
use tas_api::nrt::heartbeat::{HEARTBEAT, HEARTBEAT_PERIOD};
use tas_api::tas::status::condition_type::DEGRADED;
use tas_testcluster::unique_name;

const POOL: &str = "e2e.tas.dev/pool";

/// Writes `node`'s NRT as the agent does, last written `age` ago with `period`.
async fn write_nrt(client: &Client, node: &str, age: Duration, period: &str) {
    let resource = ApiResource {
        group: "topology.node.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "topology.node.k8s.io/v1alpha2".into(),
        kind: "NodeResourceTopology".into(),
        plural: "noderesourcetopologies".into(),
    };
    let at = k8s_openapi::jiff::Timestamp::try_from(SystemTime::now() - age).unwrap();
    let at = k8s_openapi::jiff::Timestamp::from_second(at.as_second()).unwrap();
    let object = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": node},
        "attributes": [
            {"name": HEARTBEAT, "value": at.to_string()},
            {"name": HEARTBEAT_PERIOD, "value": period},
        ],
        "zones": [{"name": "node-0", "type": "Node", "resources": [
            {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"}]}],
    });
    Api::<DynamicObject>::all_with(client.clone(), &resource)
        .patch(
            node,
            &PatchParams::apply("tas-updater").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
}

fn degraded_message(cr: &tas_api::tas::TopologyAwareScheduling) -> String {
    condition(cr, DEGRADED)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

pub async fn scenario(client: &Client) {
    let ns = unique_name("tas-stale");
    let pool = unique_name("pool");
    let workers = nodes(client, "stale", 2, &[(POOL, &pool)]).await;
    let (stopped, alive) = (&workers[0], &workers[1]);
    write_nrt(client, stopped, Duration::from_secs(3600), "10m").await;
    write_nrt(client, alive, Duration::ZERO, "10m").await;
    create(client, &with_groups(&ns, &[("numa", POOL, &pool)])).await;

    let cr = wait_condition(client, DEGRADED, "True", Some("StaleTopology")).await;
    let message = degraded_message(&cr);
    assert!(message.contains(stopped.as_str()), "{message}");
    assert!(!message.contains(alive.as_str()), "{message}");
    let group = &cr.status.as_ref().unwrap().node_groups[0];
    assert_eq!(group.stale_nodes, std::slice::from_ref(stopped));
    assert_eq!((group.stale_node_count, group.nodes_with_fresh_nrt), (1, 1));

    // The agent writes again. The write changes nothing the NRT watch wakes the
    // operator for; the requeue of a degraded stack notices it.
    write_nrt(client, stopped, Duration::ZERO, "10m").await;
    let cr = wait_condition(client, DEGRADED, "False", Some("AsExpected")).await;
    let group = &cr.status.as_ref().unwrap().node_groups[0];
    assert!(group.stale_nodes.is_empty(), "{:?}", group.stale_nodes);
    assert_eq!(group.nodes_with_fresh_nrt, 2);

    // A 10 s promise last kept 20 s ago: fresh now, stale 10 s later with no event at
    // all; the reconcile is requeued for that moment.
    write_nrt(client, alive, Duration::from_secs(20), "10s").await;
    let cr = wait_status(client, "the alive node to turn stale by time alone", |cr| {
        condition(cr, DEGRADED).is_some_and(|c| c.reason == "StaleTopology")
    })
    .await;
    let message = degraded_message(&cr);
    assert!(message.contains(alive.as_str()), "{message}");
    assert!(!message.contains(stopped.as_str()), "{message}");

    uninstall(client, &ns).await;
}
