//! No process of a test cluster outlives it: neither after `Drop`, nor when the test
//! process exits without dropping it (the shared cluster, a crash).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tas_testcluster::{ClusterOptions, KEEP_CLUSTER_ENV, TestCluster, wait_for};

/// Set in the child process [`watchdog_cleans_up_after_the_test_process_exits`] runs.
const LEAKY_HELPER_ENV: &str = "TAS_E2E_LEAKY_HELPER";

/// Alive: the process exists and is not a zombie waiting to be reaped (orphans are
/// reaped by whatever adopted them, possibly late).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        !status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
    })
}

fn keeping_dirs() -> bool {
    std::env::var(KEEP_CLUSTER_ENV).is_ok_and(|v| v == "1")
}

#[test]
fn dropping_a_private_cluster_stops_its_processes_and_removes_its_dir() {
    let cluster = TestCluster::start(ClusterOptions::default()).unwrap();
    let pids = cluster.pids();
    let dir = cluster.base_dir().to_path_buf();
    assert_eq!(
        pids.len(),
        3,
        "etcd, kube-apiserver and the watchdog: {pids:?}"
    );
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");

    drop(cluster);
    let survivors: Vec<u32> = pids.into_iter().filter(|&p| alive(p)).collect();
    assert!(
        survivors.is_empty(),
        "still running after drop: {survivors:?}"
    );
    assert!(
        keeping_dirs() || !dir.exists(),
        "{} still exists",
        dir.display()
    );
}

/// Runs [`leaky_cluster_helper`] in a child test process, which starts a cluster and
/// exits without dropping it, then checks the watchdog stops everything.
#[tokio::test]
async fn watchdog_cleans_up_after_the_test_process_exits() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "lifecycle::leaky_cluster_helper"])
        .args(["--ignored", "--nocapture", "--test-threads=1"])
        .env(LEAKY_HELPER_ENV, "1")
        .env_remove(KEEP_CLUSTER_ENV)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        // libtest prints "test <name> ... " on the same line first.
        .find_map(|l| l.split_once("LEAKED ").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            let stderr = String::from_utf8_lossy(&output.stderr);
            panic!("the helper reported no cluster:\n{stdout}\n{stderr}")
        });
    let (pids, dir) = line.split_once(' ').unwrap();
    let pids: Vec<u32> = pids.split(',').map(|p| p.parse().unwrap()).collect();
    let dir = PathBuf::from(dir);

    wait_for(
        "the watchdog to clean up",
        Duration::from_secs(20),
        || async {
            let survivors: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
            let done = survivors.is_empty() && !dir.exists();
            Ok::<_, String>(done.then_some(()))
        },
    )
    .await
    .unwrap();
}

/// Not a test of its own: started by [`watchdog_cleans_up_after_the_test_process_exits`].
#[test]
#[ignore = "helper process of watchdog_cleans_up_after_the_test_process_exits"]
fn leaky_cluster_helper() {
    if std::env::var_os(LEAKY_HELPER_ENV).is_none() {
        return;
    }
    let cluster = TestCluster::start(ClusterOptions::default()).unwrap();
    let pids: Vec<String> = cluster.pids().iter().map(u32::to_string).collect();
    println!("LEAKED {} {}", pids.join(","), cluster.base_dir().display());
    // Exit the way a process with the cluster in a static does: without any Drop.
    std::process::exit(0);
}

#[tokio::test]
async fn a_restarted_apiserver_serves_again_with_its_data() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let mut cluster = TestCluster::start(ClusterOptions::default()).expect("private cluster");
    let client = cluster.client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "before"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let old_pids = cluster.pids();
    cluster
        .restart(tas_testcluster::Component::KubeApiserver)
        .await
        .expect("restarted");
    assert_ne!(cluster.pids(), old_pids, "a new kube-apiserver process");
    // A client made before the restart reconnects; the data survived (etcd kept running).
    wait_for(
        "the ConfigMap through the restarted server",
        Duration::from_secs(30),
        || async { Ok::<_, kube::Error>(cms.get_opt("before").await.ok().flatten()) },
    )
    .await
    .unwrap();
}
