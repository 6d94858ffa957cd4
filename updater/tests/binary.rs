//! The `tas-updater` binary as a DaemonSet would run it: flags only, against the real API
//! server and a fake kubelet with 100 pods. Checks its HTTP endpoints and prints its
//! footprint and event-to-publish latency (figures, never asserted).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_nodesim::kubelet_server::FakeKubelet;
use tas_testcluster::{
    FakeNode, NODE_SIM_LABEL, TestCluster, apply_crds_from_dir, crd_dir, create_fake_node,
    unique_name, wait_for,
};
use tas_updater::podresources::v1::{
    AllocatableResourcesResponse, ContainerResources, PodResources,
};

const TIMEOUT: Duration = Duration::from_secs(30);

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_sysfs(root: &Path) {
    let node = root.join("devices/system/node");
    for (id, cpus, dist) in [(0, "0-31", "10 21"), (1, "32-63", "21 10")] {
        let d = node.join(format!("node{id}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpulist"), cpus).unwrap();
        std::fs::write(d.join("distance"), dist).unwrap();
        std::fs::write(
            d.join("meminfo"),
            format!("Node {id} MemTotal: 67108864 kB\n"),
        )
        .unwrap();
    }
    std::fs::write(node.join("online"), "0-1").unwrap();
}

/// `GET https://127.0.0.1:port/path` (the agent's self-signed certificate), with the
/// bearer `token` when given.
async fn https_get(port: u16, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    tas_testcluster::https_get(([127, 0, 0, 1], port).into(), path, token)
        .await
        .ok()
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn pod(i: usize, cpus: Vec<i64>) -> PodResources {
    PodResources {
        name: format!("pod-{i}"),
        namespace: "bench".into(),
        containers: vec![ContainerResources {
            name: "app".into(),
            cpu_ids: cpus,
            ..Default::default()
        }],
    }
}

#[tokio::test]
async fn the_binary_publishes_serves_health_and_reports_its_footprint() {
    let cluster = TestCluster::shared().expect("cluster");
    let client = cluster.client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs");
    let node = unique_name("bin");
    create_fake_node(&client, &FakeNode::new(node.clone()))
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    write_sysfs(&dir.path().join("sys"));
    let kubelet = FakeKubelet::new();
    kubelet.set_allocatable(AllocatableResourcesResponse {
        cpu_ids: (0..64).collect(),
        ..Default::default()
    });
    // 100 pods, 10 of them with exclusive CPUs.
    kubelet.set_pods(
        (0..100)
            .map(|i| {
                pod(
                    i,
                    if i < 10 {
                        vec![i as i64 * 2, i as i64 * 2 + 1]
                    } else {
                        vec![]
                    },
                )
            })
            .collect(),
    );
    let socket = dir.path().join("kubelet.sock");
    let _server = kubelet.serve(&socket).unwrap();
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tas-updater"))
        .env("NODE_NAME", &node)
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .arg(format!("--sysfs-root={}", dir.path().join("sys").display()))
        .arg(format!("--podresources-socket={}", socket.display()))
        .arg(format!(
            "--kubelet-config={}",
            dir.path().join("missing.yaml").display()
        ))
        .arg("--topology-manager-policy=single-numa-node")
        .arg("--refresh-mode=periodic-and-events")
        .arg("--refresh-period=10s")
        .arg("--debounce=100ms")
        .arg(format!("--http-address=127.0.0.1:{port}"))
        .arg("--log-level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("tas-updater starts");
    let child = KillOnDrop(child);
    let pid = child.0.id();

    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    wait_for("NRT from the binary", TIMEOUT, || async {
        api.get_opt(&node).await
    })
    .await
    .unwrap();
    wait_for("/readyz 200", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            https_get(port, "/readyz", None)
                .await
                .filter(|(c, _)| *c == 200),
        )
    })
    .await
    .unwrap();
    let (code, _) = https_get(port, "/healthz", None)
        .await
        .expect("healthz answers");
    assert_eq!(code, 200);
    // /metrics over TLS for an authorised token (the admin's); nobody else.
    let token = cluster.admin_token().expect("admin token");
    let (code, metrics) = https_get(port, "/metrics", Some(&token))
        .await
        .expect("metrics answer");
    assert_eq!(code, 200, "{metrics}");
    assert_eq!(
        https_get(port, "/metrics", None).await.map(|(c, _)| c),
        Some(401)
    );
    assert!(
        metrics.contains("tas_updater_publishes_total{result=\"applied\"} 1"),
        "{metrics}"
    );

    // Event-driven latency: a pod appears on the node and its CPUs leave zone 1.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut latencies = Vec::new();
    for round in 0..10_i64 {
        let name = unique_name("lat");
        let cpus: Vec<i64> = (32 + round * 2..34 + round * 2).collect();
        let mut all = kubelet.pods();
        all.push(pod(1000 + round as usize, cpus));
        let want = (32 - 2 * (round + 1)).to_string();
        let start = Instant::now();
        kubelet.set_pods(all);
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {NODE_SIM_LABEL: "true"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "c"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
        // A tight poll (10 ms) so the figure measures the agent, not the poll interval.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let o = api.get(&node).await.unwrap();
            let z1 = o.zones.iter().find(|z| z.name == "node-1").and_then(|z| {
                z.resources
                    .iter()
                    .find(|r| r.name == "cpu")
                    .map(|r| r.available.as_str().to_owned())
            });
            if z1.as_deref() == Some(want.as_str()) {
                break;
            }
            assert!(Instant::now() < deadline, "allocation never published");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        latencies.push(start.elapsed());
        let _ = pods.delete(&name, &DeleteParams::default()).await;
    }
    latencies.sort();
    let rss = rss_kib(pid).unwrap_or(0);
    println!(
        "tas-updater, 2 zones / 64 CPUs / 100 pods: RSS {:.1} MiB; pod event → NRT p50 {:?}, max of 10 {:?} (debounce 100ms)",
        rss as f64 / 1024.0,
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
}
