//! Where the node agent finds the kubelet's settings, against a real API server: the
//! config file merged with its drop-in directory, a change noticed without waiting for
//! the period (also a file replaced by rename), bad input reported in the object with
//! the last good settings kept, and an object another NRT writer owns left alone unless
//! the agent is told to take it over. Each test uses its own kwok node.

use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tas_api::nrt::agent_report::{KUBELET_CONFIG_PROBLEM, KUBELET_CONFIG_SOURCE};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_nodesim::kubelet_server::FakeKubeletHandle;
use tas_runtime::http::Readiness;
use tas_updater::agent::AgentConfig;
use tas_updater::kubelet_source::SourceConfig;
use tas_updater::metrics::Metrics;
use tempfile::TempDir;

mod common;
use common::{TIMEOUT, agent, agent_config, client, fake_kubelet, kwok_node, wait_nrt};
use tas_testcluster::wait_for;
const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
/// The host directory the tests pretend the kubelet's files are in.
const HOST_DIR: &str = "/etc/kubernetes/kubelet";

/// A kwok node with a one-zone sysfs, a fake kubelet, the kubelet's files in
/// `kubelet/` (config.yaml and config.d/) and the agent running against them.
struct Node {
    name: String,
    dir: TempDir,
    _kubelet: FakeKubeletHandle,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    agent: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.abort();
        }
    }
}

impl Node {
    fn kubelet_dir(&self) -> PathBuf {
        self.dir.path().join("kubelet")
    }

    /// Writes `name` (the config file, or a drop-in under config.d) by writing a
    /// temporary file and renaming it over the old one, as configuration tools do.
    fn replace(&self, name: &str, text: &str) {
        let path = match name {
            "config.yaml" => self.kubelet_dir().join(name),
            drop_in => self.kubelet_dir().join("config.d").join(drop_in),
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }

    fn publishes(&self, result: &str) -> u64 {
        common::publishes(&self.metrics, result)
    }
}

fn write_sysfs(root: &Path) {
    let node = root.join("devices/system/node");
    std::fs::create_dir_all(node.join("node0")).unwrap();
    std::fs::write(node.join("online"), "0\n").unwrap();
    std::fs::write(node.join("node0/cpulist"), "0-3\n").unwrap();
    std::fs::write(node.join("node0/distance"), "10\n").unwrap();
    std::fs::write(
        node.join("node0/meminfo"),
        "Node 0 MemTotal:       4194304 kB\n",
    )
    .unwrap();
}

/// A node whose kubelet files hold `config` (none when `None`) and no drop-ins yet.
async fn node(client: &Client, config: Option<&str>) -> Node {
    let name = kwok_node(client, "kcfg").await;
    let dir = tempfile::tempdir().unwrap();
    write_sysfs(&dir.path().join("sys"));
    std::fs::create_dir_all(dir.path().join("kubelet/config.d")).unwrap();
    if let Some(config) = config {
        std::fs::write(dir.path().join("kubelet/config.yaml"), config).unwrap();
    }
    let server = fake_kubelet(4)
        .serve(dir.path().join("kubelet.sock"))
        .expect("fake kubelet serves");
    Node {
        name,
        dir,
        _kubelet: server,
        metrics: Arc::new(Metrics::new()),
        readiness: Readiness::not_ready("starting"),
        agent: None,
    }
}

/// Starts the agent on `node`, with an hour-long period so that only a change of the
/// files (or the object) makes it publish after the first time.
fn start(client: &Client, node: &mut Node, take_over_nrt: bool) {
    let kubelet = node.kubelet_dir();
    let source = SourceConfig {
        file: kubelet.join("config.yaml"),
        config_dir: Some(kubelet.join("config.d")),
        host_paths: vec![(kubelet, HOST_DIR.to_owned())],
        ..SourceConfig::default()
    };
    let cfg = AgentConfig {
        take_over_nrt,
        ..agent_config(
            &node.name,
            node.dir.path(),
            source,
            Duration::from_secs(3600),
        )
    };
    let socket = node.dir.path().join("kubelet.sock");
    let agent = agent(client, cfg, socket, &node.metrics, &node.readiness);
    node.agent = Some(tokio::spawn(async move {
        agent.run().await;
    }));
}

fn annotation<'a>(nrt: &'a NodeResourceTopology, key: &str) -> Option<&'a str> {
    nrt.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn policy(nrt: &NodeResourceTopology) -> Option<&str> {
    nrt.attribute("topologyManagerPolicy")
}

