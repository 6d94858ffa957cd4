//! The node simulator against the real API server: pods bound to simulated nodes run or
//! fail as the kubelet would decide, and the node's podresources API shows (and then
//! frees) their exclusive CPUs.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tas_nodesim::{Scenario, Simulator, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE};
use tas_podresources::v1::pod_resources_lister_client::PodResourcesListerClient;
use tas_podresources::v1::{self, ContainerResources};
use tas_testcluster::{
    NODE_SIM_LABEL, TestCluster, unique_name, unique_namespace, wait_for, wait_node_ready,
};

const TIMEOUT: Duration = Duration::from_secs(60);

fn shared() -> &'static TestCluster {
    TestCluster::shared().expect("the shared test cluster starts")
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// A Guaranteed single-container pod bound straight to `node`.
fn bound_pod(name: &str, node: &str, cpus: u32, memory: &str) -> Pod {
    let amounts = json!({ "cpu": cpus.to_string(), "memory": memory });
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { NODE_SIM_LABEL: "true" } },
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "app",
                "image": "registry.invalid/app:1",
                "resources": { "requests": amounts, "limits": amounts },
            }],
        },
    }))
    .expect("valid pod")
}

async fn wait_phase(pods: &Api<Pod>, name: &str, wanted: &str) -> Pod {
    wait_for(format!("pod {name} to be {wanted}"), TIMEOUT, || async {
        let pod = pods.get(name).await?;
        Ok::<_, kube::Error>((phase(&pod) == wanted).then_some(pod))
    })
    .await
    .unwrap()
}

/// A podresources client on one node's socket, dialling for every call (as a node
/// agent sees it after a reconnect).
struct PodResourcesClient(std::path::PathBuf);

impl PodResourcesClient {
    fn new(socket: impl Into<std::path::PathBuf>) -> Self {
        Self(socket.into())
    }

    async fn client(&self) -> PodResourcesListerClient<tonic::transport::Channel> {
        let channel = tas_podresources::connect_unix(&self.0)
            .await
            .expect("the podresources socket answers");
        PodResourcesListerClient::new(channel)
    }

    async fn list(&self) -> Result<v1::ListPodResourcesResponse, tonic::Status> {
        let mut client = self.client().await;
        Ok(client
            .list(v1::ListPodResourcesRequest {})
            .await?
            .into_inner())
    }

    async fn get_allocatable(&self) -> Result<v1::AllocatableResourcesResponse, tonic::Status> {
        let mut client = self.client().await;
        let request = v1::AllocatableResourcesRequest {};
        Ok(client
            .get_allocatable_resources(request)
            .await?
            .into_inner())
    }
}

/// The podresources `List` entry of container `app` of pod `name`, if listed.
/// The container `app` of pod `name` as `List` shows it, CPU ids sorted (the kubelet
/// lists a CPU set in no particular order).
async fn listed(podresources: &PodResourcesClient, name: &str) -> Option<ContainerResources> {
    let list = podresources.list().await.expect("List answers");
    let mut app = list
        .pod_resources
        .into_iter()
        .find(|p| p.name == name)
        .and_then(|p| p.containers.into_iter().find(|c| c.name == "app"))?;
    app.cpu_ids.sort_unstable();
    Some(app)
}

fn numa_nodes(memory: &v1::ContainerMemory) -> Vec<i64> {
    memory
        .topology
        .as_ref()
        .map(|t| t.nodes.iter().map(|n| n.id).collect())
        .unwrap_or_default()
}

async fn start(client: &Client, snn: &str, restricted: &str) -> (Simulator, tempfile::TempDir) {
    let yaml = format!(
        "nodes:
- name: {snn}
  topologyManagerPolicy: single-numa-node
  zones:
  - {{ count: 2, cpus: 4, memory: 8Gi }}
- name: {restricted}
  topologyManagerPolicy: restricted
  topologyManagerScope: pod
  zones:
  - {{ count: 2, cpus: 4, memory: 8Gi }}
"
    );
    let scenario = Scenario::from_yaml(&yaml).expect("valid scenario");
    let work_dir = tempfile::tempdir().expect("work dir");
    let simulator = Simulator::start(client.clone(), &scenario, work_dir.path())
        .await
        .expect("the simulator starts");
    (simulator, work_dir)
}

