//! A real kubelet on a real container runtime joins a test cluster
//! ([`tas_testcluster::real_node`]): the node becomes Ready with the fake 2-NUMA
//! layout, a Guaranteed 1-CPU pod runs pinned to CPU 1 (NUMA node 1), and stopping the
//! node leaves the host as it was.
//!
//! Opt-in: it needs root, the node runtime (`testcluster/tools/install-node-runtime.sh`),
//! the kubelet (`TAS_TOOLS_ONLY="k8s etcd kwok kubelet" testcluster/tools/build.sh`) and
//! the sandbox image (`TAS_PAUSE_IMAGE`, from `testcluster/tools/build-pause.sh`);
//! `make real-node-test` provides all of them. Without one it says which and why, and
//! passes.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use tas_testcluster::real_node::{HostState, RealNode, RealNodeOptions, guaranteed_pause_pod};
use tas_testcluster::{ClusterOptions, TestCluster, unique_namespace, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_node_pins_a_guaranteed_pod_and_restores_the_host() {
    let cluster = TestCluster::start(ClusterOptions {
        controller_manager: true,
        kube_scheduler: true,
        ..ClusterOptions::default()
    })
    .expect("the test cluster starts");
    let before = HostState::record().expect("reading the host state");

    let started = Instant::now();
    let node = match RealNode::start(&cluster, RealNodeOptions::new("real-node-1")).await {
        Ok(node) => node,
        Err(e) if e.is_missing_prerequisite() => {
            eprintln!("\n*** SKIPPED real_node: a prerequisite is missing: {e} ***\n");
            return;
        }
        Err(e) => panic!("the real node starts: {e}"),
    };
    eprintln!("real node Ready {:.1?} after start", started.elapsed());

    let kubelet_log = std::fs::read_to_string(node.kubelet_log()).expect("the kubelet's log");
    assert!(
        kubelet_log.contains("\"NumNUMANodes\":2")
            && kubelet_log.contains("\"1\":{\"NUMANodeID\":1,"),
        "the kubelet's CPU manager sees 2 NUMA nodes, CPU 1 on node 1 (its \"Detected CPU topology\" line)"
    );

    let client = cluster.client().await.expect("a client");
    let ns = unique_namespace(&client, "real-node")
        .await
        .expect("a namespace");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = guaranteed_pause_pod("pinned", node.name(), 1);
    let created = Instant::now();
    let pod = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let uid = pod.metadata.uid.clone().expect("a uid");
    wait_for("the pod to be Running", TIMEOUT, || async {
        let pod = pods.get("pinned").await?;
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        Ok::<_, kube::Error>((phase == "Running").then_some(()))
    })
    .await
    .expect("the pod runs");
    eprintln!("pod Running {:.1?} after create", created.elapsed());

    let state_path = node.kubelet_root().join("cpu_manager_state");
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&state_path).expect("the CPU manager's state"),
    )
    .expect("JSON");
    assert_eq!(
        state["entries"][&uid]["c"], "1",
        "the container is pinned on CPU 1: {state}"
    );

    let container_id = pods
        .get("pinned")
        .await
        .expect("the pod")
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.container_id)
        .expect("a container id");
    let container_id = container_id.trim_start_matches("containerd://");
    let allowed = cpus_allowed_in_cgroup(&format!("/pod{uid}/{container_id}"));
    assert!(
        !allowed.is_empty() && allowed.iter().all(|cpus| cpus == "1"),
        "the container's processes may run on CPU 1 only: {allowed:?}"
    );

    let dir = node.dir().to_path_buf();
    let stopped = Instant::now();
    node.stop();
    eprintln!(
        "real node stopped and host restored in {:.1?}",
        stopped.elapsed()
    );
    let after = HostState::record().expect("reading the host state");
    assert_eq!(
        before.differences(&after),
        Vec::<String>::new(),
        "host state restored"
    );
    let left = processes_mentioning(&dir.to_string_lossy());
    assert!(left.is_empty(), "processes of the node left: {left:?}");
}

/// `Cpus_allowed_list` of every process whose cgroup path contains `needle` (cgroupfs
/// driver: `.../kubepods/pod<uid>/<container id>`).
fn cpus_allowed_in_cgroup(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("cgroup")).is_ok_and(|c| c.contains(needle))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_owned())
        })
        .collect()
}

/// Processes whose command line mentions `needle` (the node's directory: containerd,
/// the kubelet and the shims all name it).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}
