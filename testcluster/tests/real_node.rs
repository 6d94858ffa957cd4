//! A real kubelet on a real container runtime joins a test cluster
//! ([`tas_testcluster::real_node`]): the node becomes Ready with the fake 2-NUMA
//! layout, the device plugin's device and 1900m of allocatable CPU; the `kubernetes`
//! Service reaches the API server through kube-proxy's rules; a Guaranteed 1-CPU pod
//! runs pinned to CPU 1 (NUMA node 1); and stopping the node leaves the host as it was.
//!
//! It needs root, the node runtime (`testcluster/tools/install-node-runtime.sh`), the
//! kubelet, kube-proxy and device plugin (`TAS_TOOLS_ONLY="k8s etcd kwok kubelet"
//! testcluster/tools/build.sh`) and the sandbox image (`TAS_PAUSE_IMAGE`, from
//! `testcluster/tools/build-pause.sh`); `make test` and `make real-node-test` provide
//! all of them. Without one it says which and why, and passes.

use std::io::Write as _;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::PostParams;
use tas_testcluster::real_node::{
    DeviceOptions, HostState, RealNodeCluster, RealNodeOptions, guaranteed_pause_pod,
};
use tas_testcluster::{unique_namespace, wait_for, wait_pod_running};

const TIMEOUT: Duration = Duration::from_secs(60);

/// One real node at a time: nodes share the host's `kubepods` cgroups and sysctls, and
/// each test compares the host with what it recorded before its node.
static ONE_NODE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Set for the child process [`leaky_real_node_helper`] runs in.
const LEAKY_HELPER_ENV: &str = "TAS_REAL_NODE_LEAKY_HELPER";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_node_pins_a_guaranteed_pod_and_restores_the_host() {
    let _one = ONE_NODE.lock().await;
    let before = HostState::record().expect("reading the host state");
    let options = RealNodeOptions {
        kube_proxy: true,
        device: Some(DeviceOptions {
            resource: "tas.dev/nic".into(),
            numa_node: 0,
            count: 1,
        }),
        ..RealNodeOptions::new("real-node-1")
    };
    let api_ip = options.api_ip;
    let Some(RealNodeCluster { node, cluster }) =
        RealNodeCluster::start_for_test("real_node", options).await
    else {
        return;
    };

    let kubelet_log = std::fs::read_to_string(node.kubelet_log()).expect("the kubelet's log");
    assert!(
        kubelet_log.contains("\"NumNUMANodes\":2")
            && kubelet_log.contains("\"1\":{\"NUMANodeID\":1,"),
        "the kubelet's CPU manager sees 2 NUMA nodes, CPU 1 on node 1 (its \"Detected CPU topology\" line)"
    );

    let client = cluster.client().await.expect("a client");

    // The device plugin registered; 100m of CPU reserved leaves 1900m allocatable.
    let nodes: Api<Node> = Api::all(client.clone());
    let allocatable = wait_for(
        "the device plugin's resource on the Node",
        TIMEOUT,
        || async {
            let n = nodes.get(node.name()).await.map_err(|e| e.to_string())?;
            let a = n.status.and_then(|s| s.allocatable).unwrap_or_default();
            Ok::<_, String>(a.contains_key("tas.dev/nic").then_some(a))
        },
    )
    .await
    .expect("the device is advertised");
    assert_eq!(allocatable["tas.dev/nic"].0, "1");
    assert_eq!(allocatable["cpu"].0, "1900m");

    // The `kubernetes` Service: its endpoint is api_ip, and kube-proxy's rules take a
    // connection to the Service's address there, to the API server.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice = wait_for("the kubernetes EndpointSlice", TIMEOUT, || async {
        slices
            .get_opt("kubernetes")
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .expect("the kubernetes EndpointSlice");
    assert_eq!(
        slice.endpoints[0].addresses,
        vec![api_ip.to_string()],
        "kube-apiserver advertises api_ip"
    );
    let service = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service");
    let cluster_ip: std::net::IpAddr = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP")
        .parse()
        .expect("an address");
    wait_for(
        "kube-proxy's rules for the kubernetes Service",
        TIMEOUT,
        || async { Ok::<_, String>(node.connect_from_node((cluster_ip, 443).into()).ok()) },
    )
    .await
    .expect("the kubernetes Service is reachable from the node");

    let ns = unique_namespace(&client, "real-node")
        .await
        .expect("a namespace");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let created = Instant::now();
    let pod = guaranteed_pause_pod("pinned", node.name(), 1);
    let pod = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let uid = pod.metadata.uid.clone().expect("a uid");
    wait_pod_running(&pods, "pinned", TIMEOUT)
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
    let in_container = format!("/pod{uid}/{container_id}");
    let allowed: Vec<String> = processes()
        .filter(|p| p.cgroup.contains(&in_container))
        .filter_map(|p| p.cpus_allowed)
        .collect();
    assert!(
        !allowed.is_empty() && allowed.iter().all(|cpus| cpus == "1"),
        "the container's processes may run on CPU 1 only: {allowed:?}"
    );

    let dir = node.dir().to_string_lossy().into_owned();
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
    // containerd, the kubelet and the shims all name the node's directory.
    let left: Vec<String> = processes()
        .map(|p| p.cmdline)
        .filter(|c| c.contains(&dir))
        .collect();
    assert!(left.is_empty(), "processes of the node left: {left:?}");
}