#[tokio::test]
async fn drop_ins_are_merged_and_a_renamed_file_is_seen_without_waiting_for_the_period() {
    let client = client().await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let config = format!("{HEADER}topologyManagerPolicy: best-effort\n");
    let mut node = node(&client, Some(&config)).await;
    node.replace(
        "10-topology.conf",
        &format!("{HEADER}topologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\n"),
    );
    start(&client, &mut node, false);

    let nrt = wait_nrt(&api, &node.name, "merged settings published", |o| {
        policy(o) == Some("single-numa-node")
    })
    .await;
    assert_eq!(nrt.attribute("topologyManagerScope"), Some("pod"));
    assert_eq!(
        annotation(&nrt, KUBELET_CONFIG_SOURCE),
        Some(
            "/etc/kubernetes/kubelet/config.yaml, /etc/kubernetes/kubelet/config.d/10-topology.conf"
        ),
        "the host paths read, in merge order"
    );
    assert_eq!(annotation(&nrt, KUBELET_CONFIG_PROBLEM), None);

    // A later drop-in wins; then the drop-in replaced by rename. The period is an hour:
    // only the agent noticing the files can publish these.
    node.replace(
        "20-restricted.conf",
        &format!("{HEADER}topologyManagerPolicy: restricted\n"),
    );
    wait_nrt(&api, &node.name, "a new drop-in", |o| {
        policy(o) == Some("restricted")
    })
    .await;
    node.replace(
        "20-restricted.conf",
        &format!("{HEADER}topologyManagerScope: container\n"),
    );
    let nrt = wait_nrt(&api, &node.name, "a drop-in replaced by rename", |o| {
        o.attribute("topologyManagerScope") == Some("container")
    })
    .await;
    assert_eq!(
        policy(&nrt),
        Some("single-numa-node"),
        "10-topology.conf again"
    );
}

