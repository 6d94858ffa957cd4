//! The NodeResourceTopology CRD survives uninstall unless the operator created it and
//! is told to delete it (issue 29, finding 5). Deleting the CRD deletes every
//! NodeResourceTopology object, other tools' included.
//!
//! 1. `deleteOnUninstall` on, then off (with `manage: false`: another tool takes the CRD
//!    over): deleting the object leaves the CRD and the NRT objects, and the CRD holds
//!    no owner reference the garbage collector could act on.
//! 2. A CRD another tool installed, taken over (`takeOver`) with `deleteOnUninstall`:
//!    uninstall keeps it, since the operator did not create it.

use crate::harness::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tas_api::tas::status::condition_type::AVAILABLE;
use tas_testcluster::{unique_name, wait_for};

pub async fn scenario(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let nrts =
        Api::<DynamicObject>::all_with(client.clone(), &tas_testcluster::scope::nrt_resource());
    let label = ("tas.dev/nrt-crd", "yes");
    let node = nodes(client, "nrtcrd", 1, &[label]).await.remove(0);
    let stack = |ns: &str, nrt: serde_json::Value| {
        let mut cr = with_groups(ns, &[("crd", label.0, label.1)]);
        cr.spec.nrt_crd = serde_json::from_value(nrt).unwrap();
        cr
    };

    // 1. On, then off.
    let ns = unique_name("tas-crd-off");
    let on = json!({"manage": true, "deleteOnUninstall": true, "takeOver": true});
    create(client, &stack(&ns, on)).await;
    let cr = wait_condition(client, AVAILABLE, "True", Some("AsExpected")).await;
    let owner = cr.uid().unwrap();
    publish_nrt(client, &node).await;
    patch_spec(
        client,
        json!({"nrtCRD": {"manage": false, "deleteOnUninstall": false}}),
    )
    .await;
    wait_reconciled(client).await;
    uninstall(client, &ns).await;
    let crd = crds
        .get_opt(NRT_CRD)
        .await
        .unwrap()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .expect("the CRD survives: deleteOnUninstall was turned off");
    assert!(
        crd.owner_references().iter().all(|r| r.uid != owner),
        "the CRD still has an owner reference to the deleted object: the garbage collector deletes it: {:?}",
        crd.owner_references()
    );
    assert!(
        nrts.get_opt(&node).await.unwrap().is_some(),
        "NRT object deleted"
    );

    // 2. Another tool's CRD, taken over with deleteOnUninstall.
    delete_crd(&crds).await;
    crds.patch(
        NRT_CRD,
        &PatchParams::apply("other-tool").force(),
        &Patch::Apply(tas_api::crds::node_resource_topology()),
    )
    .await
    .unwrap();
    wait_for(
        "the other tool's CRD to be Established",
        TIMEOUT,
        || async { Ok::<_, kube::Error>(crd_established(&crds.get(NRT_CRD).await?).then_some(())) },
    )
    .await
    .unwrap();
    let ns = unique_name("tas-crd-foreign");
    let take_over = json!({"manage": true, "deleteOnUninstall": true, "takeOver": true});
    create(client, &stack(&ns, take_over)).await;
    wait_condition(client, AVAILABLE, "True", Some("AsExpected")).await;
    publish_nrt(client, &node).await;
    uninstall(client, &ns).await;
    assert!(
        crds.get_opt(NRT_CRD)
            .await
            .unwrap()
            .is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "the operator deleted a CRD another tool installed"
    );
    assert!(
        nrts.get_opt(&node).await.unwrap().is_some(),
        "NRT object deleted"
    );

    // Leave the cluster as the scenarios after this one expect it: the CRD is the
    // operator's to install again.
    delete_crd(&crds).await;
}

/// Deletes the NRT CRD (and with it every NRT object), if any, and waits until it is gone.
async fn delete_crd(crds: &Api<CustomResourceDefinition>) {
    match crds.delete(NRT_CRD, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("deleting the CRD: {e}"),
    }
    wait_for("the CRD to be gone", TIMEOUT, || async {
        Ok::<_, kube::Error>(crds.get_opt(NRT_CRD).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
}

/// Waits until the status describes the object's current generation.
async fn wait_reconciled(client: &Client) {
    wait_status(client, "the current generation reconciled", |cr| {
        cr.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == cr.metadata.generation)
    })
    .await;
}
