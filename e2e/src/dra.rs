//! Dynamic Resource Allocation objects and waits the DRA tests share: the test driver's
//! objects (a device class, a node-local ResourceSlice of GPUs with the standard
//! `numaNode` attribute, claims and templates for one GPU; built by
//! [`tas_nodesim::dra_driver`], which the benchmark uses too), a Guaranteed pod using
//! one, and the waits for the claim the control plane generates, the pod running and
//! the claim's allocation.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::DeleteParams;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tas_nodesim::Scenario;
use tas_testcluster::{
    NODE_SIM_LABEL, TestCluster, apply_crds_from_dir, crd_dir, create_or_keep, wait_for,
};

use crate::in_process::InProcessStack;

pub use tas_nodesim::dra_driver::{device_class, gpu_claim, gpu_claim_template, gpu_slice};

/// How long each wait of these helpers gives the stack.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Creates `object`, or leaves it if it exists (classes are shared by the tests of one
/// control plane).
pub async fn create<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = object["metadata"]["name"].clone();
    create_or_keep(api, object)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
}

/// One simulated node for a DRA test: `single-numa-node` in pod scope with the static
/// CPU manager, two zones of 8 CPUs and 8Gi, labelled `label` = `group`.
pub fn two_zone_node(label: &str, group: &str) -> Scenario {
    Scenario::from_yaml(&format!(
        "nodes:
- name: {group}
  topologyManagerPolicy: single-numa-node
  topologyManagerScope: pod
  cpuManagerPolicy: static
  labels: {{ {label}: {group} }}
  zones:
  - {{ count: 2, cpus: 8, memory: 8Gi }}
"
    ))
    .expect("scenario")
}

/// The zone of `device` among `gpus` (device, zone).
pub fn zone_of(gpus: &[(&str, u32)], device: &str) -> u32 {
    gpus.iter()
        .find(|(d, _)| *d == device)
        .map(|(_, z)| *z)
        .unwrap_or_else(|| panic!("unknown device {device}"))
}

/// A DRA test's stack on the shared control plane: the CRDs, the class of `driver`,
/// an [`InProcessStack`] of one [`two_zone_node`] labelled `label`, and that node's
/// slice of `gpus` (device, zone); the client, the stack and the node.
pub async fn start_stack(
    prefix: &str,
    label: &str,
    driver: &str,
    gpus: &[(&str, u32)],
) -> (Client, InProcessStack, String) {
    let cluster = TestCluster::shared().expect("cluster");
    let client = cluster.client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs");
    let classes: Api<DeviceClass> = Api::all(client.clone());
    classes
        .list(&Default::default())
        .await
        .expect("the control plane serves resource.k8s.io/v1");
    create(&classes, device_class(driver)).await;
    let stack = InProcessStack::start(
        &client,
        prefix,
        |group| two_zone_node(label, group),
        json!({}),
    )
    .await
    .expect("stack");
    let node = stack.sim.nodes().keys().next().expect("a node").clone();
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    create(&slices, gpu_slice(driver, &node, gpus)).await;
    (client, stack, node)
}

/// Deletes the slice [`start_stack`] created on `node` and stops the stack.
pub async fn stop_stack(client: &Client, stack: InProcessStack, node: &str, driver: &str) {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    slices
        .delete(&format!("{node}-{driver}"), &DeleteParams::default())
        .await
        .expect("slice deleted");
    stack.stop().await;
}

/// A Guaranteed pod of 4 CPUs whose container uses `claim` (a pod claim entry named
/// `gpu`); `placement` is merged into its spec (a `nodeSelector` or `affinity`).
pub fn gpu_pod(name: &str, scheduler: &str, placement: Value, claim: Value) -> Pod {
    let mut pod = json!({
        "metadata": {"name": name, "labels": {NODE_SIM_LABEL: "true"}},
        "spec": {
            "schedulerName": scheduler,
            "resourceClaims": [claim],
            "containers": [{"name": "app", "image": "app", "resources": {
                "requests": {"cpu": "4", "memory": "1Gi"},
                "limits": {"cpu": "4", "memory": "1Gi"},
                "claims": [{"name": "gpu"}]}}]
        }
    });
    if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), placement.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(pod).expect("pod")
}

/// The node the pod is bound to.
pub fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

/// The pod's phase (`Pending` when it has none).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// The name of the claim generated for the pod's first pod claim.
pub async fn generated_claim(pods: &Api<Pod>, name: &str) -> String {
    wait_for(format!("the claim of {name}"), TIMEOUT, || async {
        let pod = pods.get(name).await?;
        Ok::<_, kube::Error>(
            pod.status
                .and_then(|s| s.resource_claim_statuses)
                .and_then(|s| s.into_iter().next())
                .and_then(|s| s.resource_claim_name),
        )
    })
    .await
    .expect("generated")
}

/// Waits until `name` runs on a node and returns it; panics when the kubelet rejects it.
pub async fn wait_running(pods: &Api<Pod>, name: &str) -> Pod {
    let last = std::sync::Mutex::new(None);
    wait_for(format!("{name} running"), TIMEOUT, || async {
        let pod = pods.get(name).await?;
        assert_ne!(
            phase(&pod),
            "Failed",
            "the kubelet rejected {name}: {:?}",
            pod.status
        );
        *last.lock().expect("lock") = pod.status.clone();
        Ok::<_, kube::Error>((phase(&pod) == "Running").then_some(pod))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; its last status: {:?}", last.lock().expect("lock")))
}

/// The device of the claim's allocation (of `driver`), once it is reserved for `pod`.
pub async fn allocated_device(
    claims: &Api<ResourceClaim>,
    claim: &str,
    pod: &Pod,
    driver: &str,
) -> String {
    let uid = pod.uid().unwrap_or_default();
    wait_for(
        format!("{claim} allocated for {}", pod.name_any()),
        TIMEOUT,
        || async {
            let claim = claims.get(claim).await?;
            let Some(status) = claim.status else {
                return Ok::<_, kube::Error>(None);
            };
            let reserved = status
                .reserved_for
                .iter()
                .flatten()
                .any(|r| r.resource == "pods" && r.uid == uid);
            let device = status
                .allocation
                .and_then(|a| a.devices)
                .and_then(|d| d.results)
                .and_then(|r| r.into_iter().next())
                .map(|r| {
                    assert_eq!(r.driver, driver);
                    r.device
                });
            Ok(device.filter(|_| reserved))
        },
    )
    .await
    .expect("allocated")
}
