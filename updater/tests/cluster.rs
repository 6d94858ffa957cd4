//! The node agent against a real API server (the e2e harness's shared control plane),
//! with a fake kubelet serving podresources on a real unix socket and a fake sysfs tree.
//! Each test uses its own kwok node, so tests share one cluster without interfering.

use k8s_openapi::api::core::v1::Node;
use kube::api::DeleteParams;
use kube::{Api, Client};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tas_api::fingerprint::Method;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_nodesim::kubelet_server::{FakeKubelet, FakeKubeletHandle};
use tas_runtime::http::Readiness;
use tas_testcluster::wait_for;
use tas_updater::agent::AgentConfig;
use tas_updater::kubelet_source::SourceConfig;
use tas_updater::metrics::Metrics;
use tas_updater::podresources::v1::{ContainerResources, PodResources};
use tas_updater::pods_fingerprint::FingerprintPolicy;
use tas_updater::triggers::Mode;
use tempfile::TempDir;

mod common;
use common::{TIMEOUT, agent, agent_config, client, fake_kubelet, kwok_node, wait_nrt};

/// A simulated NUMA node: a kwok Node object, a sysfs tree, a kubelet config and a fake
/// kubelet, plus the agent running against them.
struct SimNode {
    name: String,
    dir: TempDir,
    kubelet: FakeKubelet,
    server: Option<FakeKubeletHandle>,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    agent: tokio::task::JoinHandle<tas_runtime::supervise::TaskEnded>,
}

impl SimNode {
    fn socket(&self) -> PathBuf {
        self.dir.path().join("kubelet.sock")
    }

    async fn stop_kubelet(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await.expect("fake kubelet stops");
        }
    }

    fn start_kubelet(&mut self) {
        self.server = Some(
            self.kubelet
                .serve(self.socket())
                .expect("fake kubelet serves"),
        );
    }

    fn publishes(&self, result: &str) -> u64 {
        common::publishes(&self.metrics, result)
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        self.agent.abort();
    }
}

/// Two zones: CPUs 0-3 and 4-7, 4 GiB each, 2Mi hugepages on zone 0; two threads per
/// core (siblings 0-1, 2-3, ...), zone 0 on socket 0 and zone 1 on socket 1.
fn write_sysfs(root: &Path) {
    for cpu in 0..8 {
        let d = root.join(format!("devices/system/cpu/cpu{cpu}/topology"));
        std::fs::create_dir_all(&d).unwrap();
        let first = cpu & !1;
        let siblings = format!("{first}-{}\n", first + 1);
        std::fs::write(d.join("thread_siblings_list"), siblings).unwrap();
        std::fs::write(d.join("physical_package_id"), format!("{}\n", cpu / 4)).unwrap();
    }
    let node = root.join("devices/system/node");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("online"), "0-1\n").unwrap();
    for (id, cpus, distances) in [(0, "0-3", "10 20"), (1, "4-7", "20 10")] {
        let d = node.join(format!("node{id}"));
        std::fs::create_dir_all(d.join("hugepages/hugepages-2048kB")).unwrap();
        std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        std::fs::write(d.join("distance"), format!("{distances}\n")).unwrap();
        std::fs::write(
            d.join("meminfo"),
            format!("Node {id} MemTotal:        4194304 kB\nNode {id} MemFree:  1 kB\n"),
        )
        .unwrap();
        let pages = if id == 0 { "16" } else { "0" };
        std::fs::write(d.join("hugepages/hugepages-2048kB/nr_hugepages"), pages).unwrap();
    }
}

fn pinned_pod(ns: &str, name: &str, cpus: &[i64]) -> PodResources {
    PodResources {
        name: name.into(),
        namespace: ns.into(),
        containers: vec![ContainerResources {
            name: "app".into(),
            cpu_ids: cpus.to_vec(),
            ..Default::default()
        }],
    }
}

async fn start(client: &Client, mode: Mode, period: Duration) -> SimNode {
    start_with_heartbeat(client, mode, period, Duration::from_secs(600)).await
}

