//! Other NRT writers and the node agents' reports, on the real API server:
//!
//! - the NRT CRD is co-managed by another field manager (a node-feature-discovery Helm
//!   release): the operator does not force over it, `NRTOwnership` names the manager,
//!   and `spec.nrtCRD.takeOver` makes it apply again;
//! - one node's NRT object is written by node-feature-discovery's topology-updater: the
//!   node is listed with its writer;
//! - one node's agent cannot read the kubelet configuration, another's kubelet has
//!   policy `none`: both are listed with the path tried, and the first gets an Event.

use crate::harness::*;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tas_api::nrt::agent_report::{KUBELET_CONFIG_PROBLEM, KUBELET_CONFIG_SOURCE};
use tas_api::tas::status::condition_type::NRT_OWNERSHIP;
use tas_testcluster::{unique_name, wait_for};

const POOL: &str = "e2e.tas.dev/pool";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const HELM: &str = "nfd-helm-release";
const NFD_UPDATER: &str = "nfd-topology-updater";
const BAD_FILE: &str = "/etc/kubernetes/kubelet/config.d/10-tm.conf";

fn nrt_resource() -> ApiResource {
    tas_testcluster::scope::nrt_resource()
}

/// Writes `node`'s NRT object as field manager `manager` (server-side apply).
async fn write_nrt(client: &Client, manager: &str, node: &str, body: serde_json::Value) {
    let resource = nrt_resource();
    let mut object = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": node},
        "zones": [{"name": "node-0", "type": "Node", "resources": [
            {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"}]}],
    });
    json_patch(&mut object, body);
    Api::<DynamicObject>::all_with(client.clone(), &resource)
        .patch(node, &PatchParams::apply(manager), &Patch::Apply(&object))
        .await
        .unwrap();
}

fn json_patch(target: &mut serde_json::Value, patch: serde_json::Value) {
    if let (Some(t), serde_json::Value::Object(p)) = (target.as_object_mut(), patch) {
        for (k, v) in p {
            match t.get_mut(&k) {
                Some(existing) if existing.is_object() && v.is_object() => json_patch(existing, v),
                _ => {
                    t.insert(k, v);
                }
            }
        }
    }
}

/// The Helm release applies the same CRD with its own `managed-by` label.
async fn helm_applies_the_crd(client: &Client) {
    let mut crd = tas_api::crds::node_resource_topology();
    crd.metadata.labels = Some([(MANAGED_BY.to_owned(), "Helm".to_owned())].into());
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            NRT_CRD,
            &PatchParams::apply(HELM).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
}

/// The Helm release lets go of every field (an apply of nothing).
async fn helm_lets_go(client: &Client) {
    let empty = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NRT_CRD},
    });
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(NRT_CRD, &PatchParams::apply(HELM), &Patch::Apply(&empty))
        .await
        .unwrap();
}

async fn crd_label(client: &Client) -> Option<String> {
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(NRT_CRD)
        .await
        .unwrap();
    label(&crd, MANAGED_BY).map(str::to_owned)
}

