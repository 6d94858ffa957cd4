//! Two node groups come to select the same node: Degraded, and the DaemonSets are left
//! alone until the overlap is gone.

use crate::harness::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tas_api::tas::status::condition_type::{AVAILABLE, DEGRADED};
use tas_operator::desired::updater_daemonset_name;
use tas_testcluster::unique_name;

const POOL: &str = "e2e.tas.dev/pool";
const ZONE: &str = "e2e.tas.dev/zone";

pub async fn scenario(client: &Client) {
    let ns = unique_name("tas-overlap");
    let pool = unique_name("pool");
    let zone = unique_name("zone");
    let a = nodes(client, "alpha", 2, &[(POOL, &pool)]).await;
    nodes(client, "beta", 1, &[(ZONE, &zone)]).await;
    // Someone else owns the NRT CRD here (it exists since the first scenario): the
    // operator only checks it.
    let mut cr = with_groups(&ns, &[("alpha", POOL, &pool), ("beta", ZONE, &zone)]);
    cr.spec.nrt_crd.manage = false;
    create(client, &cr).await;
    wait_condition(client, AVAILABLE, "True", None).await;
    let cr = wait_condition(client, DEGRADED, "False", None).await;
    let nrt = cr.status.unwrap().nrt_crd.unwrap();
    assert!(nrt.installed && !nrt.managed, "{nrt:?}");

    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), &ns);
    let beta = updater_daemonset_name("beta");
    let before = daemon_sets.get(&beta).await.unwrap();

    // alpha's first node now also carries beta's label.
    let overlapping = &a[0];
    let node_api: Api<Node> = Api::all(client.clone());
    node_api
        .patch(
            overlapping,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { ZONE: zone } } })),
        )
        .await
        .unwrap();
    let cr = wait_condition(client, DEGRADED, "True", Some("NodeGroupsOverlap")).await;
    let message = &condition(&cr, DEGRADED).unwrap().message;
    assert!(
        message.starts_with(&format!(
            "1 node is selected by more than one node group: {overlapping} (groups alpha, beta)"
        )),
        "{message}"
    );

    // A spec change while the groups overlap is not applied to the DaemonSets.
    patch_spec(
        client,
        json!({ "updater": { "refresh": { "period": "7s" } } }),
    )
    .await;
    let generation = stacks(client).get(STACK).await.unwrap().metadata.generation;
    let cr = wait_status(client, "the new generation to be observed", |cr| {
        cr.status.as_ref().unwrap().observed_generation == generation
    })
    .await;
    assert_eq!(
        condition(&cr, DEGRADED).unwrap().reason,
        "NodeGroupsOverlap"
    );
    let during = daemon_sets.get(&beta).await.unwrap();
    assert_eq!(
        during.metadata.generation, before.metadata.generation,
        "DaemonSets unchanged while the groups overlap"
    );

    // Removing the label ends the overlap; the pending change is applied.
    node_api
        .patch(
            overlapping,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { ZONE: null } } })),
        )
        .await
        .unwrap();
    wait_condition(client, DEGRADED, "False", Some("AsExpected")).await;
    let after = get_daemon_set(client, &ns, &beta).await;
    assert!(
        after.metadata.generation > before.metadata.generation,
        "the change held back is applied once the overlap is gone"
    );
    let args = after.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert!(args.contains(&"--refresh-period=7s".to_owned()), "{args:?}");

    uninstall(client, &ns).await;
}
