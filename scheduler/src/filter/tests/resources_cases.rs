//! `NodeResourcesFit`: effective requests (init max vs app sum, sidecars, overhead),
//! free amounts after bound pods, scalar resources and pod count.

use serde_json::{Value, json};

use super::super::node_resources_fit::{filter, insufficient_resources};
use super::super::{FilterReason, NodeInfo, ResourceName};
use super::{container, info, input, node_with_allocatable, pod, pod_requesting};

/// A node with 10 CPUs, 20Gi, 50Gi ephemeral storage, 2 GPUs, 1Gi of 2Mi hugepages and
/// 32 pod slots, already running a pod that requests `used`.
fn node_using(used: Value) -> NodeInfo {
    let mut node = info(&node_with_allocatable(
        "n1",
        json!({ "cpu": "10", "memory": "20Gi", "ephemeral-storage": "50Gi", "pods": "32",
                "example.com/gpu": "2", "hugepages-2Mi": "1Gi" }),
    ));
    node.add_pod(&pod_requesting("existing", used))
        .expect("valid pod");
    node
}

/// `filter` as reason strings: empty when the pod fits.
fn reasons(pod: &super::PodFilterInput, node: &NodeInfo) -> Vec<String> {
    match filter(pod, node) {
        Ok(()) => Vec::new(),
        Err(reason) => reason.reasons().map(String::from).collect(),
    }
}

#[test]
fn app_requests_against_free_amounts() {
    let node = node_using(json!({ "cpu": "5", "memory": "19Gi" }));
    let cases: [(Value, &[&str]); 10] = [
        (json!({}), &[]),
        (json!({ "cpu": "1", "memory": "1Gi" }), &[]),
        (json!({ "cpu": "5" }), &[]),
        (json!({ "cpu": "5001m" }), &["Insufficient cpu"]),
        (json!({ "memory": "1025Mi" }), &["Insufficient memory"]),
        // Every shortfall is reported, natives first.
        (
            json!({ "cpu": "6", "memory": "2Gi" }),
            &["Insufficient cpu", "Insufficient memory"],
        ),
        (
            json!({ "ephemeral-storage": "51Gi" }),
            &["Insufficient ephemeral-storage"],
        ),
        (
            json!({ "hugepages-2Mi": "2Gi" }),
            &["Insufficient hugepages-2Mi"],
        ),
        (
            json!({ "example.com/gpu": "3", "cpu": "6" }),
            &["Insufficient cpu", "Insufficient example.com/gpu"],
        ),
        // A name that is neither native nor scalar is not compared.
        (json!({ "unknown-thing": "5" }), &[]),
    ];
    for (requests, want) in cases {
        let pod = input(&pod_requesting("p", requests.clone()));
        assert_eq!(reasons(&pod, &node), want, "{requests}");
    }
}

#[test]
fn scalar_resources_are_checked_even_when_the_node_lacks_them() {
    let node = node_using(json!({ "example.com/gpu": "1" }));
    let cases: [(Value, &[&str]); 5] = [
        (json!({ "example.com/gpu": "1" }), &[]),
        (
            json!({ "example.com/gpu": "2" }),
            &["Insufficient example.com/gpu"],
        ),
        (
            json!({ "example.com/fpga": "1" }),
            &["Insufficient example.com/fpga"],
        ),
        (
            json!({ "kubernetes.io/batch-cpu": "1" }),
            &["Insufficient kubernetes.io/batch-cpu"],
        ),
        (
            json!({ "hugepages-1Gi": "1Gi" }),
            &["Insufficient hugepages-1Gi"],
        ),
    ];
    for (requests, want) in cases {
        let pod = input(&pod_requesting("p", requests.clone()));
        assert_eq!(reasons(&pod, &node), want, "{requests}");
    }
    let missing = insufficient_resources(
        input(&pod_requesting("p", json!({ "example.com/gpu": "2" }))).request(),
        &node,
    );
    assert_eq!(missing.len(), 1);
    let gpu = &missing[0];
    assert_eq!(gpu.resource, ResourceName::Scalar("example.com/gpu".into()));
    assert_eq!((gpu.requested, gpu.used, gpu.capacity), (2, 1, 2));
}