pub async fn scenario(client: &Client) {
    let ns = unique_name("tas-coexist");
    let pool = unique_name("pool");
    let names = nodes(client, "coexist", 3, &[(POOL, &pool)]).await;
    let (foreign, unreadable, none) = (&names[0], &names[1], &names[2]);
    helm_applies_the_crd(client).await;
    write_nrt(
        client,
        NFD_UPDATER,
        foreign,
        json!({
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        }),
    )
    .await;
    write_nrt(client, "tas-updater", unreadable, json!({
        "metadata": {"annotations": {
            KUBELET_CONFIG_SOURCE: BAD_FILE,
            KUBELET_CONFIG_PROBLEM: format!("{BAD_FILE}: does not parse: mapping values are not allowed (publishing the last settings read)"),
        }},
        "attributes": [{"name": "topologyManagerPolicy", "value": "restricted"}],
    }))
    .await;
    write_nrt(
        client,
        "tas-updater",
        none,
        json!({
            "metadata": {"annotations": {KUBELET_CONFIG_SOURCE: "/var/lib/kubelet/config.yaml"}},
            "attributes": [{"name": "topologyManagerPolicy", "value": "none"}],
        }),
    )
    .await;

    create(client, &with_groups(&ns, &[("numa", POOL, &pool)])).await;
    let cr = wait_condition(client, NRT_OWNERSHIP, "False", Some("CRDManagedByOther")).await;
    let message = &condition(&cr, NRT_OWNERSHIP).unwrap().message;
    assert!(message.contains(HELM), "{message}");
    let status = cr.status.clone().unwrap();
    assert_eq!(status.nrt_crd.unwrap().foreign_managers, [HELM]);
    // The operator left the CRD alone: the Helm release's label is still there.
    assert_eq!(crd_label(client).await.as_deref(), Some("Helm"));

    let cr = wait_status(client, "the group's nodes reported", |cr| {
        cr.status.as_ref().is_some_and(|s| {
            s.node_groups.first().is_some_and(|g| {
                g.kubelet_config_issues.len() == 2 && !g.foreign_nrt_writers.is_empty()
            })
        })
    })
    .await;
    let group = &cr.status.unwrap().node_groups[0];
    let issue = |node: &str| {
        group
            .kubelet_config_issues
            .iter()
            .find(|i| i.node == node)
            .unwrap_or_else(|| panic!("{node} listed: {group:?}"))
    };
    assert_eq!(issue(unreadable).reason, "ConfigUnreadable");
    assert_eq!(issue(unreadable).path, BAD_FILE);
    assert!(issue(unreadable).message.contains("does not parse"));
    assert_eq!(issue(none).reason, "PolicyNone");
    assert_eq!(issue(none).path, "/var/lib/kubelet/config.yaml");
    assert_eq!(group.foreign_nrt_writers.len(), 1);
    assert_eq!(&group.foreign_nrt_writers[0].node, foreign);
    assert_eq!(group.foreign_nrt_writers[0].field_managers, [NFD_UPDATER]);

    // One Warning Event names the node, the problem and the file.
    let events: Api<Event> = Api::all(client.clone());
    let selector = "involvedObject.name=default,reason=KubeletConfigUnreadable";
    let event = wait_for("the KubeletConfigUnreadable Event", TIMEOUT, || async {
        let list = events.list(&ListParams::default().fields(selector)).await?;
        Ok::<_, kube::Error>(list.items.into_iter().find(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.contains(unreadable.as_str()))
        }))
    })
    .await
    .unwrap();
    let note = event.message.unwrap();
    assert!(
        note.contains(BAD_FILE) && note.contains("does not parse"),
        "{note}"
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // Take the CRD over: the operator applies it again (its label comes back); the
    // condition now reports the other NRT writer.
    patch_spec(client, json!({"nrtCRD": {"takeOver": true}})).await;
    let cr = wait_condition(client, NRT_OWNERSHIP, "False", Some("NRTWrittenByOther")).await;
    let message = &condition(&cr, NRT_OWNERSHIP).unwrap().message;
    assert!(
        message.contains(NFD_UPDATER) && message.contains(foreign.as_str()),
        "{message}"
    );
    wait_for("the operator's label back on the CRD", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            (crd_label(client).await.as_deref() == Some("tas-operator")).then_some(()),
        )
    })
    .await
    .unwrap();

    // The other writer goes away: TAS alone writes NRT.
    let nrts = Api::<DynamicObject>::all_with(client.clone(), &nrt_resource());
    nrts.delete(foreign, &DeleteParams::default())
        .await
        .unwrap();
    helm_lets_go(client).await;
    wait_condition(client, NRT_OWNERSHIP, "True", Some("AsExpected")).await;

    for node in [unreadable, none] {
        nrts.delete(node, &DeleteParams::default()).await.unwrap();
    }
    uninstall(client, &ns).await;
}