#[tokio::test]
async fn simulator_admits_rejects_and_frees_like_the_kubelet() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "nodesim").await.unwrap();
    let snn = unique_name("sim-snn");
    let restricted = unique_name("sim-rst");
    let (simulator, _work_dir) = start(&client, &snn, &restricted).await;
    wait_node_ready(&client, &snn, TIMEOUT).await.unwrap();

    let podresources = PodResourcesClient::new(simulator.socket_path(&snn));
    let mut allocatable = podresources.get_allocatable().await.expect("allocatable");
    allocatable.cpu_ids.sort_unstable();
    // CPU 8, on zone 0, is the reservation the static CPU manager needs.
    assert_eq!(allocatable.cpu_ids, [0, 1, 2, 3, 4, 5, 6, 7]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let create = |pod: Pod| {
        let pods = pods.clone();
        async move { pods.create(&PostParams::default(), &pod).await.unwrap() }
    };

    // Fits one zone: Running, its 3 exclusive CPUs and its memory on zone 0.
    create(bound_pod("fits", &snn, 3, "2Gi")).await;
    let running = wait_phase(&pods, "fits", "Running").await;
    let conditions: BTreeSet<String> = running
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.status == "True")
        .map(|c| c.type_)
        .collect();
    for wanted in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert!(
            conditions.contains(wanted),
            "{wanted} missing from {conditions:?}"
        );
    }
    let app = listed(&podresources, "fits").await.expect("fits is listed");
    assert_eq!(app.cpu_ids, [0, 1, 2], "zone 0 holds CPUs 0-3");
    assert_eq!(app.memory.len(), 1);
    assert_eq!(numa_nodes(&app.memory[0]), [0]);

    // 6 CPUs never fit one 4-CPU zone: single-numa-node rejects.
    create(bound_pod("too-wide", &snn, 6, "1Gi")).await;
    let failed = wait_phase(&pods, "too-wide", "Failed").await;
    let status = failed.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some(TOPOLOGY_AFFINITY_ERROR));
    let message = status.message.unwrap_or_default();
    assert!(message.contains(TOPOLOGY_AFFINITY_MESSAGE), "{message}");
    assert!(listed(&podresources, "too-wide").await.is_none());

    // The same pod under restricted on the other node: two zones are its narrowest fit
    // for CPUs and memory alike, so it runs across both.
    create(bound_pod("spans", &restricted, 6, "12Gi")).await;
    wait_phase(&pods, "spans", "Running").await;
    let other = PodResourcesClient::new(simulator.socket_path(&restricted));
    let spans = listed(&other, "spans").await.expect("spans is listed");
    assert_eq!(spans.cpu_ids.len(), 6);
    assert_eq!(numa_nodes(&spans.memory[0]), [0, 1]);

    // Deleting the running pod frees its CPUs: gone from List, and a 4-CPU pod gets the
    // whole of zone 0 again.
    pods.delete("fits", &DeleteParams::default()).await.unwrap();
    wait_for("fits to leave List", TIMEOUT, || async {
        Ok::<_, std::convert::Infallible>(
            listed(&podresources, "fits").await.is_none().then_some(()),
        )
    })
    .await
    .unwrap();
    create(bound_pod("after", &snn, 4, "2Gi")).await;
    wait_phase(&pods, "after", "Running").await;
    let after = listed(&podresources, "after")
        .await
        .expect("after is listed");
    assert_eq!(after.cpu_ids, [0, 1, 2, 3]);

    simulator.shutdown().await;
}

/// The `tas-nodesim` binary: creates the scenario's node, serves its socket and files,
/// admits a pod, says when it is ready and stops cleanly on SIGTERM.
#[tokio::test]
async fn tas_nodesim_binary_runs_a_scenario_until_sigterm() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "nodesim-bin").await.unwrap();
    let node = unique_name("sim-bin");
    let work_dir = tempfile::tempdir().unwrap();
    let scenario = work_dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        format!(
            "nodes:\n- name: {node}\n  topologyManagerPolicy: single-numa-node\n  zones:\n  - {{ count: 2, cpus: 2, memory: 4Gi, devices: {{ example.com/nic: 1 }} }}\n"
        ),
    )
    .unwrap();
    let nodes_dir = work_dir.path().join("nodes");

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tas-nodesim"))
        .arg("--scenario")
        .arg(&scenario)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .arg("--work-dir")
        .arg(&nodes_dir)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("tas-nodesim starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(TIMEOUT, lines.next_line())
        .await
        .expect("a ready line in time")
        .unwrap()
        .unwrap_or_default();
    assert_eq!(ready, "tas-nodesim ready: 1 nodes");

    let created = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .get(&node)
        .await
        .unwrap();
    let capacity = created.status.unwrap().capacity.unwrap();
    assert_eq!(capacity["cpu"].0, "4");
    assert_eq!(capacity["example.com/nic"].0, "2");
    let node_dir = nodes_dir.join(&node);
    let config = std::fs::read_to_string(node_dir.join("config.yaml")).unwrap();
    assert!(
        config.contains("topologyManagerPolicy: single-numa-node"),
        "{config}"
    );
    let online = std::fs::read_to_string(node_dir.join("sys/devices/system/node/online")).unwrap();
    assert_eq!(online.trim(), "0-1");

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &bound_pod("runs", &node, 2, "1Gi"))
        .await
        .unwrap();
    wait_phase(&pods, "runs", "Running").await;
    let podresources = PodResourcesClient::new(node_dir.join("pod-resources/kubelet.sock"));
    let app = listed(&podresources, "runs").await.expect("runs is listed");
    assert_eq!(app.cpu_ids, [0, 1]);

    let pid = child.id().expect("still running").to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(TIMEOUT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "tas-nodesim exited with {exit}");
}

