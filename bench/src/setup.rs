//! The benchmark cluster: a private control plane with kwok, the CRDs, a namespace
//! and the nodes, Ready and untainted.
//!
//! No kube-controller-manager runs (pods are created directly; it would only add load)
//! unless the pods have DRA claims from templates, which it generates (the DRA
//! scenario also gets the test driver's classes, slices and templates,
//! [`crate::dra::install`]). Whoever puts the `node.kubernetes.io/not-ready` taint on
//! every new node, the runner removes it once kwok reports the node Ready.

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use tas_nodesim::referee::Referee;

use crate::schedulers::SchedulerKind;
use crate::workload::Mix;
use crate::{Bench, BenchError, Options};
use tas_testcluster::{ClusterOptions, KWOK_NODE_LABEL, TestCluster, create_fake_node, wait_for};

/// Node creations (and taint removals) in flight at most.
const NODE_CONCURRENCY: usize = 32;
/// How long all nodes may take to become Ready.
const NODES_READY_TIMEOUT: Duration = Duration::from_secs(300);

/// Starts the cluster and creates everything the runs share.
pub async fn setup(options: Options) -> Result<Bench, BenchError> {
    check_binaries(&options)?;
    // The kubelet of every node; without it there is nothing to judge the runs.
    let referee = Arc::new(Referee::start()?);
    // DRA claims come from templates: the controller manager's ResourceClaim
    // controller generates them, and deletes them when their pod goes.
    let dra = options.workload.mix == Mix::Dra;
    let cluster = TestCluster::start(ClusterOptions {
        kwok: true,
        controller_manager: dra,
        startup_timeout: Duration::from_secs(120),
        ..ClusterOptions::default()
    })?;
    let client = cluster.client().await?;
    // config/crd holds the NodeResourceTopology CRD (and the TAS operator's own, which
    // is inert here).
    tas_testcluster::apply_crds_from_dir(&client, &options.crd_dir).await?;
    let namespace = tas_testcluster::unique_namespace(&client, "bench").await?;

    let shape = &options.shape;
    futures::stream::iter(0..shape.nodes)
        .map(|i| {
            let client = client.clone();
            let node = shape.fake_node(i);
            async move { create_fake_node(&client, &node).await }
        })
        .buffer_unordered(NODE_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    wait_nodes_ready(&client, shape.nodes).await?;
    untaint_nodes(&client, &shape.node_names()).await?;
    let device_zones = if dra {
        crate::dra::install(&client, &namespace, shape).await?
    } else {
        Default::default()
    };
    Ok(Bench {
        device_zones,
        cluster,
        client,
        namespace,
        options,
        referee,
        nrt_changed: std::sync::Mutex::new(None),
    })
}

/// Fails early when a selected scheduler's binary is missing.
fn check_binaries(options: &Options) -> Result<(), BenchError> {
    let bin = &options.binaries;
    let needed = [
        (
            SchedulerKind::Tas,
            "tas-scheduler",
            &bin.tas,
            "build it with `cargo build --release -p tas-scheduler` or pass --tas-scheduler",
        ),
        (
            SchedulerKind::KubeScheduler,
            "kube-scheduler",
            &bin.kube_scheduler,
            "build the cluster tools with `make cluster-tools`",
        ),
        (
            SchedulerKind::NumaPlugin,
            "kube-scheduler-plugins",
            &bin.schedplugins,
            "build it with `TAS_TOOLS_ONLY=schedplugins testcluster/tools/build.sh` (`make bench` does) or pass --schedplugins",
        ),
    ];
    for (kind, what, path, hint) in needed {
        if options.schedulers.contains(&kind) && !path.is_file() {
            return Err(BenchError::MissingBinary {
                what,
                path: path.clone(),
                hint,
            });
        }
    }
    Ok(())
}

/// Waits until `count` fake nodes are Ready.
async fn wait_nodes_ready(client: &kube::Client, count: usize) -> Result<(), BenchError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let selector = format!("{}={}", KWOK_NODE_LABEL.0, KWOK_NODE_LABEL.1);
    wait_for(
        format!("{count} nodes to be Ready"),
        NODES_READY_TIMEOUT,
        || async {
            let list = nodes.list(&ListParams::default().labels(&selector)).await?;
            let ready = list
                .items
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            Ok::<_, kube::Error>((ready >= count).then_some(()))
        },
    )
    .await?;
    Ok(())
}

/// Removes every taint of `names`.
async fn untaint_nodes(client: &kube::Client, names: &[String]) -> Result<(), BenchError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = serde_json::json!({ "spec": { "taints": null } });
    futures::stream::iter(names)
        .map(|name| {
            let nodes = nodes.clone();
            let patch = patch.clone();
            async move {
                nodes
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
            }
        })
        .buffer_unordered(NODE_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}
