//! Faults of the real path, on a real node ([`tas_testcluster::real_node`]), each with
//! the clear error it must give and the recovery after it:
//! - an operand image the node does not have (`imagePullPolicy: Never`): the object's
//!   `Available` condition names the node and the kubelet's `ErrImageNeverPull`;
//! - the kubelet's podresources socket missing: the node agent says so on its node's
//!   NodeResourceTopology, and `Available` names the node and the socket's error;
//! - a kubelet whose configuration disagrees with its CPU-manager checkpoint: the kubelet
//!   refuses to start, the harness reports its own reason, and `Available` names the
//!   node;
//! - the container runtime stopped: the kubelet's Node condition says so.
//!
//! Without a prerequisite of real nodes it says which and passes; `make test` provides
//! them.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, ResourceExt};
use tas_api::nrt::agent_report::AGENT_PROBLEM;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::TopologyAwareScheduling;
use tas_e2e::real_node::{
    NAMESPACE, RealNodeTest, build_images, create_namespace, helm_install, select_for_sample,
};
use tas_e2e::stack::AGENTS_NAMESPACE;
use tas_testcluster::real_node::RealNodeOptions;
use tas_testcluster::wait_for;

const TIMEOUT: Duration = Duration::from_secs(120);

/// Waits until the object's `Available` condition has `status` and its message
/// satisfies `ok`; returns the message.
async fn available(client: &Client, status: &str, ok: impl Fn(&str) -> bool) -> String {
    let api: Api<TopologyAwareScheduling> = Api::all(client.clone());
    let last = std::sync::Mutex::new(String::new());
    let found = wait_for(format!("Available={status}"), TIMEOUT, || async {
        let Some(cr) = api.get_opt("default").await? else {
            return Ok::<_, kube::Error>(None);
        };
        let condition = cr
            .status
            .unwrap_or_default()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Available");
        Ok(condition.and_then(|c| {
            *last.lock().unwrap() = format!("{} {}: {}", c.status, c.reason, c.message);
            (c.status == status && ok(&c.message)).then_some(c.message)
        }))
    })
    .await;
    found.unwrap_or_else(|e| panic!("{e}; last Available: {}", last.lock().unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faults_on_the_real_path_give_clear_errors() {
    let options = RealNodeOptions {
        kube_proxy: true,
        ..RealNodeOptions::new("real-node-faults")
    };
    // Bindings drop in reverse order: the node before its cluster.
    let Some(RealNodeTest {
        cluster: _cluster,
        mut node,
        client,
        kubeconfig,
        work,
    }) = RealNodeTest::start("real_node_faults", options).await
    else {
        return;
    };
    let started = Instant::now();
    let (archives, _) = build_images(&work.path().join("images"));
    let (updater_image, others): (Vec<_>, Vec<_>) = archives
        .iter()
        .partition(|a| a.to_string_lossy().ends_with("tas-updater.tar"));
    for archive in others {
        node.import_image(archive).expect("ctr images import");
    }
    select_for_sample(&client, node.name())
        .await
        .expect("node labelled");
    create_namespace(&client, NAMESPACE, "restricted")
        .await
        .expect("namespace created");

    // 1. The node agent's image is not on the node, and the object says Never pull.
    helm_install(
        &work.path().join("helm"),
        &kubeconfig,
        NAMESPACE,
        &[
            "--set",
            "topologyAwareScheduling.spec.imagePullPolicy=Never",
            // Re-read the kubelet every 2 s (default 10 s): each fault shows sooner.
            "--set",
            "topologyAwareScheduling.spec.updater.refresh.period=2s",
        ],
    );
    let message = available(&client, "False", |m| {
        m.contains(&format!("on node {}", node.name())) && m.contains("ErrImageNeverPull")
    })
    .await;
    eprintln!(
        "[{:>5.1?}] image missing → Available=False: {message}",
        started.elapsed()
    );
    node.import_image(updater_image[0])
        .expect("ctr images import");
    let agents: Api<Pod> = Api::namespaced(client.clone(), AGENTS_NAMESPACE);
    for pod in agents.list(&ListParams::default()).await.expect("agents") {
        let _ = agents
            .delete(&pod.name_any(), &DeleteParams::default())
            .await;
    }
    available(&client, "True", |_| true).await;
    eprintln!("[{:>5.1?}] image imported → Available", started.elapsed());

    // 2. The podresources socket is missing: the kubelet stopped and its socket gone.
    node.stop_kubelet().await.expect("the kubelet stops");
    let socket = node.kubelet_root().join("pod-resources/kubelet.sock");
    let _ = std::fs::remove_file(&socket);
    let message = available(&client, "False", |m| {
        m.contains(&format!("on node {}", node.name())) && m.contains("kubelet.sock")
    })
    .await;
    eprintln!(
        "[{:>5.1?}] podresources socket removed → Available=False: {message}",
        started.elapsed()
    );
    let nrts: Api<NodeResourceTopology> = Api::all(client.clone());
    let nrt = nrts.get(node.name()).await.expect("the NRT");
    let reported = nrt
        .annotations()
        .get(AGENT_PROBLEM)
        .cloned()
        .unwrap_or_default();
    assert!(
        reported.contains("kubelet.sock"),
        "the agent's report: {reported:?}"
    );
    assert!(!nrt.zones.is_empty(), "the last zones are kept");
    node.restart_kubelet().await.expect("the kubelet restarts");
    available(&client, "True", |_| true).await;
    wait_for("the agent's report cleared", TIMEOUT, || async {
        let nrt = nrts.get(node.name()).await?;
        Ok::<_, kube::Error>((!nrt.annotations().contains_key(AGENT_PROBLEM)).then_some(()))
    })
    .await
    .expect("the report goes with the problem");
    eprintln!(
        "[{:>5.1?}] kubelet started → socket back → Available, report cleared",
        started.elapsed()
    );

    // 3. The kubelet's configuration no longer matches its CPU-manager checkpoint.
    let config = node.kubelet_root().join("config.yaml");
    let original = std::fs::read_to_string(&config).expect("the kubelet config");
    let changed = original.replace("cpuManagerPolicy: static", "cpuManagerPolicy: none");
    assert_ne!(changed, original);
    std::fs::write(&config, &changed).expect("writing the kubelet config");
    node.restart_kubelet().await.expect("the kubelet restarts");
    let refused = wait_for("the kubelet to refuse to start", TIMEOUT, || async {
        Ok::<_, String>(node.kubelet_health().err())
    })
    .await
    .expect("the kubelet exits");
    let text = refused.to_string();
    assert!(
        text.contains("differs from state checkpoint policy"),
        "the kubelet's own reason is reported: {text}"
    );
    eprintln!(
        "[{:>5.1?}] checkpoint mismatch → {}",
        started.elapsed(),
        text.lines()
            .find(|l| l.contains("differs from state checkpoint"))
            .unwrap_or_default()
    );
    let message = available(&client, "False", |m| {
        m.contains(&format!("on node {}", node.name())) && m.contains("podresources")
    })
    .await;
    eprintln!(
        "[{:>5.1?}] kubelet down → Available=False: {message}",
        started.elapsed()
    );
    std::fs::write(&config, &original).expect("restoring the kubelet config");
    node.restart_kubelet().await.expect("the kubelet restarts");
    available(&client, "True", |_| true).await;
    eprintln!("[{:>5.1?}] config restored → Available", started.elapsed());

    // 4. The container runtime stops: the kubelet says so on the Node.
    node.kill_containerd().expect("containerd stopped");
    let nodes: Api<Node> = Api::all(client.clone());
    let condition = wait_for("the Node to say the runtime is down", TIMEOUT, || async {
        let n = nodes.get(node.name()).await?;
        let ready = n
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        Ok::<_, kube::Error>(ready.filter(|c| {
            c.status == "False" && c.message.as_deref().unwrap_or_default().contains("runtime")
        }))
    })
    .await
    .expect("NotReady, naming the runtime");
    eprintln!(
        "[{:>5.1?}] containerd stopped → Node Ready=False: {}",
        started.elapsed(),
        condition.message.unwrap_or_default()
    );
    let err = node
        .ctr(&["version"])
        .expect_err("containerd does not answer");
    eprintln!("[{:>5.1?}] ctr: {err}", started.elapsed());
    eprintln!(
        "[{:>5.1?}] real-node faults done in {:.1?}",
        started.elapsed(),
        started.elapsed()
    );
    node.stop();
}
