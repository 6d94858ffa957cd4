//! A pod with a GPU claim decided while the pods bound before it are not in the node's
//! NodeResourceTopology yet gets its GPU on the zone where the kubelet (the referee)
//! puts its CPUs, under `draAlignment: Required`.
//!
//! The scheduler's view holds back a pod in flight on every zone the kubelet could
//! have given it. One simulated node, `single-numa-node`, two zones of 8 CPUs and two
//! GPUs on each; its node agent is paused, so its NodeResourceTopology keeps showing
//! an empty node. `a` (6 CPUs) goes to zone 0; `b` (6 CPUs) to zone 1, held back on
//! zone 0 as well (the topology would let the kubelet put it there). `c` (2 CPUs)
//! then looks as if only zone 1 had room, while the kubelet finds the 2 CPUs left on
//! zone 0 and puts it there: a GPU chosen on zone 1 would sit across the interconnect.
//! TAS waits instead, saying why, and places `c` once the node agent runs again.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tas_e2e::dra::{
    self, TIMEOUT, create, generated_claim, gpu_claim_template, node_of, wait_running,
};
use tas_e2e::in_process::InProcessStack;
use tas_nodesim::request::PodKey;
use tas_testcluster::wait_for;

const LABEL: &str = "e2e.tas.dev/dra-in-flight";
/// The driver, and the class that selects its devices.
const GPU: &str = "gpu.example.com";
/// The slice's GPUs and their NUMA zones, zone 1 first.
const GPUS: [(&str, u32); 4] = [("gpu-0", 1), ("gpu-1", 1), ("gpu-2", 0), ("gpu-3", 0)];

/// A Guaranteed pod of `cpus` CPUs on the group's node with a GPU claim from the
/// template `one-gpu`.
fn gpu_pod(name: &str, cpus: u32, stack: &InProcessStack) -> Pod {
    let claim = json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"});
    let mut pod = dra::gpu_pod(
        name,
        &stack.scheduler,
        json!({"nodeSelector": {LABEL: stack.group}}),
        claim,
    );
    let resources = pod.spec.as_mut().expect("spec").containers[0]
        .resources
        .as_mut()
        .expect("resources");
    let amounts =
        serde_json::from_value(json!({"cpu": cpus.to_string(), "memory": "1Gi"})).expect("amounts");
    resources.requests = Some(amounts);
    resources.limits = resources.requests.clone();
    pod
}

fn zone_of(device: &str) -> u32 {
    dra::zone_of(&GPUS, device)
}

/// Starts `name` (`cpus` CPUs), waits until it runs, and returns the zone of its GPU
/// and the zones the kubelet gave its CPUs.
async fn run_pod(
    client: &Client,
    stack: &InProcessStack,
    name: &str,
    cpus: u32,
) -> (u32, Vec<u32>) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &stack.ns);
    pods.create(&PostParams::default(), &gpu_pod(name, cpus, stack))
        .await
        .expect("pod");
    placed(client, stack, name).await
}

/// Waits until `name` runs; the zone of its GPU and of its CPUs.
async fn placed(client: &Client, stack: &InProcessStack, name: &str) -> (u32, Vec<u32>) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &stack.ns);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &stack.ns);
    let claim = generated_claim(&pods, name).await;
    let pod = wait_running(&pods, name).await;
    let device = dra::allocated_device(&claims, &claim, &pod, GPU).await;
    let node = node_of(&pod).expect("bound");
    let cpus = stack
        .sim
        .node(&node)
        .expect("the node")
        .pod_zones(&PodKey::of(&pod));
    (zone_of(&device), cpus.into_iter().collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_decided_while_others_are_in_flight_gets_its_gpu_where_the_kubelet_puts_its_cpus() {
    let (client, mut stack, node) = dra::start_stack("dra-in-flight", LABEL, GPU, &GPUS).await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &stack.ns);
    create(&templates, gpu_claim_template("one-gpu", GPU)).await;

    stack.pause_updater(&node);
    assert_eq!(run_pod(&client, &stack, "a", 6).await, (0, vec![0]));
    assert_eq!(run_pod(&client, &stack, "b", 6).await, (1, vec![1]));

    let pods: Api<Pod> = Api::namespaced(client.clone(), &stack.ns);
    pods.create(&PostParams::default(), &gpu_pod("c", 2, &stack))
        .await
        .expect("pod");
    let want = "while pods bound to it are not in its NodeResourceTopology yet";
    let seen = std::sync::Mutex::new(None);
    let waited = wait_for(format!("c waiting: {want}"), TIMEOUT, || async {
        let pod = pods.get("c").await?;
        *seen.lock().expect("lock") = Some(pod.clone());
        if node_of(&pod).is_some() {
            // Bound: the test below judges where its GPU went.
            return Ok::<_, kube::Error>(Some(false));
        }
        let waiting = pod
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "PodScheduled" && c.message.is_some_and(|m| m.contains(want)));
        Ok(waiting.then_some(true))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; last seen: {:?}", seen.lock().expect("lock")));
    if waited {
        stack.resume_updater(&client, &node).expect("updater");
    }
    let (gpu, cpus) = placed(&client, &stack, "c").await;
    assert_eq!(
        cpus,
        [0],
        "the kubelet puts c's 2 CPUs on zone 0, the lowest with room"
    );
    assert_eq!(
        (gpu, waited),
        (0, true),
        "c's GPU must be on zone 0 with its CPUs, and c must wait for the node's topology"
    );

    for name in ["a", "b", "c"] {
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .expect("deleted");
    }
    dra::stop_stack(&client, stack, &node, GPU).await;
}
