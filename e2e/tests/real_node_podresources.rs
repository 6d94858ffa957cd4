//! The real kubelet's podresources API, on a real node of the test harness
//! ([`tas_testcluster::real_node`]): what the node agent reads in production. With the
//! static CPU Manager and CPU 0 reserved, the kubelet offers CPU 1 for exclusive use and
//! lists a Guaranteed 1-CPU container on it.
//!
//! Needs what testcluster's `tests/real_node.rs` needs (`make test` and `make
//! real-node-test` provide it); without a prerequisite it says which and passes.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use tas_podresources::connect_unix;
use tas_podresources::v1::pod_resources_lister_client::PodResourcesListerClient;
use tas_podresources::v1::{AllocatableResourcesRequest, ListPodResourcesRequest};
use tas_testcluster::real_node::{RealNodeCluster, RealNodeOptions, guaranteed_pause_pod};
use tas_testcluster::{unique_namespace, wait_pod_running};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubelet_podresources_report_the_exclusive_cpu() {
    let Some(RealNodeCluster { node, cluster }) = RealNodeCluster::start_for_test(
        "real_node_podresources",
        RealNodeOptions::new("real-node-pr"),
    )
    .await
    else {
        return;
    };

    let socket = node
        .kubelet_root()
        .join("pod-resources")
        .join("kubelet.sock");
    let channel = connect_unix(&socket)
        .await
        .expect("the kubelet's podresources socket");
    let mut podresources = PodResourcesListerClient::new(channel);
    let asked = Instant::now();
    let allocatable = podresources
        .get_allocatable_resources(AllocatableResourcesRequest {})
        .await
        .expect("GetAllocatableResources")
        .into_inner();
    eprintln!(
        "GetAllocatableResources answered in {:.1?}",
        asked.elapsed()
    );
    assert_eq!(
        allocatable.cpu_ids,
        vec![1],
        "CPU 1 is the one exclusive CPU"
    );

    let client = cluster.client().await.expect("a client");
    let ns = unique_namespace(&client, "real-node-pr")
        .await
        .expect("a namespace");
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let pod = guaranteed_pause_pod("pinned", node.name(), 1);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    wait_pod_running(&pods, "pinned", TIMEOUT)
        .await
        .expect("the pod runs");

    let listed = podresources
        .list(ListPodResourcesRequest {})
        .await
        .expect("List")
        .into_inner();
    let ours = listed
        .pod_resources
        .iter()
        .find(|p| p.namespace == ns && p.name == "pinned")
        .expect("the pod is listed");
    assert_eq!(ours.containers.len(), 1);
    assert_eq!(
        ours.containers[0].cpu_ids,
        vec![1],
        "the container holds CPU 1"
    );
    // Before the cluster: the node's directory is inside the cluster's.
    node.stop();
}
