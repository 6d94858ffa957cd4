//! `kubectl tas` on the running stack: a pod no NUMA zone can hold, left Pending, and the
//! plugin's `nodes` and `explain` output (its library, the same code as the binary),
//! which reads the scheduler's reservations through the API server's service proxy from
//! the scheduler process the pod runner started.

use super::StackError;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use kubectl_tas::cli::{Cli, run};
use serde_json::json;
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::nrt::{TopologyManagerConfig, TopologyManagerPolicy};
use tas_testcluster::TestCluster;

/// Creates a Guaranteed pod for `scheduler` that only nodes under the
/// `single-numa-node` policy may take (required node affinity by name) and that asks
/// one CPU more than their largest NUMA zone: each of those nodes has room for it as a
/// whole, none in one zone, so it stays Pending for a NUMA reason. Returns its name.
pub async fn create_oversized_pod(
    client: &Client,
    namespace: &str,
    scheduler: &str,
) -> Result<String, StackError> {
    let nrts: Api<NodeResourceTopology> = Api::all(client.clone());
    let single_zone: Vec<NodeResourceTopology> = nrts
        .list(&ListParams::default())
        .await
        .map_err(StackError::ctx("listing NodeResourceTopology objects"))?
        .items
        .into_iter()
        .filter(|n| {
            TopologyManagerConfig::from_nrt(n)
                .is_ok_and(|c| c.policy == TopologyManagerPolicy::SingleNumaNode)
        })
        .collect();
    let largest = single_zone
        .iter()
        .flat_map(|n| &n.zones)
        .flat_map(|z| &z.resources)
        .filter(|r| r.name == "cpu")
        .filter_map(|r| r.allocatable.value().ok())
        .max()
        .unwrap_or(0);
    let nodes: Vec<String> = single_zone.iter().map(|n| n.name_any()).collect();
    let cpu = (largest + 1).to_string();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": "too-wide-"},
        "spec": {
            "schedulerName": scheduler,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}},
            "containers": [{"name": "app", "image": "app", "resources": {
                "requests": {"cpu": cpu, "memory": "1Gi"},
                "limits": {"cpu": cpu, "memory": "1Gi"}}}]
        }
    }))
    .map_err(StackError::ctx("the oversized pod"))?;
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let created = api
        .create(&PostParams::default(), &pod)
        .await
        .map_err(StackError::ctx("creating the oversized pod"))?;
    Ok(created.name_any())
}

/// The note of the pod's first `FailedScheduling` Event, once there is one.
pub async fn wait_failed_scheduling(
    client: &Client,
    namespace: &str,
    pod: &str,
    timeout: Duration,
) -> Result<String, StackError> {
    tas_testcluster::wait_event_note(client, namespace, pod, "FailedScheduling", timeout)
        .await
        .map_err(StackError::ctx(
            "waiting for the pod's FailedScheduling Event",
        ))
}

/// `kubectl tas ARGS` against `cluster` (its kubeconfig); the text it prints.
pub async fn kubectl_tas(cluster: &TestCluster, args: &[&str]) -> Result<String, StackError> {
    let kubeconfig = cluster.kubeconfig_path();
    // The scheduler's debug endpoint is shown only a token given for it (here the
    // admin's), never the kubeconfig's credentials.
    let token = tempfile::NamedTempFile::new().map_err(StackError::ctx("a token file"))?;
    std::fs::write(
        token.path(),
        cluster
            .admin_token()
            .map_err(StackError::ctx("the admin token"))?,
    )
    .map_err(StackError::ctx("writing the token file"))?;
    let token_path = token.path().to_string_lossy().into_owned();
    let mut argv = vec!["kubectl-tas", "--kubeconfig"];
    let path = kubeconfig.to_string_lossy();
    argv.push(&path);
    argv.extend_from_slice(&["--scheduler-token-file", &token_path]);
    argv.extend_from_slice(args);
    let cli = <Cli as clap::Parser>::try_parse_from(argv)
        .map_err(StackError::ctx("kubectl tas arguments"))?;
    run(&cli)
        .await
        .map_err(StackError::ctx(&format!("kubectl tas {}", args.join(" "))))
}
