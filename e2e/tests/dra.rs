//! Dynamic Resource Allocation on the real API server, judged by the kubelet's own
//! code: TAS allocates a pod's ResourceClaims (`resource.k8s.io/v1`) on the NUMA zone
//! where the kubelet (the referee, through the node simulator) puts the pod's exclusive
//! CPUs, writes the allocation and `reservedFor` before binding, and explains what it
//! cannot allocate. The control plane's ResourceClaim controller generates claims from
//! templates and releases them when their pod goes, as in a real cluster.
//!
//! One simulated node, `single-numa-node` in pod scope with the static CPU manager, two
//! zones of 8 CPUs; a node-local ResourceSlice with one GPU per zone, the one on zone 1
//! listed first (so an allocator blind to zones would take it for a pod on zone 0).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tas_e2e::dra::{
    self, create, generated_claim, gpu_claim, gpu_claim_template, node_of, wait_running,
};
use tas_e2e::in_process::InProcessStack;
use tas_nodesim::request::PodKey;
use tas_testcluster::wait_for;

const TIMEOUT: Duration = Duration::from_secs(120);
const LABEL: &str = "e2e.tas.dev/dra";
/// The driver, and the class that selects its devices.
const GPU: &str = "gpu.example.com";
/// The slice's GPUs and their NUMA zones, in slice order.
const GPUS: [(&str, u32); 2] = [("gpu-0", 1), ("gpu-1", 0)];

/// A Guaranteed pod of 4 CPUs on the group's node whose container uses `claim`.
fn gpu_pod(name: &str, scheduler: &str, group: &str, claim: Value) -> Pod {
    dra::gpu_pod(
        name,
        scheduler,
        json!({"nodeSelector": {LABEL: group}}),
        claim,
    )
}

/// The message of the pod's `PodScheduled=False` condition, if it has one.
fn unschedulable_message(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message.clone())
}