async fn start_with_heartbeat(
    client: &Client,
    mode: Mode,
    period: Duration,
    heartbeat_period: Duration,
) -> SimNode {
    let name = kwok_node(client, "numa").await;
    let dir = tempfile::tempdir().unwrap();
    write_sysfs(&dir.path().join("sys"));
    std::fs::write(
        dir.path().join("config.yaml"),
        "kind: KubeletConfiguration\ntopologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\ncpuManagerPolicy: static\n",
    )
    .unwrap();
    let kubelet = fake_kubelet(8);
    let source = SourceConfig {
        file: dir.path().join("config.yaml"),
        ..SourceConfig::default()
    };
    let cfg = AgentConfig {
        mode,
        fingerprint: FingerprintPolicy::new(Some(Method::WithExclusiveResources), &[]),
        heartbeat_period,
        ..agent_config(&name, dir.path(), source, period)
    };
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::not_ready("starting");
    let agent = agent(
        client,
        cfg,
        dir.path().join("kubelet.sock"),
        &metrics,
        &readiness,
    );
    let mut node = SimNode {
        name,
        dir,
        kubelet,
        server: None,
        metrics,
        readiness,
        agent: tokio::spawn(agent.run()),
    };
    node.start_kubelet();
    node
}

fn available(nrt: &NodeResourceTopology, zone: &str, resource: &str) -> Option<String> {
    nrt.zones
        .iter()
        .find(|z| z.name == zone)?
        .resources
        .iter()
        .find(|r| r.name == resource)
        .map(|r| r.available.as_str().to_owned())
}

#[tokio::test]
async fn publishes_the_node_and_follows_allocation_changes() {
    let client = client().await;
    let node = start(&client, Mode::Periodic, Duration::from_millis(500)).await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let nrt = wait_nrt(&api, &node.name, "NRT published", |_| true).await;
    assert_eq!(
        nrt.zones
            .iter()
            .map(|z| z.name.as_str())
            .collect::<Vec<_>>(),
        ["node-0", "node-1"]
    );
    assert_eq!(
        nrt.attribute("topologyManagerPolicy"),
        Some("single-numa-node")
    );
    assert_eq!(nrt.attribute("topologyManagerScope"), Some("pod"));
    assert_eq!(
        nrt.attribute("nodeTopologyPodsFingerprintMethod"),
        Some("with-exclusive-resources")
    );
    assert_eq!(available(&nrt, "node-0", "cpu").as_deref(), Some("4"));
    // The CPU layout, for readers that replay the CPU manager's order.
    assert_eq!(nrt.attribute("cpuThreadsPerCore"), Some("2"));
    let sockets: Vec<Option<u32>> = nrt
        .zones
        .iter()
        .map(|z| tas_api::nrt::cpu_layout::zone_socket(z).unwrap())
        .collect();
    assert_eq!(sockets, [Some(0), Some(1)]);
    assert_eq!(
        available(&nrt, "node-0", "hugepages-2Mi").as_deref(),
        Some("33554432")
    );
    assert_eq!(
        nrt.zones[0]
            .costs
            .iter()
            .map(|c| c.value)
            .collect::<Vec<_>>(),
        [10, 20]
    );
    let owner = &nrt.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", node.name.as_str())
    );
    assert!(node.readiness.is_ready(), "ready after the first publish");

    // A Guaranteed pod gets CPUs 0 and 1: zone 0 shows 2 available, and the fingerprint
    // now covers that pod.
    node.kubelet
        .set_pods(vec![pinned_pod("default", "pinned", &[0, 1])]);
    let nrt = wait_nrt(&api, &node.name, "allocation visible", |o| {
        available(o, "node-0", "cpu").as_deref() == Some("2")
    })
    .await;
    assert_eq!(
        nrt.pods_fingerprint(),
        Some(tas_api::fingerprint::compute([("default", "pinned")]).as_str())
    );
}

#[tokio::test]
async fn an_unchanged_node_is_not_rewritten() {
    let client = client().await;
    let node = start(&client, Mode::Periodic, Duration::from_millis(200)).await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let first = wait_nrt(&api, &node.name, "NRT published", |_| true).await;
    let before = node.publishes("unchanged");
    // Several more periods pass: the agent observes, finds nothing new, writes nothing.
    wait_for("five more observations", TIMEOUT, || async {
        Ok::<_, kube::Error>((node.publishes("unchanged") >= before + 5).then_some(()))
    })
    .await
    .unwrap();
    let now = api.get(&node.name).await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(node.publishes("applied"), 1, "exactly one write");
}

