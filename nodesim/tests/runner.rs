//! The pod runner on a real API server, with bad input: an image it does not know, a
//! missing ConfigMap key, an unsupported volume type. Each pod shows a waiting reason
//! naming the problem, as the kubelet would, and the runner carries on.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tas_nodesim::runner::{Images, Runner, RunnerConfig};
use tas_nodesim::{Scenario, Simulator};
use tas_testcluster::{TestCluster, unique_name, unique_namespace, wait_for};

/// The waiting reason and message of the pod's first container, once it has one.
async fn waiting(pods: &Api<Pod>, name: &str) -> (String, String) {
    wait_for(
        format!("a waiting reason on {name}"),
        Duration::from_secs(60),
        || async {
            let pod = pods.get(name).await?;
            let waiting = pod
                .status
                .and_then(|s| s.container_statuses)
                .and_then(|c| c.into_iter().next())
                .and_then(|c| c.state?.waiting)
                .filter(|w| w.reason.as_deref() != Some("ContainerCreating"));
            Ok::<_, kube::Error>(
                waiting.map(|w| (w.reason.unwrap_or_default(), w.message.unwrap_or_default())),
            )
        },
    )
    .await
    .expect("a waiting reason")
}

/// A simulated node of one 2-CPU zone and a runner for it whose `tas-updater` image runs
/// `binary`: the node's name, its scenario, the work directory, the simulator and the
/// runner.
async fn one_node(
    cluster: &TestCluster,
    client: &Client,
    prefix: &str,
    binary: &str,
) -> (String, Scenario, tempfile::TempDir, Simulator, Runner) {
    let node = unique_name(prefix);
    let scenario = Scenario::from_yaml(&format!(
        "nodes:\n- name: {node}\n  topologyManagerPolicy: none\n  zones:\n  - {{ cpus: 2, memory: 1Gi }}\n"
    ))
    .expect("scenario");
    let work = tempfile::tempdir().unwrap();
    let sim = Simulator::start(client.clone(), &scenario, work.path())
        .await
        .expect("simulator");
    let runner = Runner::start(
        client.clone(),
        RunnerConfig {
            api_server: cluster.api_server_addr().unwrap(),
            images: Images::new(BTreeMap::from([(
                "tas-updater".to_owned(),
                PathBuf::from(binary),
            )])),
            pids_file: Some(cluster.watchdog_pids_file()),
            nodes: vec![(node.clone(), sim.node_dir(&node))],
            services: Vec::new(),
            api_routes: Vec::new(),
        },
    )
    .await
    .expect("runner");
    (node, scenario, work, sim, runner)
}

#[tokio::test]
async fn bad_pod_specs_become_waiting_reasons() {
    let cluster = TestCluster::shared().expect("test cluster");
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "runner").await.unwrap();
    // Never started: every pod here fails before its process would.
    let (node, _scenario, _work, _sim, runner) =
        one_node(cluster, &client, "runner", "/bin/true").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "cfg"}, "data": {"a": "1"}})).unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = |name: &str, container: serde_json::Value, volumes: serde_json::Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": node, "automountServiceAccountToken": false,
                     "containers": [container], "volumes": volumes}}))
        .unwrap()
    };
    for p in [
        pod(
            "unknown-image",
            json!({"name": "c", "image": "r.invalid/tas-frobnicator:1"}),
            json!([]),
        ),
        pod(
            "missing-key",
            json!({"name": "c", "image": "r.invalid/tas-updater:1",
            "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope"}}}]}),
            json!([]),
        ),
        pod(
            "nfs",
            json!({"name": "c", "image": "r.invalid/tas-updater:1",
            "volumeMounts": [{"name": "share", "mountPath": "/share"}]}),
            json!([{"name": "share", "nfs": {"server": "nfs.invalid", "path": "/"}}]),
        ),
    ] {
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
    let (reason, message) = waiting(&pods, "unknown-image").await;
    assert_eq!(reason, "ErrImagePull");
    assert!(message.contains("tas-frobnicator"), "{message}");
    let (reason, message) = waiting(&pods, "missing-key").await;
    assert_eq!(reason, "CreateContainerConfigError");
    assert!(
        message.contains("couldn't find key nope in ConfigMap"),
        "{message}"
    );
    let (reason, message) = waiting(&pods, "nfs").await;
    assert_eq!(reason, "CreateContainerConfigError");
    assert!(message.contains("type nfs is not supported"), "{message}");
    assert!(runner.processes().is_empty(), "nothing started");
    runner.shutdown().await;
}

/// A node whose machine goes: the runner kills its pods' processes at once and starts
/// nothing bound to it; the node back, the runner runs the pods still bound to it.
#[tokio::test]
async fn a_removed_node_runs_nothing_until_it_is_added_back() {
    let cluster = TestCluster::shared().expect("test cluster");
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "runner-nodes").await.unwrap();
    let (node, scenario, _work, sim, runner) =
        one_node(cluster, &client, "runner-gone", "/bin/sleep").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let sleeper: Pod = serde_json::from_value(json!({"metadata": {"name": "sleeper"},
        "spec": {"nodeName": node, "automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": "r.invalid/tas-updater:1", "args": ["600"]}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &sleeper).await.unwrap();
    let pid = wait_for("the sleeper runs", Duration::from_secs(60), || async {
        Ok::<_, std::convert::Infallible>(runner.pid(&ns, "sleeper"))
    })
    .await
    .unwrap();

    runner.remove_node(&node).await;
    sim.remove_node(&node).await.expect("node removed");
    assert_eq!(runner.pid(&ns, "sleeper"), None);
    wait_for("the process gone", Duration::from_secs(10), || async {
        Ok::<_, std::convert::Infallible>(
            (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(()),
        )
    })
    .await
    .expect("the node's process is killed");

    sim.add_node(&scenario.nodes()[0]).await.expect("node back");
    runner
        .add_node(&node, &sim.node_dir(&node))
        .await
        .expect("runner takes the node");
    let again = wait_for(
        "the sleeper runs again",
        Duration::from_secs(60),
        || async { Ok::<_, std::convert::Infallible>(runner.pid(&ns, "sleeper")) },
    )
    .await
    .unwrap();
    assert_ne!(again, pid, "a new process");
    runner.shutdown().await;
}
