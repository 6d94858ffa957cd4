//! Namespace ownership needs proof the namespace's owner cannot forge (issue 29,
//! finding 6): a pre-existing namespace that carries the operator's creation mark,
//! `tas.dev/created-by-operator=true`, set by whoever may annotate it, is not adopted.
//! The operator (here with an admin's rights, so that only its own judgement stops it)
//! leaves its labels and annotations exactly as they are, never relabels it
//! `privileged`, and does not delete it on uninstall: it did not create it, and the
//! object's status holds no record of its uid.

use crate::harness::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tas_api::tas::status::condition_type::AVAILABLE;
use tas_operator::reconcile::apply::CREATED_BY_ANNOTATION;
use tas_testcluster::unique_name;

/// Runs the scenario; returns the marked namespace, kept for the attack scenario (the
/// admission policies, installed later, must refuse the operator's token there too).
pub async fn scenario(client: &Client) -> String {
    let ns = unique_name("tas-adopt");
    let marked: Namespace = serde_json::from_value(json!({
        "metadata": {
            "name": ns,
            "labels": {"team": "tenant", "pod-security.kubernetes.io/enforce": "baseline"},
            "annotations": {CREATED_BY_ANNOTATION: "true", "example.test/owner": "tenant"},
        },
    }))
    .unwrap();
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .create(&PostParams::default(), &marked)
        .await
        .unwrap();
    let snapshot = |ns: &Namespace| (ns.metadata.labels.clone(), ns.metadata.annotations.clone());
    let original = snapshot(&namespaces.get(&ns).await.unwrap());

    let label = ("tas.dev/adoption", "marked");
    nodes(client, "adopt", 1, &[label]).await;
    create(client, &with_groups(&ns, &[("adopt", label.0, label.1)])).await;
    // Applied, operands included: the namespace was left as it is (with an admin's
    // rights the operands are written there anyway; baseline keeps their pods out).
    let cr = wait_status(
        client,
        "the operands applied in the marked namespace",
        |cr| {
            cr.status.as_ref().is_some_and(|s| {
                s.observed_generation == cr.metadata.generation
                    && s.related_objects.iter().any(|o| o.kind == "DaemonSet")
            }) && condition(cr, AVAILABLE).is_some()
        },
    )
    .await;
    let status = cr.status.unwrap_or_default();
    assert!(
        status.created_objects.iter().all(|o| o.name != ns),
        "the marked namespace is recorded as created: {:?}",
        status.created_objects
    );
    assert_eq!(
        snapshot(&namespaces.get(&ns).await.unwrap()),
        original,
        "the operator adopted a namespace it did not create, because of its annotation"
    );

    uninstall(client, &ns).await;
    let after = namespace_alive(client, &ns)
        .await
        .expect("the marked namespace the operator did not create is not deleted");
    assert_eq!(snapshot(&after), original, "labels or annotations changed");
    ns
}