#[test]
fn init_containers_take_the_max_and_sidecars_add_up() {
    // Free: 4 CPUs.
    let node = node_using(json!({ "cpu": "6" }));
    let restartable = |mut c: Value| {
        c["restartPolicy"] = json!("Always");
        c
    };
    let cases: [(Value, i64, bool); 7] = [
        // max(init 3, app 1) = 3.
        (
            json!({ "initContainers": [container("i", json!({"cpu": "3"}))],
                 "containers": [container("a", json!({"cpu": "1"}))] }),
            3000,
            true,
        ),
        // max(init 5, app 1) = 5: the init container alone does not fit.
        (
            json!({ "initContainers": [container("i", json!({"cpu": "5"}))],
                 "containers": [container("a", json!({"cpu": "1"}))] }),
            5000,
            false,
        ),
        // Init containers run one at a time: max(2, 3) = 3, not 5; apps add up: 1 + 2.
        (
            json!({ "initContainers": [container("i1", json!({"cpu": "2"})), container("i2", json!({"cpu": "3"}))],
                 "containers": [container("a1", json!({"cpu": "1"})), container("a2", json!({"cpu": "2"}))] }),
            3000,
            true,
        ),
        // A sidecar keeps running: app 3 + sidecar 2 = 5.
        (
            json!({ "initContainers": [restartable(container("s", json!({"cpu": "2"})))],
                 "containers": [container("a", json!({"cpu": "3"}))] }),
            5000,
            false,
        ),
        // An init container after a sidecar runs beside it: max(2 + 3, 2 + 1) = 5.
        (
            json!({ "initContainers": [restartable(container("s", json!({"cpu": "2"}))), container("i", json!({"cpu": "3"}))],
                 "containers": [container("a", json!({"cpu": "1"}))] }),
            5000,
            false,
        ),
        // ... but one before it does not: max(3, 2 + 1) = 3.
        (
            json!({ "initContainers": [container("i", json!({"cpu": "3"})), restartable(container("s", json!({"cpu": "2"})))],
                 "containers": [container("a", json!({"cpu": "1"}))] }),
            3000,
            true,
        ),
        // Overhead is added on top: 3500m + 500m = 4.
        (
            json!({ "containers": [container("a", json!({"cpu": "3500m"}))],
                 "overhead": { "cpu": "500m" } }),
            4000,
            true,
        ),
    ];
    for (spec, want_cpu, want_fit) in cases {
        let pod = input(&pod("p", spec.clone()));
        assert_eq!(pod.request().milli_cpu, want_cpu, "{spec}");
        let want: &[&str] = if want_fit { &[] } else { &["Insufficient cpu"] };
        assert_eq!(reasons(&pod, &node), want, "{spec}");
    }
}

#[test]
fn requests_default_from_limits() {
    let node = node_using(json!({}));
    let spec =
        json!({ "containers": [{ "name": "a", "resources": { "limits": { "cpu": "11" } } }] });
    assert_eq!(
        reasons(&input(&pod("p", spec)), &node),
        ["Insufficient cpu"]
    );
}

#[test]
fn pod_count_is_checked_even_without_requests() {
    let mut node = info(&node_with_allocatable(
        "n1",
        json!({ "cpu": "4", "pods": "2" }),
    ));
    let empty = input(&pod("p", json!({})));
    for uid in ["a", "b"] {
        assert_eq!(filter(&empty, &node), Ok(()));
        node.add_pod(&pod_requesting(uid, json!({}))).unwrap();
    }
    assert_eq!(reasons(&empty, &node), ["Too many pods"]);
    let big = input(&pod_requesting("p", json!({ "cpu": "5" })));
    assert_eq!(reasons(&big, &node), ["Too many pods", "Insufficient cpu"]);
    // No `pods` allocatable: no pod fits.
    let no_slots = info(&node_with_allocatable("n1", json!({ "cpu": "4" })));
    assert_eq!(reasons(&empty, &no_slots), ["Too many pods"]);
}

#[test]
fn terminal_pods_free_their_requests() {
    let mut node = node_using(json!({ "cpu": "8" }));
    let pod = input(&pod_requesting("p", json!({ "cpu": "4" })));
    assert_eq!(reasons(&pod, &node), ["Insufficient cpu"]);
    let mut done = pod_requesting("existing", json!({ "cpu": "8" }));
    done.status = Some(serde_json::from_value(json!({ "phase": "Succeeded" })).unwrap());
    node.add_pod(&done).unwrap();
    assert_eq!(node.pod_count(), 0);
    assert_eq!(filter(&pod, &node), Ok(()));
}

#[test]
fn reason_reports_plugin_and_joined_message() {
    let node = node_using(json!({ "cpu": "10", "memory": "20Gi" }));
    let reason = filter(
        &input(&pod_requesting("p", json!({ "cpu": "1", "memory": "1" }))),
        &node,
    )
    .unwrap_err();
    assert_eq!(reason.plugin().name(), "NodeResourcesFit");
    assert!(!reason.is_unresolvable());
    assert_eq!(reason.to_string(), "Insufficient cpu, Insufficient memory");
    assert!(matches!(reason, FilterReason::InsufficientResources(ref v) if v.len() == 2));
}
