//! The DRA step of a decision on nodes with two zones of 8 CPUs (single-numa-node,
//! pod scope): a pod of 4 exclusive CPUs lands on zone 0, and its GPU must follow
//! (`Required`) or should (`Preferred`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::*;
use crate::cycle::{Decision, PodInput, TopologyView, decide, dra_choice};
use crate::dra::DeviceId;
use crate::dra_state::DraStore;
use crate::filter::PodFilterInput;
use crate::numa::PodRequest;
use crate::test_support::dra::{DRIVER, allocated, claim, class, slice};

fn node(name: &str) -> NodeInfo {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
    }))
    .expect("node");
    NodeInfo::new(&n).expect("node info")
}

fn topology(name: &str) -> TopologyView {
    crate::test_support::two_zones(name, [8, 8])
}

/// Node `a` has its GPU on zone 1, node `b` on zone 0.
fn store() -> DraStore {
    let mut store = DraStore::default();
    for (node, zone) in [("a", 1), ("b", 0)] {
        store.upsert_node(node, BTreeMap::new());
        store.upsert_slice(slice(&format!("{node}-gpus"), node, &[("gpu-0", zone)]));
    }
    store.upsert_class(class(DRIVER, &[]));
    store
}

/// A pod of `cpu` CPUs (Guaranteed when `exclusive`) with claim `ns/c`, as the
/// attempt resolves it against `store`.
fn pod(store: &DraStore, cpu: &str, exclusive: bool, alignment: DraAlignment) -> PodInput {
    let limits = if exclusive {
        json!({"cpu": cpu, "memory": "1Gi"})
    } else {
        json!({})
    };
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"},
        "spec": {"containers": [{"name": "app", "resources": {
            "requests": {"cpu": cpu, "memory": "1Gi"}, "limits": limits}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}
    }))
    .expect("pod");
    PodInput {
        uid: "uid-p".into(),
        filter: PodFilterInput::new(&pod).expect("filter"),
        request: PodRequest::from_pod(&pod).expect("request"),
        dra: Some(Arc::new(DraInput {
            claims: vec![claim("ns", "c", DRIVER, 1)],
            cluster: store.snapshot(),
            alignment,
            selectors: Arc::new(SelectorCache::new()),
        })),
    }
}

fn decide_on(pod: &PodInput, names: &[&str]) -> Decision {
    let nodes: Vec<NodeInfo> = names.iter().map(|n| node(n)).collect();
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    decide(
        pod,
        &refs,
        topology,
        &crate::test_support::cycle_settings(1),
    )
}

fn chosen(decision: Decision, total: usize) -> String {
    match decision {
        Decision::Schedule(c) => c.node,
        Decision::Unschedulable(r) => panic!("{}", r.message(total)),
    }
}

#[test]
fn required_takes_only_the_node_whose_gpu_shares_the_cpus_zone() {
    let store = store();
    let input = pod(&store, "4", true, DraAlignment::Required);
    assert_eq!(chosen(decide_on(&input, &["a", "b"]), 2), "b");
    let Decision::Unschedulable(reasons) = decide_on(&input, &["a"]) else {
        panic!("a's GPU is on the other zone");
    };
    assert_eq!(
        reasons.message(1),
        "0/1 nodes are available: 1 DRA devices of claim ns/c are not on NUMA zone(s) 0 where the kubelet will put the pod's CPUs (a)."
    );
    let choice = dra_choice(&input, &node("b"), topology("b"))
        .expect("a pod with claims")
        .expect("fits b");
    assert_eq!(choice.outcome, DraOutcome::Aligned);
    assert_eq!(choice.devices(), ["gpu.example.com/b/gpu-0 (NUMA 0)"]);
    assert!(choice.allocation.claims[0].result.is_some());
}

#[test]
fn preferred_falls_back_to_any_zone_and_scores_it_lower() {
    let store = store();
    let input = pod(&store, "4", true, DraAlignment::Preferred);
    assert_eq!(
        chosen(decide_on(&input, &["a", "b"]), 2),
        "b",
        "aligned wins"
    );
    assert_eq!(chosen(decide_on(&input, &["a"]), 1), "a");
    let choice = dra_choice(&input, &node("a"), topology("a"))
        .expect("claims")
        .expect("fits a");
    assert_eq!(choice.outcome, DraOutcome::Unaligned);
    assert_eq!(choice.devices(), ["gpu.example.com/a/gpu-0 (NUMA 1)"]);
}

#[test]
fn pods_without_exclusive_cpus_and_nodes_without_topology_take_any_zone() {
    let store = store();
    let shared_cpus = pod(&store, "500m", false, DraAlignment::Required);
    let choice = dra_choice(&shared_cpus, &node("a"), topology("a"))
        .expect("claims")
        .expect("fits");
    assert_eq!(choice.outcome, DraOutcome::Unconstrained);
    let exclusive = pod(&store, "4", true, DraAlignment::Required);
    let choice = dra_choice(&exclusive, &node("a"), TopologyView::Missing)
        .expect("claims")
        .expect("fits");
    assert_eq!(choice.outcome, DraOutcome::Unconstrained);
}

