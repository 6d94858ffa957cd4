//! `paused: true` keeps a manual change and says so; moving `spec.namespace` prunes
//! the old operands; a namespace that existed before the stack is never deleted.

use crate::harness::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tas_api::tas::status::condition_type::{AVAILABLE, PROGRESSING};
use tas_operator::InProcess;
use tas_operator::desired::{MANAGED_BY_LABEL, SCHEDULER_DEPLOYMENT, updater_daemonset_name};
use tas_testcluster::{unique_name, unique_namespace, wait_for};

const POOL: &str = "e2e.tas.dev/pool";

pub async fn scenario(client: &Client, operator: &InProcess) {
    // The admin created the namespace before the stack.
    let ns = unique_namespace(client, "tas-paused").await.unwrap();
    let pool = unique_name("pool");
    nodes(client, "paused", 1, &[(POOL, &pool)]).await;
    create(client, &with_groups(&ns, &[("paused", POOL, &pool)])).await;
    wait_condition(client, AVAILABLE, "True", None).await;
    let adopted = namespace_alive(client, &ns).await.unwrap();
    assert!(
        label(&adopted, MANAGED_BY_LABEL).is_none()
            && label(&adopted, "pod-security.kubernetes.io/enforce").is_none(),
        "a namespace the operator did not create is never labelled"
    );

    patch_spec(client, json!({ "paused": true })).await;
    let cr = wait_condition(client, PROGRESSING, "False", Some("Paused")).await;
    let message = &condition(&cr, PROGRESSING).unwrap().message;
    assert!(message.contains("spec.paused"), "{message}");

    // A manual scale-up is kept while paused. The operator has seen it once the status
    // reports two scheduler replicas.
    let reconciles = operator.metrics.reconcile_count();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments
        .patch(
            SCHEDULER_DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 2 } })),
        )
        .await
        .unwrap();
    wait_status(client, "the status to report 2 scheduler replicas", |cr| {
        cr.status
            .as_ref()
            .and_then(|s| s.scheduler.as_ref())
            .is_some_and(|s| s.replicas == 2)
    })
    .await;
    assert!(operator.metrics.reconcile_count() > reconciles);
    let replicas = deployments
        .get(SCHEDULER_DEPLOYMENT)
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas;
    assert_eq!(replicas, Some(2), "a paused operator reverts nothing");
    // Available is computed as usual while paused.
    wait_condition(client, AVAILABLE, "True", None).await;

    // Unpausing restores the declared state.
    patch_spec(client, json!({ "paused": false })).await;
    wait_for("the scheduler back at 1 replica", TIMEOUT, || async {
        let d = deployments.get(SCHEDULER_DEPLOYMENT).await?;
        Ok::<_, kube::Error>((d.spec.and_then(|s| s.replicas) == Some(1)).then_some(()))
    })
    .await
    .unwrap();
    let cr = wait_status(client, "Progressing no longer Paused", |cr| {
        condition(cr, PROGRESSING).is_some_and(|c| c.reason != "Paused")
    })
    .await;
    assert!(condition(&cr, AVAILABLE).is_some());

    // Moving the operands: the old ones are pruned, the pre-existing namespace is kept
    // as it was.
    let moved = unique_name("tas-moved");
    patch_spec(client, json!({ "namespace": moved })).await;
    get_daemon_set(client, &moved, &updater_daemonset_name("paused")).await;
    let old = deployments.clone();
    wait_for(
        "the operands in the old namespace to be pruned",
        TIMEOUT,
        || async {
            Ok::<_, kube::Error>(
                old.get_opt(SCHEDULER_DEPLOYMENT)
                    .await?
                    .is_none()
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap();
    let kept = namespace_alive(client, &ns).await.expect("kept");
    assert_eq!(
        (kept.metadata.labels, kept.metadata.annotations),
        (adopted.metadata.labels, adopted.metadata.annotations),
        "the pre-existing namespace is unchanged"
    );
    wait_condition(client, AVAILABLE, "True", None).await;

    uninstall(client, &moved).await;
    assert!(
        namespace_alive(client, &ns).await.is_some(),
        "a namespace the operator did not create is kept"
    );
}
