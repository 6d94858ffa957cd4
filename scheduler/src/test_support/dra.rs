//! Builders of DRA objects for the tests of the store, the filter and the claim
//! writes: ResourceSlices of GPUs on NUMA zones, a class, claims, written as JSON.

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

/// The driver (and class name) of the test devices.
pub const DRIVER: &str = "gpu.example.com";

/// A node-local slice `name` of `node`, one pool named after the node, with a GPU per
/// `(device, zone)`.
pub fn slice(name: &str, node: &str, devices: &[(&str, i64)]) -> ResourceSlice {
    slice_with(name, json!({"nodeName": node}), node, devices)
}

/// A slice reaching nodes as `reach` says (`{"allNodes": true}`, `{"nodeSelector": ..}`,
/// `{"nodeName": ..}`), in pool `pool`.
pub fn slice_with(name: &str, reach: Value, pool: &str, devices: &[(&str, i64)]) -> ResourceSlice {
    let devices: Vec<Value> = devices
        .iter()
        .map(|(device, zone)| {
            json!({"name": device, "attributes": {
                "resource.kubernetes.io/numaNode": {"int": zone},
                "model": {"string": "test"}
            }})
        })
        .collect();
    let mut spec = json!({
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    });
    if let (Some(spec), Some(reach)) = (spec.as_object_mut(), reach.as_object()) {
        for (k, v) in reach {
            spec.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("slice")
}

/// The class of the test GPUs, with `selectors` (CEL expressions) of its own.
pub fn class(name: &str, selectors: &[&str]) -> DeviceClass {
    let selectors: Vec<Value> = selectors
        .iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selectors": selectors}
    }))
    .expect("class")
}

/// An unallocated claim `ns/name` (uid `uid-<name>`, resourceVersion 1) for `count`
/// devices of class `class`.
pub fn claim(ns: &str, name: &str, class: &str, count: i64) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
            "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": class, "count": count}}]}}
    }))
    .expect("claim")
}

/// `claim` allocated `devices` (of [`DRIVER`], pool `pool`) on `node`, reserved for
/// the pods of `consumers` (`(name, uid)`).
pub fn allocated(
    mut claim: ResourceClaim,
    node: &str,
    pool: &str,
    devices: &[&str],
    consumers: &[(&str, &str)],
) -> ResourceClaim {
    let results: Vec<Value> = devices
        .iter()
        .map(|d| json!({"request": "gpu", "driver": DRIVER, "pool": pool, "device": d}))
        .collect();
    let reserved: Vec<Value> = consumers
        .iter()
        .map(|(name, uid)| json!({"resource": "pods", "name": name, "uid": uid}))
        .collect();
    claim.status = Some(
        serde_json::from_value(json!({
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
            },
            "reservedFor": reserved,
        }))
        .expect("status"),
    );
    claim
}

/// A `spec.resourceClaims` entry naming claim `claim`.
pub fn pod_claim(name: &str, claim: &str) -> Value {
    json!({"name": name, "resourceClaimName": claim})
}
