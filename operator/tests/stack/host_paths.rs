//! An object stored before the host-path rule existed (or written around the CRD) names
//! `/` as a node group's pod-resources directory: the operator re-checks it, reports
//! Degraded naming the field, and renders nothing until the path is fixed.

use crate::harness::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tas_api::tas::status::condition_type::DEGRADED;
use tas_testcluster::{unique_name, wait_for};

const POOL: &str = "e2e.tas.dev/pool";
/// The per-group rule the old CRD lacks.
const GROUP_RULE: &str = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/nodeGroups/items/properties/updater/properties/kubelet/properties/podResourcesDir";

pub async fn scenario(client: &Client) {
    let ns = unique_name("tas-hostpath");
    let pool = unique_name("pool");
    nodes(client, "hostpath", 1, &[(POOL, &pool)]).await;
    let mut cr = with_groups(&ns, &[("numa", POOL, &pool)]);
    cr.spec.node_groups[0].updater =
        Some(serde_json::from_value(json!({"kubelet": {"podResourcesDir": "/"}})).unwrap());

    // Today's CRD refuses it at apply, naming the field.
    let refused = stacks(client)
        .create(&PostParams::default(), &cr)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("spec.nodeGroups[].updater.kubelet.podResourcesDir must be a kubelet pod-resources directory"),
        "{refused}"
    );

    // An older CRD without the rule takes it; then the current CRD is back.
    install_crd_without_group_rule(client).await;
    let api = stacks(client);
    wait_for("the old CRD to take the object", TIMEOUT, || async {
        Ok::<_, kube::Error>(api.create(&PostParams::default(), &cr).await.ok())
    })
    .await
    .unwrap();
    install_tas_crd(client).await;

    let degraded = wait_condition(client, DEGRADED, "True", Some("HostPathNotAllowed")).await;
    let message = &condition(&degraded, DEGRADED).unwrap().message;
    assert!(
        message.starts_with(
            "spec.nodeGroups[0].updater.kubelet.podResourcesDir: \"/\" is not allowed"
        ) && message.contains("/var/lib/kubelet/pod-resources"),
        "{message}"
    );
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), &ns);
    assert!(
        daemon_sets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing is rendered for a refused object"
    );

    // Fixing the path (the other fields of the stored object are unchanged) recovers.
    patch_spec(
        client,
        json!({"nodeGroups": [{
            "name": "numa",
            "nodeSelector": {"matchLabels": {POOL: pool}},
            "updater": {"kubelet": {"podResourcesDir": "/var/lib/kubelet/pod-resources"}},
        }]}),
    )
    .await;
    wait_condition(client, DEGRADED, "False", Some("AsExpected")).await;
    get_daemon_set(client, &ns, "tas-updater-numa").await;

    uninstall(client, &ns).await;
}

/// Applies the TopologyAwareScheduling CRD of `config/crd` without the per-group
/// `podResourcesDir` rule, as a CRD from before that rule.
async fn install_crd_without_group_rule(client: &Client) {
    let mut old = serde_json::to_value(tas_crd()).unwrap();
    let field = old
        .pointer_mut(GROUP_RULE)
        .and_then(Value::as_object_mut)
        .expect("the CRD has the per-group podResourcesDir field");
    assert!(field.remove("x-kubernetes-validations").is_some());
    apply_tas_crd(client, &old).await;
}