/// Waits until pod `name` is marked unschedulable with a message containing `want`,
/// and checks it is not bound.
async fn wait_unschedulable(pods: &Api<Pod>, name: &str, want: &str) -> String {
    let seen = std::sync::Mutex::new(String::new());
    wait_for(format!("{name} unschedulable: {want}"), TIMEOUT, || async {
        let pod = pods.get(name).await?;
        assert_eq!(node_of(&pod), None, "{name} was bound");
        let message = unschedulable_message(&pod).unwrap_or_default();
        *seen.lock().expect("lock") = message.clone();
        Ok::<_, kube::Error>(message.contains(want).then_some(message))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; last message: {}", seen.lock().expect("lock")))
}

async fn allocated_device(claims: &Api<ResourceClaim>, claim: &str, pod: &Pod) -> String {
    dra::allocated_device(claims, claim, pod, GPU).await
}

fn zone_of(device: &str) -> u32 {
    dra::zone_of(&GPUS, device)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_allocated_on_the_numa_zone_of_the_pods_cpus() {
    let (client, stack, node) = dra::start_stack("dra", LABEL, GPU, &GPUS).await;
    run(&client, &stack, &node).await;
    dra::stop_stack(&client, stack, &node, GPU).await;
}

async fn run(client: &Client, stack: &InProcessStack, node: &str) {
    let (ns, scheduler, group) = (&stack.ns, &stack.scheduler, &stack.group);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), ns);
    create(&templates, gpu_claim_template("one-gpu", GPU)).await;
    let from_template = json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"});

    // The first pod: its CPUs on zone 0 (the kubelet's lowest that fits), so its GPU
    // must be gpu-1, the second in slice order.
    pods.create(
        &PostParams::default(),
        &gpu_pod("first", scheduler, group, from_template.clone()),
    )
    .await
    .expect("pod");
    let first_claim = generated_claim(&pods, "first").await;
    let first = wait_running(&pods, "first").await;
    assert_eq!(node_of(&first).as_deref(), Some(node));
    let device = allocated_device(&claims, &first_claim, &first).await;
    let cpu_zones = stack
        .sim
        .node(node)
        .expect("the node")
        .pod_zones(&PodKey::of(&first));
    assert_eq!(
        cpu_zones.iter().copied().collect::<Vec<_>>(),
        [zone_of(&device)],
        "the kubelet put the CPUs on {cpu_zones:?}, TAS allocated {device}"
    );
    let claim = claims.get(&first_claim).await.expect("claim");
    assert!(
        claim
            .finalizers()
            .iter()
            .any(|f| f == "resource.kubernetes.io/delete-protection"),
        "{:?}",
        claim.metadata.finalizers
    );

    // The second pod would get its CPUs on zone 0 as well, where the GPU is taken;
    // the free GPU is on zone 1.
    pods.create(
        &PostParams::default(),
        &gpu_pod("second", scheduler, group, from_template),
    )
    .await
    .expect("pod");
    let second_claim = generated_claim(&pods, "second").await;
    wait_unschedulable(
        &pods,
        "second",
        &format!("DRA devices of claim {ns}/{second_claim} are not on NUMA zone(s) 0 where the kubelet will put the pod's CPUs"),
    )
    .await;
    assert!(
        claims
            .get(&second_claim)
            .await
            .expect("claim")
            .status
            .and_then(|s| s.allocation)
            .is_none(),
        "nothing was written for a pod that stays Pending"
    );

    bad_input(client, stack, node).await;

    // The first pod goes: the ResourceClaim controller deallocates its claim, and the
    // second pod gets gpu-1 on zone 0.
    pods.delete("first", &DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    let second = wait_running(&pods, "second").await;
    let device = allocated_device(&claims, &second_claim, &second).await;
    assert_eq!(device, "gpu-1");
    let zones = stack
        .sim
        .node(node)
        .expect("node")
        .pod_zones(&PodKey::of(&second));
    assert_eq!(zones.into_iter().collect::<Vec<_>>(), [zone_of(&device)]);
}

/// Claims the scheduler cannot allocate anywhere: each pod stays Pending, unbound,
/// with a message saying why, and the scheduler goes on.
async fn bad_input(client: &Client, stack: &InProcessStack, node: &str) {
    let (ns, scheduler, group) = (&stack.ns, &stack.scheduler, &stack.group);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let named = |claim: &str| json!({"name": "gpu", "resourceClaimName": claim});

    create(
        &claims,
        gpu_claim("no-class", "no-such-class.example.com", json!({})),
    )
    .await;
    // Compiles (the API server checks it), fails on every device: no such attribute.
    let failing = json!({"selectors": [{"cel": {
        "expression": format!("device.attributes['{GPU}'].memory > 1")}}]});
    create(&claims, gpu_claim("failing-cel", GPU, failing)).await;
    // Allocated by someone else, for another node.
    create(&claims, gpu_claim("elsewhere", GPU, json!({}))).await;
    let allocation = json!({"status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": GPU, "pool": "far", "device": "gpu-9"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["far-away-node"]}]}]}
    }}});
    claims
        .patch_status(
            "elsewhere",
            &PatchParams::default(),
            &Patch::Merge(&allocation),
        )
        .await
        .expect("allocated elsewhere");

    let cases = [
        (
            "class",
            "no-class",
            "device class \"no-such-class.example.com\" not found".to_owned(),
        ),
        ("cel", "failing-cel", "CEL runtime error".to_owned()),
        (
            "elsewhere",
            "elsewhere",
            format!(
                "claim {ns}/elsewhere: allocated for other nodes (its node selector does not select {node})"
            ),
        ),
    ];
    for (pod, claim, _) in &cases {
        pods.create(
            &PostParams::default(),
            &gpu_pod(pod, scheduler, group, named(claim)),
        )
        .await
        .expect("pod");
    }
    for (pod, _, want) in &cases {
        let message = wait_unschedulable(&pods, pod, want).await;
        assert!(message.starts_with("0/"), "{message}");
    }
    // Nothing was written to the claims of pods that stay Pending.
    for claim in ["no-class", "failing-cel"] {
        let status = claims.get(claim).await.expect("claim").status;
        assert!(status.and_then(|s| s.allocation).is_none(), "{claim}");
    }
    let nodes: Api<Node> = Api::all(client.clone());
    assert!(nodes.get_opt(node).await.expect("node").is_some());
}