/// A node removed at run time and added back under the same name on a smaller machine:
/// its Node goes and comes back with the new machine's allocatable, the referee starts
/// its managers afresh (nothing of the old node's allocations is left), a pod still
/// bound to the name is handled again as a registering kubelet does, and the
/// podresources socket answers from the new managers.
#[tokio::test]
async fn a_node_removed_and_added_back_starts_with_fresh_managers() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "nodesim-readd").await.unwrap();
    let name = unique_name("sim-readd");
    let other = unique_name("sim-stay");
    let (simulator, _work_dir) = start(&client, &name, &other).await;
    wait_node_ready(&client, &name, TIMEOUT).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    pods.create(&PostParams::default(), &bound_pod("old", &name, 4, "2Gi"))
        .await
        .unwrap();
    wait_phase(&pods, "old", "Running").await;
    let old_uid = nodes.get(&name).await.unwrap().metadata.uid;

    simulator.remove_node(&name).await.expect("node removed");
    assert!(simulator.node(&name).is_none());
    assert_eq!(
        simulator.referee().ping().await.unwrap(),
        1,
        "only {other} is left"
    );
    wait_for(format!("Node {name} deleted"), TIMEOUT, || async {
        Ok::<_, kube::Error>(nodes.get_opt(&name).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    assert!(
        tas_podresources::connect_unix(&simulator.socket_path(&name))
            .await
            .is_err(),
        "the removed node's podresources socket is closed"
    );

    // Back with one zone of 6 CPUs instead of two of 4.
    let smaller = Scenario::from_yaml(&format!(
        "nodes:\n- name: {name}\n  topologyManagerPolicy: single-numa-node\n  zones:\n  - {{ cpus: 6, memory: 8Gi }}\n"
    ))
    .unwrap();
    simulator
        .add_node(&smaller.nodes()[0])
        .await
        .expect("node added back");
    assert!(
        simulator.add_node(&smaller.nodes()[0]).await.is_err(),
        "added once only"
    );
    let node = nodes.get(&name).await.unwrap();
    assert_ne!(node.metadata.uid, old_uid, "a new Node object");
    let allocatable = node.status.unwrap().allocatable.unwrap();
    assert_eq!(allocatable["cpu"].0, "6");
    wait_node_ready(&client, &name, TIMEOUT).await.unwrap();

    // The pod still bound to the name is admitted by the new managers, on the only zone.
    let podresources = PodResourcesClient::new(simulator.socket_path(&name));
    let old = wait_for("the bound pod handled by the new node", TIMEOUT, || async {
        Ok::<_, std::convert::Infallible>(listed(&podresources, "old").await)
    })
    .await
    .unwrap();
    assert_eq!(old.cpu_ids.len(), 4);
    let state = simulator.referee().state(&name).await.unwrap();
    assert_eq!(
        state.zones.len(),
        1,
        "the new machine's managers: {state:?}"
    );
    // 2 CPUs are left on the zone: a pod of 4 no longer fits it.
    pods.create(&PostParams::default(), &bound_pod("new", &name, 4, "1Gi"))
        .await
        .unwrap();
    let failed = wait_phase(&pods, "new", "Failed").await;
    assert_eq!(
        failed.status.unwrap().reason.as_deref(),
        Some(TOPOLOGY_AFFINITY_ERROR)
    );
    simulator.shutdown().await;
}
