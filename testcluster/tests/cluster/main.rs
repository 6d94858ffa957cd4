//! Integration tests of the harness against a real control plane.
//!
//! All tests but the lifecycle ones share one cluster (`TestCluster::shared()`, every
//! component running) and keep to their own namespace and nodes; see the crate README.

mod fault_proxy;
mod lifecycle;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tas_testcluster::{
    FakeNode, NODE_SIM_LABEL, TestCluster, create_fake_node, unique_name, unique_namespace,
    wait_for,
};

/// Label tying a test's pods to the fake nodes it created.
const GROUP_LABEL: &str = "e2e.tas.dev/group";
const TIMEOUT: Duration = Duration::from_secs(60);

fn shared() -> &'static TestCluster {
    TestCluster::shared().expect("the shared test cluster starts")
}

/// Creates `n` fake nodes labelled `GROUP_LABEL=group` and returns their names.
async fn fake_nodes(client: &Client, group: &str, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    for _ in 0..n {
        let node = FakeNode::new(unique_name(group)).label(GROUP_LABEL, group);
        create_fake_node(client, &node).await.expect("node created");
        names.push(node.name);
    }
    names
}

/// A single-container pod spec pinned to the nodes of `group`.
fn pod_spec(group: &str) -> serde_json::Value {
    json!({
        "nodeSelector": { GROUP_LABEL: group },
        "containers": [{ "name": "app", "image": "registry.invalid/app:1" }],
    })
}

fn pod(name: &str, group: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "spec": pod_spec(group),
    }))
    .expect("valid pod")
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn node_name(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

#[tokio::test]
async fn deployment_runs_on_kwok_nodes() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "deployment-runs").await.unwrap();
    let nodes: BTreeSet<String> = fake_nodes(&client, &ns, 2).await.into_iter().collect();

    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 3,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": pod_spec(&ns),
            },
        },
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait_for("3 Running pods on the test's nodes", TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await?;
        let running = list
            .items
            .iter()
            .filter(|p| phase(p) == "Running")
            .filter(|p| node_name(p).is_some_and(|n| nodes.contains(&n)))
            .count();
        Ok::<_, kube::Error>((running == 3).then_some(()))
    })
    .await
    .unwrap();
    wait_for(
        "the Deployment to report 3 available replicas",
        TIMEOUT,
        || async {
            let status = deployments.get("web").await?.status.unwrap_or_default();
            Ok::<_, kube::Error>((status.available_replicas == Some(3)).then_some(()))
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn default_scheduler_binds_a_pod() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "default-scheduler")
        .await
        .unwrap();
    let nodes = fake_nodes(&client, &ns, 1).await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &pod("solo", &ns, json!({})))
        .await
        .unwrap();
    let bound = wait_for("pod solo to be bound", TIMEOUT, || async {
        Ok::<_, kube::Error>(node_name(&pods.get("solo").await?))
    })
    .await
    .unwrap();
    assert_eq!(bound, nodes[0]);
    let pod = pods.get("solo").await.unwrap();
    assert_eq!(
        pod.spec.unwrap().scheduler_name.as_deref(),
        Some("default-scheduler")
    );
}

/// The kwok convention: pods labelled `tas.dev/node-sim=true` stay Pending after
/// binding (the node simulator owns them) while other pods on the same node run.
#[tokio::test]
async fn kwok_leaves_node_sim_pods_alone() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "node-sim").await.unwrap();
    fake_nodes(&client, &ns, 1).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    let simulated = pod("simulated", &ns, json!({ NODE_SIM_LABEL: "true" }));
    pods.create(&PostParams::default(), &simulated)
        .await
        .unwrap();
    wait_for("pod simulated to be bound", TIMEOUT, || async {
        Ok::<_, kube::Error>(node_name(&pods.get("simulated").await?))
    })
    .await
    .unwrap();

    // Created after the simulated pod is bound, so once kwok has run this one it has
    // also seen the simulated one.
    pods.create(&PostParams::default(), &pod("plain", &ns, json!({})))
        .await
        .unwrap();
    wait_for("pod plain to be Running", TIMEOUT, || async {
        let running = phase(&pods.get("plain").await?) == "Running";
        Ok::<_, kube::Error>(running.then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(phase(&pods.get("simulated").await.unwrap()), "Pending");
}
