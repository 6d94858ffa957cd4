//! Set-up shared by the node agent's real-cluster tests: the shared cluster's client,
//! an in-process agent for one kwok node (fast podresources retries), its publish
//! counter, and a poll of its NRT object.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::{Api, Client};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_nodesim::kubelet_server::FakeKubelet;
use tas_runtime::http::Readiness;
use tas_testcluster::{
    FakeNode, TestCluster, apply_crds_from_dir, crd_dir, create_fake_node, unique_name, wait_for,
};
use tas_updater::agent::{Agent, AgentConfig};
use tas_updater::kubelet_source::SourceConfig;
use tas_updater::metrics::Metrics;
use tas_updater::podresources::v1::AllocatableResourcesResponse;
use tas_updater::podresources::{ClientConfig, PodResourcesClient};
use tas_updater::pods_fingerprint::FingerprintPolicy;
use tas_updater::triggers::Mode;

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A client of the shared cluster, with the project's CRDs applied.
pub async fn client() -> Client {
    let cluster = TestCluster::shared().expect("shared cluster");
    let client = cluster.client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs");
    client
}

/// A new kwok node named from `prefix`; its name.
pub async fn kwok_node(client: &Client, prefix: &str) -> String {
    let name = unique_name(prefix);
    create_fake_node(client, &FakeNode::new(name.clone()))
        .await
        .expect("node created");
    name
}

/// A fake kubelet whose podresources API reports CPUs `0..cpus` allocatable.
pub fn fake_kubelet(cpus: i64) -> FakeKubelet {
    let kubelet = FakeKubelet::new();
    kubelet.set_allocatable(AllocatableResourcesResponse {
        cpu_ids: (0..cpus).collect(),
        ..Default::default()
    });
    kubelet
}

/// The agent's settings for node `name` with its sysfs under `dir/sys` and the kubelet
/// settings of `kubelet`: periodic every `period`, pods polled every 100 ms (in the events
/// modes) with a 50 ms debounce, never taking over
/// another writer's object, fingerprinting no pods. Tests change fields as they need.
pub fn agent_config(
    name: &str,
    dir: &Path,
    kubelet: SourceConfig,
    period: Duration,
) -> AgentConfig {
    AgentConfig {
        node_name: name.to_owned(),
        sysfs_root: dir.join("sys"),
        kubelet,
        take_over_nrt: false,
        mode: Mode::Periodic,
        period,
        pod_poll_interval: Duration::from_millis(100),
        debounce: Duration::from_millis(50),
        reapply_interval: Duration::from_secs(600),
        heartbeat_period: Duration::from_secs(600),
        numa_placement: true,
        shared_cpus_from: None,
        fingerprint: FingerprintPolicy::new(None, &[]),
    }
}

/// An agent of `cfg` that reads podresources from `socket`, retrying quickly, and
/// reports into `metrics` and `readiness`.
pub fn agent(
    client: &Client,
    cfg: AgentConfig,
    socket: PathBuf,
    metrics: &Arc<Metrics>,
    readiness: &Readiness,
) -> Agent {
    let podresources = PodResourcesClient::new(ClientConfig {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        ..ClientConfig::new(socket)
    });
    Agent::new(
        cfg,
        client.clone(),
        podresources,
        metrics.clone(),
        readiness.clone(),
    )
}

/// `tas_updater_publishes_total{result}` of `metrics` (0 before the first).
pub fn publishes(metrics: &Metrics, result: &str) -> u64 {
    let text = metrics.render().expect("metrics render");
    let prefix = format!("tas_updater_publishes_total{{result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The NRT object `name` once `pred` holds for it (`what` names the wait).
pub async fn wait_nrt(
    api: &Api<NodeResourceTopology>,
    name: &str,
    what: &str,
    pred: impl Fn(&NodeResourceTopology) -> bool,
) -> NodeResourceTopology {
    wait_for(what, TIMEOUT, || async {
        Ok::<_, kube::Error>(api.get_opt(name).await?.filter(|o| pred(o)))
    })
    .await
    .expect(what)
}
