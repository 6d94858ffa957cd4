//! The node agents' namespace is the installer's (`--updater-namespace`): while it does
//! not exist the object is `Degraded` with `UpdaterNamespaceMissing`, naming it, and
//! nothing of the agents is written anywhere else; once the installer creates it the
//! operator carries on by itself (a retry, not an edit of the object) and the agents run
//! there, the scheduler in `spec.namespace`, which the operator creates `restricted`.

use crate::harness::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tas_api::tas::status::condition_type::{AVAILABLE, DEGRADED};
use tas_operator::desired::managed_selector;
use tas_operator::telemetry::{Otlp, OtlpSettings};
use tas_testcluster::unique_name;

const POOL: &str = "e2e.tas.dev/agents-apart";

pub async fn scenario(client: &Client) {
    let agents = unique_name("tas-agents");
    let ns = unique_name("tas-sched");
    let operator = start_operator_as(
        client.clone(),
        Otlp::new(OtlpSettings::default()),
        None,
        Some(&agents),
    );
    nodes(client, "agents-apart", 1, &[(POOL, "yes")]).await;
    create(client, &with_groups(&ns, &[("apart", POOL, "yes")])).await;

    let cr = wait_condition(client, DEGRADED, "True", Some("UpdaterNamespaceMissing")).await;
    let message = &condition(&cr, DEGRADED).unwrap().message;
    assert!(message.contains(&agents), "{message}");
    let daemon_sets = Api::<DaemonSet>::all(client.clone())
        .list(&ListParams::default().labels(&managed_selector(STACK)))
        .await
        .unwrap();
    assert!(
        daemon_sets.items.is_empty(),
        "agents written although their namespace is missing: {:?}",
        daemon_sets
            .items
            .iter()
            .map(|d| &d.metadata)
            .collect::<Vec<_>>()
    );

    // The installer creates it; no change to the object.
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {
            "name": agents,
            "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
        },
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    wait_condition(client, AVAILABLE, "True", Some("AsExpected")).await;
    get_daemon_set(client, &agents, "tas-updater-apart").await;
    get_deployment(client, &ns).await;
    let created = namespace_alive(client, &ns)
        .await
        .expect("spec.namespace created");
    assert_eq!(
        created.metadata.labels.unwrap_or_default()["pod-security.kubernetes.io/enforce"],
        "restricted",
        "only the scheduler runs in spec.namespace"
    );

    uninstall(client, &ns).await;
    operator
        .stop(TIMEOUT)
        .await
        .expect("the operator stops cleanly");
    let left = Api::<DaemonSet>::namespaced(client.clone(), &agents)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        left.items
            .iter()
            .all(|d| d.metadata.deletion_timestamp.is_some()),
        "uninstall leaves the agents"
    );
    assert!(
        namespace_alive(client, &agents).await.is_some(),
        "the installer's namespace is never deleted by the operator"
    );
}