#[tokio::test]
async fn bad_input_names_the_file_and_keeps_the_last_good_settings() {
    let client = client().await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let good = format!("{HEADER}topologyManagerPolicy: restricted\n");
    let mut node = node(&client, Some(&good)).await;
    start(&client, &mut node, false);
    wait_nrt(&api, &node.name, "good settings", |o| {
        policy(o) == Some("restricted")
    })
    .await;

    let cases = [
        (
            "config.yaml",
            "topologyManagerPolicy: [restricted\n".to_owned(),
            "/etc/kubernetes/kubelet/config.yaml",
            "does not parse",
        ),
        (
            "30-typo.conf",
            format!("{HEADER}topologyManagerPolcy: none\n"),
            "/etc/kubernetes/kubelet/config.d/30-typo.conf",
            "topologyManagerPolcy",
        ),
        (
            "40-value.conf",
            format!("{HEADER}topologyManagerPolicy: sometimes\n"),
            "/etc/kubernetes/kubelet/config.d/40-value.conf",
            "sometimes",
        ),
    ];
    for (file, text, path, says) in cases {
        node.replace(file, &text);
        let nrt = wait_nrt(&api, &node.name, file, |o| {
            annotation(o, KUBELET_CONFIG_PROBLEM).is_some_and(|p| p.contains(says))
        })
        .await;
        let problem = annotation(&nrt, KUBELET_CONFIG_PROBLEM).unwrap();
        assert!(problem.starts_with(path), "{file}: {problem}");
        assert_eq!(annotation(&nrt, KUBELET_CONFIG_SOURCE), Some(path));
        assert_eq!(
            policy(&nrt),
            Some("restricted"),
            "{file}: not silently none"
        );
        assert_eq!(nrt.zones.len(), 1, "the node is still published");
        assert!(node.readiness.is_ready());
        // Repair before the next case.
        match file {
            "config.yaml" => node.replace(file, &good),
            drop_in => {
                std::fs::remove_file(node.kubelet_dir().join("config.d").join(drop_in)).unwrap()
            }
        }
        wait_nrt(&api, &node.name, "repaired", |o| {
            annotation(o, KUBELET_CONFIG_PROBLEM).is_none()
        })
        .await;
    }
    let metrics = node.metrics.render().unwrap();
    assert!(
        metrics.contains("tas_updater_errors_total{kind=\"kubelet_config\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_config_never_read_is_published_without_zones_and_unready() {
    let client = client().await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let mut node = node(&client, Some("cpuManagerPolicy: Static\n")).await;
    start(&client, &mut node, false);
    let nrt = wait_nrt(&api, &node.name, "the problem published", |o| {
        annotation(o, KUBELET_CONFIG_PROBLEM).is_some()
    })
    .await;
    let problem = annotation(&nrt, KUBELET_CONFIG_PROBLEM).unwrap();
    assert!(
        problem.contains("/etc/kubernetes/kubelet/config.yaml") && problem.contains("Static"),
        "{problem}"
    );
    assert!(
        nrt.zones.is_empty()
            && nrt
                .attributes
                .iter()
                .all(|a| tas_api::nrt::heartbeat::is_heartbeat_attribute(&a.name)),
        "no guess"
    );
    assert!(node.readiness.check().is_err());

    // A missing file is not silent either: the defaults, said to be the defaults.
    std::fs::remove_file(node.kubelet_dir().join("config.yaml")).unwrap();
    let nrt = wait_nrt(&api, &node.name, "missing file reported", |o| {
        annotation(o, KUBELET_CONFIG_PROBLEM).is_some_and(|p| p.contains("not found"))
    })
    .await;
    assert_eq!(policy(&nrt), Some("none"));
    assert_eq!(nrt.zones.len(), 1);
}

#[tokio::test]
async fn another_writer_s_object_is_left_alone_unless_taken_over() {
    let client = client().await;
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let config = format!("{HEADER}topologyManagerPolicy: single-numa-node\n");
    let mut node = node(&client, Some(&config)).await;
    // node-feature-discovery's topology-updater published the node first (an Update,
    // as client-go's Create does).
    let theirs: NodeResourceTopology = serde_json::from_value(json!({
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node.name},
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "attributes": [{"name": "topologyManagerPolicy", "value": "best-effort"}],
        "zones": [{"name": "node-0", "type": "Node"}, {"name": "node-1", "type": "Node"}],
    }))
    .unwrap();
    let created = api
        .create(
            &PostParams {
                field_manager: Some("nfd-topology-updater".into()),
                ..PostParams::default()
            },
            &theirs,
        )
        .await
        .unwrap();
    start(&client, &mut node, false);
    wait_for("the agent to yield", TIMEOUT, || async {
        Ok::<_, kube::Error>((node.publishes("yielded") >= 1).then_some(()))
    })
    .await
    .unwrap();
    // Their next write makes the agent look again, and yield again.
    let before = node.publishes("yielded");
    api.patch(
        &node.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"zones": [{"name": "node-0", "type": "Node"}]})),
    )
    .await
    .unwrap();
    wait_for("the agent to yield again", TIMEOUT, || async {
        Ok::<_, kube::Error>((node.publishes("yielded") > before).then_some(()))
    })
    .await
    .unwrap();
    let now = api.get(&node.name).await.unwrap();
    assert_eq!(policy(&now), Some("best-effort"), "their content stays");
    assert_eq!(node.publishes("applied"), 0);
    assert!(node.readiness.is_ready(), "yielding is not a failure");
    assert_ne!(
        now.metadata.resource_version,
        created.metadata.resource_version
    );

    // Told to take over, the agent writes its own view over theirs.
    node.agent.take().unwrap().abort();
    start(&client, &mut node, true);
    let nrt = wait_nrt(&api, &node.name, "taken over", |o| {
        policy(o) == Some("single-numa-node")
    })
    .await;
    let managers: Vec<&str> = nrt
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert!(managers.contains(&"tas-updater"), "{managers:?}");
}
