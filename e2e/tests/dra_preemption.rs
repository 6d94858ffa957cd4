//! Preemption frees DRA devices: a high-priority pod whose GPU claim finds every GPU of
//! the node allocated to a lower-priority pod preempts that pod (not a lower-priority
//! pod whose eviction frees no GPU) and gets a GPU on the zone of its CPUs, judged by
//! the kubelet's own code (the referee).
//!
//! One simulated node, `single-numa-node`, two zones of 8 CPUs and one GPU on each.
//! `holder` (priority 10, not Guaranteed: no zones to line up with) holds both GPUs
//! through a claim for two; `bystander` (priority 5, no claim) holds nothing the
//! preemptor lacks. `urgent` (priority 100, 4 exclusive CPUs, one GPU) can only run
//! once `holder` is gone: evicting `bystander`, the cheaper victim when devices are not
//! counted, would not help.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use tas_e2e::dra::{
    self, TIMEOUT, create, generated_claim, gpu_claim, gpu_claim_template, node_of, wait_running,
};
use tas_e2e::in_process::InProcessStack;
use tas_nodesim::dra_driver::claim_template;
use tas_nodesim::request::PodKey;
use tas_testcluster::{NODE_SIM_LABEL, wait_for};

const LABEL: &str = "e2e.tas.dev/dra-preemption";
/// The driver, and the class that selects its devices.
const GPU: &str = "gpu.example.com";
/// The slice's GPUs and their NUMA zones.
const GPUS: [(&str, u32); 2] = [("gpu-0", 1), ("gpu-1", 0)];

/// A Burstable pod (a tenth of a CPU) of `priority_class` on the group's node, using
/// a claim from `template` when given.
fn burstable_pod(
    name: &str,
    stack: &InProcessStack,
    priority_class: &str,
    template: Option<&str>,
) -> Pod {
    let mut container = json!({"name": "app", "image": "app", "resources": {
        "requests": {"cpu": "100m", "memory": "100Mi"}}});
    let mut spec = json!({
        "schedulerName": stack.scheduler,
        "priorityClassName": priority_class,
        "nodeSelector": {LABEL: stack.group},
    });
    if let Some(template) = template {
        container["resources"]["claims"] = json!([{"name": "gpu"}]);
        spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": template}]);
    }
    spec["containers"] = json!([container]);
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {NODE_SIM_LABEL: "true"}},
        "spec": spec,
    }))
    .expect("pod")
}

async fn priority_class(client: &kube::Client, name: &str, value: i32) {
    let classes: Api<PriorityClass> = Api::all(client.clone());
    let class: Value = json!({"metadata": {"name": name}, "value": value});
    create(&classes, class).await;
}

fn zone_of(device: &str) -> u32 {
    dra::zone_of(&GPUS, device)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_preempts_the_holder_of_the_gpus_and_gets_one_on_its_cpus_zone() {
    let (client, stack, node) = dra::start_stack("dra-preempt", LABEL, GPU, &GPUS).await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &stack.ns);
    create(&templates, gpu_claim_template("one-gpu", GPU)).await;
    let two = gpu_claim("two-gpus", GPU, json!({"count": 2}));
    create(&templates, claim_template("two-gpus", two["spec"].clone())).await;
    let (bottom, low, urgent) = (
        format!("{}-bottom", stack.ns),
        format!("{}-low", stack.ns),
        format!("{}-urgent", stack.ns),
    );
    priority_class(&client, &bottom, 5).await;
    priority_class(&client, &low, 10).await;
    priority_class(&client, &urgent, 100).await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &stack.ns);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &stack.ns);
    pods.create(
        &PostParams::default(),
        &burstable_pod("holder", &stack, &low, Some("two-gpus")),
    )
    .await
    .expect("holder");
    pods.create(
        &PostParams::default(),
        &burstable_pod("bystander", &stack, &bottom, None),
    )
    .await
    .expect("bystander");
    let holder_claim = generated_claim(&pods, "holder").await;
    let holder = wait_running(&pods, "holder").await;
    wait_running(&pods, "bystander").await;
    dra::allocated_device(&claims, &holder_claim, &holder, GPU).await;

    let mut pod = dra::gpu_pod(
        "urgent",
        &stack.scheduler,
        json!({"nodeSelector": {LABEL: stack.group}}),
        json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}),
    );
    pod.spec.as_mut().expect("spec").priority_class_name = Some(urgent.clone());
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("urgent");
    let urgent_claim = generated_claim(&pods, "urgent").await;
    let ran = wait_for("urgent running, or bystander evicted", TIMEOUT, || async {
        if pods.get_opt("bystander").await?.is_none() {
            return Ok::<_, kube::Error>(Some(false));
        }
        let pod = pods.get("urgent").await?;
        Ok((dra::phase(&pod) == "Running").then_some(true))
    })
    .await
    .expect("urgent runs");
    assert!(ran, "bystander was evicted: it held no GPU");
    assert!(
        pods.get_opt("holder").await.expect("get").is_none()
            || pods
                .get("holder")
                .await
                .expect("get")
                .metadata
                .deletion_timestamp
                .is_some(),
        "holder was preempted"
    );
    let running = wait_running(&pods, "urgent").await;
    let device = dra::allocated_device(&claims, &urgent_claim, &running, GPU).await;
    let cpus = stack
        .sim
        .node(&node_of(&running).expect("bound"))
        .expect("node")
        .pod_zones(&PodKey::of(&running));
    assert_eq!(
        cpus.into_iter().collect::<Vec<_>>(),
        [zone_of(&device)],
        "urgent's GPU {device} is on the zone of its CPUs"
    );
    assert!(pods.get_opt("bystander").await.expect("get").is_some());

    for name in ["urgent", "bystander"] {
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .expect("deleted");
    }
    dra::stop_stack(&client, stack, &node, GPU).await;
}
