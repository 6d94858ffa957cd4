//! A ResourceClaim changed by someone else between TAS's read and its write: the write
//! (made against the version TAS read) meets a real 409 Conflict from the API server,
//! and the pod is retried with back-off, not hot-looped and not lost, with an Event
//! saying why; the retry reads the claim as it now is and binds the pod.

use crate::env;
use crate::fault_proxy::FaultProxy;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use std::time::Duration;
use tas_testcluster::create_or_keep;

const DRIVER: &str = "gpu.example.com";

/// Creates `object` unless one of its name exists.
async fn create<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    create_or_keep(api, object).await.expect("created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_changed_before_the_write_is_retried_with_backoff_and_then_bound() {
    let mut env = env("dra-conflict").await;
    let proxy = FaultProxy::start(env.client.clone(), Duration::ZERO).await;
    let node = env.node(16).await;
    env.nrt(&node, "single-numa-node", &[(8, 8), (8, 8)], None)
        .await;
    let classes: Api<DeviceClass> = Api::all(env.client.clone());
    create(
        &classes,
        json!({"metadata": {"name": DRIVER}, "spec": {"selectors": [
            {"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]}}),
    )
    .await;
    let slices: Api<ResourceSlice> = Api::all(env.client.clone());
    let slice = format!("{node}-gpus");
    let numa = |zone: i64| json!({"resource.kubernetes.io/numaNode": {"int": zone}});
    create(
        &slices,
        json!({"metadata": {"name": slice}, "spec": {
            "driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": numa(0)},
                        {"name": "gpu-1", "attributes": numa(1)}]}}),
    )
    .await;
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), &env.ns);
    create(
        &claims,
        json!({"metadata": {"name": "gpu"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}]}}}),
    )
    .await;

    env.start_scheduler_with(proxy.client(), json!({}));
    proxy.touch_next_claim_writes(1);
    let resources = json!({"requests": {"cpu": "2", "memory": "1Gi"},
                           "limits": {"cpu": "2", "memory": "1Gi"},
                           "claims": [{"name": "gpu"}]});
    env.create_pod(
        "p",
        json!({}),
        json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
               "containers": [{"name": "app", "image": "app", "resources": resources}]}),
    )
    .await;

    assert_eq!(env.wait_bound("p").await, node);
    let failed = env.failed_scheduling("p").await;
    assert!(
        failed.contains(&format!("ResourceClaim {}/gpu changed", env.ns))
            && failed.contains("409")
            && failed.contains("retried"),
        "{failed}"
    );
    let claim = claims.get("gpu").await.expect("claim");
    let status = claim.status.expect("status");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let uid = pods.get("p").await.expect("pod").uid();
    assert!(
        status
            .reserved_for
            .iter()
            .flatten()
            .any(|r| Some(&r.uid) == uid.as_ref()),
        "reserved for the pod"
    );
    let device = status
        .allocation
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .and_then(|r| r.into_iter().next())
        .map(|r| r.device);
    assert_eq!(device.as_deref(), Some("gpu-0"), "on zone 0 with the CPUs");

    let writes = proxy.record().claim_writes.clone();
    let conflicts: Vec<usize> = writes
        .iter()
        .enumerate()
        .filter(|(_, w)| w.status == 409)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(conflicts, [0], "one conflict, the first write: {writes:?}");
    assert!(writes.len() <= 4, "not hot-looped: {writes:?}");
    let retried_after = writes[1].arrived - writes[0].arrived;
    assert!(
        retried_after >= Duration::from_millis(500),
        "retried after a back-off, not at once: {retried_after:?}"
    );

    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    slices
        .delete(&slice, &DeleteParams::default())
        .await
        .expect("slice deleted");
}