/// Runs [`leaky_real_node_helper`] in a child test process, which starts a real node
/// and exits without dropping it; the cluster's watchdog must then end the node's
/// processes and restore the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_restores_the_host_after_the_test_process_dies() {
    let _one = ONE_NODE.lock().await;
    let before = HostState::record().expect("reading the host state");
    let output = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "leaky_real_node_helper",
            "--ignored",
            "--nocapture",
        ])
        .env(LEAKY_HELPER_ENV, "1")
        .env_remove(tas_testcluster::KEEP_CLUSTER_ENV)
        .output()
        .expect("the helper runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if let Some(skip) = stderr.lines().find(|l| l.contains("*** SKIPPED")) {
        // Past libtest's capture, like the helper's own message.
        let _ = writeln!(std::io::stderr(), "\n{skip} (in the helper process)\n");
        return;
    }
    let (during, dir) = stdout
        .lines()
        .find_map(|l| l.split_once("LEAKED ").map(|(_, rest)| rest))
        .and_then(|rest| rest.split_once(' '))
        .unwrap_or_else(|| panic!("the helper reported no node:\n{stdout}\n{stderr}"));
    eprintln!("while the node ran: {during}");
    let died = Instant::now();
    tas_testcluster::wait_for(
        "the watchdog to restore the host",
        Duration::from_secs(30),
        || async {
            let differences = before.differences(&HostState::record().map_err(|e| e.to_string())?);
            let left = processes().filter(|p| p.cmdline.contains(dir)).count();
            let done = differences.is_empty() && left == 0 && !std::path::Path::new(dir).exists();
            Ok::<_, String>(done.then_some(()))
        },
    )
    .await
    .expect("the host restored");
    eprintln!(
        "the watchdog restored the host {:.1?} after the test process exited",
        died.elapsed()
    );
}

/// Not a test of its own: started by
/// [`watchdog_restores_the_host_after_the_test_process_dies`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process of watchdog_restores_the_host_after_the_test_process_dies"]
async fn leaky_real_node_helper() {
    if std::env::var_os(LEAKY_HELPER_ENV).is_none() {
        return;
    }
    // `cluster` stays bound: dropping it would stop its watchdog.
    let Some(RealNodeCluster {
        node,
        cluster: _cluster,
    }) = RealNodeCluster::start_for_test(
        "leaky_real_node_helper",
        RealNodeOptions::new("real-node-leak"),
    )
    .await
    else {
        return;
    };
    let changed = node
        .host_state_before()
        .differences(&HostState::record().expect("reading the host state"));
    println!("LEAKED {} {}", changed.len(), node.dir().display());
    // Exit the way a test process that dies does: without any Drop.
    std::process::exit(0);
}

/// What the test reads of a process in `/proc`.
struct Process {
    cmdline: String,
    cgroup: String,
    cpus_allowed: Option<String>,
}

/// Every process the test can read.
fn processes() -> impl Iterator<Item = Process> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| {
            let read = |f: &str| std::fs::read(e.path().join(f)).ok();
            let status = String::from_utf8_lossy(&read("status")?).into_owned();
            Some(Process {
                cmdline: String::from_utf8_lossy(&read("cmdline")?).replace('\0', " "),
                cgroup: String::from_utf8_lossy(&read("cgroup")?).into_owned(),
                cpus_allowed: status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .map(|v| v.trim().to_owned()),
            })
        })
}
