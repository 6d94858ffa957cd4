//! The store: devices per node gathered again only where a slice changed, the in-use
//! set from allocations and in-flight reservations, relists, and pod claims resolved.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::AllocationResult;
use serde_json::json;

use super::pod_claims::{self, ClaimProblem};
use super::*;
use crate::dra::{AllocatedDevice, ClaimAllocation};
use crate::test_support::dra::{DRIVER, allocated, claim, pod_claim, slice, slice_with};

fn device(pool: &str, name: &str) -> DeviceId {
    DeviceId::new(DRIVER, pool, name)
}

/// A store that knows nodes `a` and `b`, each with a node-local slice of two GPUs.
fn store() -> DraStore {
    let mut store = DraStore::default();
    for node in ["a", "b"] {
        store.upsert_node(node, BTreeMap::new());
        store.upsert_slice(slice(
            &format!("{node}-gpus"),
            node,
            &[("gpu-0", 0), ("gpu-1", 1)],
        ));
    }
    store
}

/// The new allocation of `claim` (`ns/name`) with `devices` of pool `pool`.
fn new_allocation(claim: &str, pool: &str, devices: &[&str]) -> Allocation {
    Allocation {
        claims: vec![ClaimAllocation {
            claim: claim.to_owned(),
            result: Some(AllocationResult::default()),
            devices: devices
                .iter()
                .map(|d| AllocatedDevice {
                    request: "gpu".to_owned(),
                    id: device(pool, d),
                    zones: None,
                })
                .collect(),
        }],
        aligned: false,
    }
}

fn in_use(store: &DraStore) -> Vec<String> {
    let mut out: Vec<String> = store
        .snapshot()
        .in_use
        .iter()
        .map(ToString::to_string)
        .collect();
    out.sort();
    out
}

#[test]
fn each_node_sees_its_own_slices_and_only_a_changed_node_is_gathered_again() {
    let mut store = store();
    let before = store.snapshot().devices;
    assert_eq!(before["a"].pools().len(), 1);
    assert_eq!(before["a"].node_name(), "a");
    // A third GPU on a: a's devices are new, b's the very same.
    store.upsert_slice(slice(
        "a-gpus",
        "a",
        &[("gpu-0", 0), ("gpu-1", 1), ("gpu-2", 1)],
    ));
    let after = store.snapshot().devices;
    assert!(!Arc::ptr_eq(&before["a"], &after["a"]));
    assert!(
        Arc::ptr_eq(&before["b"], &after["b"]),
        "b was gathered again"
    );
    let inventory = crate::dra::inventory(&after["a"], &Default::default());
    assert_eq!(inventory[DRIVER][&Some(1)].free, 2);
    // The same object again changes nothing.
    assert!(!store.upsert_slice(slice(
        "a-gpus",
        "a",
        &[("gpu-0", 0), ("gpu-1", 1), ("gpu-2", 1)]
    )));
    // Slices of unknown nodes give nothing until the node is seen.
    store.upsert_slice(slice("c-gpus", "c", &[("gpu-0", 0)]));
    assert!(!store.snapshot().devices.contains_key("c"));
    store.upsert_node("c", BTreeMap::new());
    assert!(store.snapshot().devices.contains_key("c"));
    store.remove_node("c");
    assert!(!store.snapshot().devices.contains_key("c"));
}