#[tokio::test]
async fn an_idle_node_is_rewritten_once_per_heartbeat_period() {
    use tas_api::nrt::heartbeat::{HEARTBEAT, HEARTBEAT_PERIOD, Heartbeat};
    let client = client().await;
    let heartbeat_period = Duration::from_secs(10);
    let node = start_with_heartbeat(
        &client,
        Mode::Periodic,
        Duration::from_millis(200),
        heartbeat_period,
    )
    .await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let first = wait_nrt(&api, &node.name, "NRT published", |_| true).await;
    let stamp = Heartbeat::of(&first).expect("the first write carries a heartbeat");
    assert_eq!(first.attribute(HEARTBEAT_PERIOD), Some("10s"));
    // Observations within the period find the same content: no write, although the
    // time they would stamp moved on.
    let before = node.publishes("unchanged");
    wait_for("five more observations", TIMEOUT, || async {
        Ok::<_, kube::Error>((node.publishes("unchanged") >= before + 5).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(node.publishes("applied"), 1, "no write within the period");
    // Once the period has passed, the same content is written again with a new stamp.
    let second = wait_nrt(&api, &node.name, "heartbeat rewritten", |o| {
        o.attribute(HEARTBEAT) != first.attribute(HEARTBEAT)
    })
    .await;
    let next = Heartbeat::of(&second).expect("heartbeat");
    let gap = next.at.duration_since(stamp.at).unwrap_or_default();
    assert!(
        gap >= heartbeat_period - Duration::from_secs(1),
        "rewritten {gap:?} after the first write"
    );
    assert_eq!(second.zones, first.zones, "content unchanged");
    assert_eq!(node.publishes("applied"), 2, "one heartbeat write");
}

/// Events only: the period is irrelevant; what the kubelet lists drives publishing. No
/// Pod object is created: the agent reads pods from the kubelet, never the API server.
#[tokio::test]
async fn pod_changes_publish_within_the_poll_and_debounce_not_the_period() {
    let client = client().await;
    let node = start(&client, Mode::Events, Duration::from_secs(3600)).await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    wait_nrt(&api, &node.name, "NRT published", |_| true).await;
    let started = Instant::now();
    node.kubelet
        .set_pods(vec![pinned_pod("default", "pinned", &[4, 5, 6])]);
    wait_nrt(&api, &node.name, "a pod's CPUs published", |o| {
        available(o, "node-1", "cpu").as_deref() == Some("1")
    })
    .await;
    println!("pod admitted → NRT updated in {:?}", started.elapsed());
    node.kubelet.set_pods(vec![]);
    wait_nrt(&api, &node.name, "its removal published", |o| {
        available(o, "node-1", "cpu").as_deref() == Some("4")
    })
    .await;
}

#[tokio::test]
async fn survives_the_kubelet_socket_going_away() {
    let client = client().await;
    let mut node = start(&client, Mode::Periodic, Duration::from_millis(200)).await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    wait_nrt(&api, &node.name, "NRT published", |_| true).await;
    node.stop_kubelet().await;
    wait_for("not ready while the socket is gone", TIMEOUT, || async {
        Ok::<_, kube::Error>(node.readiness.check().err())
    })
    .await
    .unwrap();
    let metrics = node.metrics.render().expect("metrics render");
    assert!(metrics.contains("tas_updater_errors_total"));
    // The kubelet comes back with a new allocation: the agent reconnects and publishes it.
    node.kubelet
        .set_pods(vec![pinned_pod("default", "after-restart", &[4])]);
    node.start_kubelet();
    wait_nrt(
        &api,
        &node.name,
        "published after the kubelet restart",
        |o| available(o, "node-1", "cpu").as_deref() == Some("3"),
    )
    .await;
    wait_for("ready again", TIMEOUT, || async {
        Ok::<_, kube::Error>(node.readiness.is_ready().then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_deleted_object_is_recreated_and_a_deleted_node_takes_its_object_along() {
    let client = client().await;
    let node = start(&client, Mode::Periodic, Duration::from_secs(3600)).await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let first = wait_nrt(&api, &node.name, "NRT published", |_| true).await;
    api.delete(&node.name, &DeleteParams::default())
        .await
        .unwrap();
    // Recreated from the watch of its own object, long before the hour-long period.
    wait_nrt(&api, &node.name, "NRT recreated", |o| {
        o.metadata.uid != first.metadata.uid
    })
    .await;

    node.agent.abort();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete(&node.name, &DeleteParams::default())
        .await
        .unwrap();
    // The garbage collector learns about CRDs installed after it started when it
    // re-reads discovery (every 30 s), so allow for one such cycle.
    wait_for(
        "NRT garbage-collected with its Node",
        TIMEOUT * 3,
        || async { Ok::<_, kube::Error>(api.get_opt(&node.name).await?.is_none().then_some(())) },
    )
    .await
    .unwrap();
}