#[test]
fn devices_in_use_and_claims_allocated_elsewhere_refuse_the_node() {
    let mut store = store();
    store.upsert_claim(allocated(
        claim("ns", "other", DRIVER, 1),
        "b",
        "b",
        &["gpu-0"],
        &[],
    ));
    assert!(
        store
            .snapshot()
            .in_use
            .contains(&DeviceId::new(DRIVER, "b", "gpu-0"))
    );
    let input = pod(&store, "4", true, DraAlignment::Required);
    let Decision::Unschedulable(reasons) = decide_on(&input, &["b"]) else {
        panic!("b's only GPU is taken");
    };
    let message = reasons.message(1);
    assert!(
        message.contains(
            "DRA: claim ns/c, request gpu: needs 1 device(s), 0 free of 1 matching (1 in use"
        ),
        "{message}"
    );

    // The pod's own claim, allocated by someone else for node b: only b may take it.
    let mut input = pod(&DraStore::default(), "4", true, DraAlignment::Required);
    let dra = Arc::get_mut(input.dra.as_mut().expect("claims")).expect("unshared");
    dra.claims = vec![allocated(
        claim("ns", "c", DRIVER, 1),
        "b",
        "b",
        &["gpu-0"],
        &[],
    )];
    dra.cluster = self::store().snapshot();
    let Decision::Unschedulable(reasons) = decide_on(&input, &["a"]) else {
        panic!("allocated for b");
    };
    assert!(
        reasons.message(1).contains(
            "DRA: claim ns/c: allocated for other nodes (its node selector does not select a)"
        ),
        "{}",
        reasons.message(1)
    );
    assert_eq!(chosen(decide_on(&input, &["a", "b"]), 2), "b");
}

#[test]
fn problems_of_the_claims_themselves_are_found_once_before_any_node() {
    let store = store();
    let mut input = pod(&store, "4", true, DraAlignment::Required);
    let dra = Arc::get_mut(input.dra.as_mut().expect("claims")).expect("unshared");
    assert!(dra.check().is_ok());
    dra.claims = vec![claim("ns", "c", "no-such-class", 1)];
    let e = dra.check().expect_err("no class");
    assert!(e.is_permanent());
    assert_eq!(
        e.to_string(),
        "claim ns/c, request gpu: device class \"no-such-class\" not found"
    );
    let mut bad = store;
    bad.upsert_class(class(
        "broken",
        &["device.attributes[\"gpu.example.com\"].model =="],
    ));
    dra.cluster = bad.snapshot();
    dra.claims = vec![claim("ns", "c", "broken", 1)];
    let e = dra.check().expect_err("does not compile");
    assert!(
        e.to_string()
            .contains("class broken: selector #0: CEL compile error"),
        "{e}"
    );
}

#[test]
fn a_selector_failing_at_runtime_fails_the_node_with_its_message() {
    let mut store = store();
    // Every device has the attribute `model`, none has `memory`: a runtime error.
    store.upsert_class(class(
        "picky",
        &["device.attributes[\"gpu.example.com\"].memory > 1"],
    ));
    let mut input = pod(&store, "4", true, DraAlignment::Required);
    let dra = Arc::get_mut(input.dra.as_mut().expect("claims")).expect("unshared");
    dra.claims = vec![claim("ns", "c", "picky", 1)];
    assert!(dra.check().is_ok(), "compiles; fails per device");
    let Decision::Unschedulable(reasons) = decide_on(&input, &["b"]) else {
        panic!("the selector fails");
    };
    let message = reasons.message(1);
    assert!(message.contains("CEL runtime error"), "{message}");
    assert!(
        message.contains("class picky: selector #0 on device gpu.example.com/b/gpu-0"),
        "{message}"
    );
}

/// The pod's own claim already allocated (by an earlier attempt whose bind failed
/// before the undo landed, or for a pod sharing it) on zone 1, where the kubelet will
/// not put the pod's CPUs: `Required` refuses the node rather than bind with the GPU
/// across the interconnect; `Preferred` takes it, unaligned.
#[test]
fn an_allocated_claim_off_the_cpus_zone_refuses_the_node_under_required() {
    for alignment in [DraAlignment::Required, DraAlignment::Preferred] {
        let mut input = pod(&DraStore::default(), "4", true, alignment);
        let dra = Arc::get_mut(input.dra.as_mut().expect("claims")).expect("unshared");
        dra.claims = vec![allocated(
            claim("ns", "c", DRIVER, 1),
            "a",
            "a",
            &["gpu-0"],
            &[],
        )];
        dra.cluster = self::store().snapshot();
        let fit = dra_choice(&input, &node("a"), topology("a")).expect("claims");
        match alignment {
            DraAlignment::Required => assert_eq!(
                fit.expect_err("gpu-0 of a is on zone 1"),
                "DRA devices of claim ns/c are not on NUMA zone(s) 0 where the kubelet will put the pod's CPUs"
            ),
            DraAlignment::Preferred => {
                let choice = fit.expect("taken, unaligned");
                assert_eq!(choice.outcome, DraOutcome::Unaligned);
                assert!(choice.allocation.claims[0].result.is_none(), "not moved");
            }
        }
    }
}