#[test]
fn cluster_wide_slices_reach_every_node_their_selector_selects() {
    let mut store = store();
    let selector = json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "fabric", "operator": "In", "values": ["yes"]}]}]}});
    store.upsert_slice(slice_with("fabric", selector, "fabric", &[("link-0", 0)]));
    let pools = |store: &DraStore, node: &str| {
        store.snapshot().devices[node]
            .pools()
            .iter()
            .map(|p| p.id.pool.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(pools(&store, "a"), ["a"], "not selected yet");
    // a's labels change: it is gathered again and now sees the fabric pool.
    store.upsert_node("a", BTreeMap::from([("fabric".into(), "yes".into())]));
    assert_eq!(pools(&store, "a"), ["a", "fabric"]);
    assert_eq!(pools(&store, "b"), ["b"]);
    store.upsert_slice(slice_with(
        "everywhere",
        json!({"allNodes": true}),
        "shared",
        &[("x", 0)],
    ));
    assert_eq!(pools(&store, "b"), ["b", "shared"]);
    store.remove_slice("everywhere");
    assert_eq!(pools(&store, "b"), ["b"]);
}

#[test]
fn allocated_claims_hold_their_devices_until_deallocated_or_deleted() {
    let mut store = store();
    let c = claim("ns", "c", DRIVER, 1);
    assert!(
        store.upsert_claim(c.clone()),
        "a new claim may help a waiting pod"
    );
    assert!(in_use(&store).is_empty());
    let held = allocated(c.clone(), "a", "a", &["gpu-0"], &[("p", "uid-p")]);
    assert!(
        !store.upsert_claim(held.clone()),
        "allocating frees nothing"
    );
    assert_eq!(in_use(&store), ["gpu.example.com/a/gpu-0"]);
    // Deallocated by the ResourceClaim controller: freed, which may help.
    assert!(store.upsert_claim(c.clone()));
    assert!(in_use(&store).is_empty());
    store.upsert_claim(held);
    assert!(store.remove_claim("ns", "c"));
    assert!(in_use(&store).is_empty());
}

#[test]
fn devices_in_flight_count_until_the_watch_shows_them_allocated() {
    let mut store = store();
    let c = claim("ns", "c", DRIVER, 1);
    store.upsert_claim(c.clone());
    store.hold("uid-p", &new_allocation("ns/c", "a", &["gpu-1"]));
    assert_eq!(in_use(&store), ["gpu.example.com/a/gpu-1"]);
    assert_eq!(store.in_flight(), [("uid-p".to_owned(), 1)]);
    // The write landed: counted from the claim now, never from neither.
    store.upsert_claim(allocated(
        c.clone(),
        "a",
        "a",
        &["gpu-1"],
        &[("p", "uid-p")],
    ));
    assert_eq!(in_use(&store), ["gpu.example.com/a/gpu-1"]);
    assert!(store.in_flight().is_empty(), "the in-flight entry went");
    assert!(!store.release("uid-p"), "nothing left to release");
    assert_eq!(in_use(&store), ["gpu.example.com/a/gpu-1"]);

    // Released before landing (the writes failed and were undone): free at once.
    store.hold("uid-q", &new_allocation("ns/d", "b", &["gpu-0"]));
    assert!(store.release("uid-q"));
    assert_eq!(in_use(&store), ["gpu.example.com/a/gpu-1"]);

    // The claim went away before its allocation was seen: nothing will land.
    store.upsert_claim(claim("ns", "e", DRIVER, 1));
    store.hold("uid-r", &new_allocation("ns/e", "b", &["gpu-1"]));
    assert!(store.remove_claim("ns", "e"), "its devices were freed");
    assert!(store.in_flight().is_empty());
    assert_eq!(in_use(&store), ["gpu.example.com/a/gpu-1"]);
}

#[test]
fn a_relist_forgets_vanished_slices_classes_and_claims() {
    let mut store = store();
    store.upsert_class(crate::test_support::dra::class(DRIVER, &[]));
    store.upsert_claim(allocated(
        claim("ns", "kept", DRIVER, 1),
        "a",
        "a",
        &["gpu-0"],
        &[],
    ));
    store.upsert_claim(allocated(
        claim("ns", "gone", DRIVER, 1),
        "b",
        "b",
        &["gpu-0"],
        &[],
    ));
    assert!(store.retain_claims(|_, name| name == "kept"));
    assert_eq!(in_use(&store), ["gpu.example.com/a/gpu-0"]);
    assert!(store.claim("ns", "gone").is_none());
    store.retain_slices(|name| name == "a-gpus");
    assert!(!store.snapshot().devices.contains_key("b"));
    store.retain_classes(|_| false);
    assert!(store.snapshot().classes.is_empty());
    store.retain_nodes(|_| false);
    assert!(store.snapshot().devices.is_empty());
}

fn pod(claims: serde_json::Value, statuses: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"},
        "spec": {"containers": [{"name": "app"}], "resourceClaims": claims},
        "status": {"resourceClaimStatuses": statuses}
    }))
    .expect("pod")
}

#[test]
fn pod_claims_resolve_by_name_or_through_their_template() {
    let mut store = store();
    let template = json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
    let waiting = pod(template.clone(), json!([]));
    assert_eq!(
        pod_claims::resolve(&store, &waiting)
            .unwrap_err()
            .to_string(),
        "waiting for the ResourceClaim of pod claim gpu (template one-gpu) to be created"
    );
    let generated = pod(
        template.clone(),
        json!([{"name": "gpu", "resourceClaimName": "p-gpu"}]),
    );
    assert_eq!(
        pod_claims::resolve(&store, &generated)
            .unwrap_err()
            .to_string(),
        "waiting for ResourceClaim ns/p-gpu to be created"
    );
    let mut owned = claim("ns", "p-gpu", DRIVER, 1);
    owned.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "uid-other",
        "controller": true}))
        .expect("owner"),
    ]);
    store.upsert_claim(owned.clone());
    assert!(matches!(
        pod_claims::resolve(&store, &generated),
        Err(ClaimProblem::NotForPod(_))
    ));
    owned.metadata.owner_references.as_mut().expect("set")[0].uid = "uid-p".into();
    store.upsert_claim(owned);
    let claims = pod_claims::resolve(&store, &generated).expect("resolved");
    assert_eq!(claims.len(), 1);
    // No claim needed: the entry names none.
    let none_needed = pod(template, json!([{"name": "gpu"}]));
    assert!(
        pod_claims::resolve(&store, &none_needed)
            .expect("ok")
            .is_empty()
    );
}

#[test]
fn deleted_or_full_claims_refuse_the_pod() {
    let mut store = store();
    let named = pod(json!([pod_claim("gpu", "shared")]), json!([]));
    let mut deleting = claim("ns", "shared", DRIVER, 1);
    deleting.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2024-01-01T00:00:00Z")).expect("time"));
    store.upsert_claim(deleting);
    assert_eq!(
        pod_claims::resolve(&store, &named).unwrap_err().to_string(),
        "ResourceClaim ns/shared is being deleted"
    );
    let consumers: Vec<(String, String)> = (0..pod_claims::MAX_CONSUMERS)
        .map(|i| (format!("p{i}"), format!("uid-{i}")))
        .collect();
    let refs: Vec<(&str, &str)> = consumers
        .iter()
        .map(|(n, u)| (n.as_str(), u.as_str()))
        .collect();
    let full = allocated(
        claim("ns", "shared", DRIVER, 1),
        "a",
        "a",
        &["gpu-0"],
        &refs,
    );
    store.upsert_claim(full.clone());
    assert!(matches!(
        pod_claims::resolve(&store, &named),
        Err(ClaimProblem::Full(_))
    ));
    // A pod already among the consumers is not refused.
    let mut listed = refs.clone();
    listed[0] = ("p", "uid-p");
    store.upsert_claim(allocated(
        claim("ns", "shared", DRIVER, 1),
        "a",
        "a",
        &["gpu-0"],
        &listed,
    ));
    assert!(pod_claims::resolve(&store, &named).is_ok());
}
