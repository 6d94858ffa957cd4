//! `filter_node`: kube-scheduler's plugin order, first failure wins, and reason
//! strings that aggregate across nodes.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::{FilterReason, Plugin, filter_node, node_name};
use super::{info, input, node, pod, verdict};

/// A node failing every plugin for [`demanding_pod`]: cordoned, not the named node,
/// tainted, wrong label, port taken, full.
fn hostile_node(name: &str) -> super::NodeInfo {
    let mut node = info(&node(
        name,
        json!({
            "metadata": { "labels": { "zone": "b" } },
            "spec": { "unschedulable": true,
                      "taints": [{ "key": "dedicated", "value": "infra", "effect": "NoSchedule" }] },
            "status": { "allocatable": { "cpu": "1", "pods": "1" } }
        }),
    ));
    node.add_pod(&pod(
        "existing",
        json!({ "containers": [{ "name": "a", "ports": [{ "containerPort": 80, "hostPort": 80 }] }] }),
    ))
    .unwrap();
    node
}

fn demanding_pod(overrides: Value) -> k8s_openapi::api::core::v1::Pod {
    let mut spec = json!({
        "nodeName": "n1",
        "nodeSelector": { "zone": "a" },
        "containers": [{ "name": "a", "ports": [{ "containerPort": 80, "hostPort": 80 }],
                         "resources": { "requests": { "cpu": "2" } } }]
    });
    if let (Some(spec), Value::Object(overrides)) = (spec.as_object_mut(), overrides) {
        spec.extend(overrides);
    }
    pod("p", spec)
}

#[test]
fn plugins_run_in_kube_scheduler_order() {
    let all = json!([{ "operator": "Exists" }]);
    let cordon = json!([{ "key": "node.kubernetes.io/unschedulable", "operator": "Exists" }]);
    let no_ports = json!([{ "name": "a", "resources": { "requests": { "cpu": "2" } } }]);
    // Each row fixes the pod for one more plugin, so the next one reports.
    let rows = [
        (json!({}), "node(s) were unschedulable"),
        (
            json!({ "tolerations": cordon }),
            "node(s) didn't match the requested node name",
        ),
        (
            json!({ "tolerations": cordon, "nodeName": "" }),
            "node(s) had untolerated taint {dedicated: infra}",
        ),
        (
            json!({ "tolerations": all, "nodeName": "" }),
            "node(s) didn't match Pod's node affinity/selector",
        ),
        (
            json!({ "tolerations": all, "nodeName": "", "nodeSelector": {} }),
            "node(s) didn't have free ports for the requested pod ports",
        ),
        (
            json!({ "tolerations": all, "nodeName": "", "nodeSelector": {}, "containers": no_ports }),
            "Too many pods, Insufficient cpu",
        ),
    ];
    let node = hostile_node("other");
    for (overrides, want) in rows {
        let got = verdict(&demanding_pod(overrides.clone()), &node);
        assert_eq!(got, Err(want.to_owned()), "{overrides}");
    }
}

#[test]
fn a_pod_that_fits_passes_every_plugin() {
    let node = info(&node(
        "n1",
        json!({ "metadata": { "labels": { "zone": "a" } },
                "status": { "allocatable": { "cpu": "4", "pods": "10" } } }),
    ));
    let pod = demanding_pod(json!({}));
    assert_eq!(verdict(&pod, &node), Ok(()));
    for plugin in Plugin::FILTER_ORDER {
        assert_eq!(plugin.filter(&input(&pod), &node), Ok(()), "{plugin}");
    }
}

#[test]
fn reasons_aggregate_across_nodes() {
    let pod = input(&pod(
        "p",
        json!({ "containers": [{ "name": "a", "resources": { "requests": { "cpu": "3" } } }] }),
    ));
    let nodes = [
        info(&node("n1", json!({ "spec": { "unschedulable": true } }))),
        info(&node(
            "n2",
            json!({ "status": { "allocatable": { "cpu": "2", "pods": "10" } } }),
        )),
        info(&node(
            "n3",
            json!({ "status": { "allocatable": { "cpu": "2", "pods": "10" } } }),
        )),
        info(&node(
            "n4",
            json!({ "status": { "allocatable": { "cpu": "8", "pods": "10" } } }),
        )),
    ];
    let mut counts = BTreeMap::<String, usize>::new();
    for node in &nodes {
        if let Err(reason) = filter_node(&pod, node) {
            for r in reason.reasons() {
                *counts.entry(r.into_owned()).or_default() += 1;
            }
        }
    }
    let counts: Vec<_> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    assert_eq!(
        counts,
        ["2 Insufficient cpu", "1 node(s) were unschedulable"]
    );
}

#[test]
fn every_reason_names_its_plugin() {
    let cases = [
        (FilterReason::Unschedulable, "NodeUnschedulable", true),
        (FilterReason::NodeNameMismatch, "NodeName", true),
        (
            FilterReason::UntoleratedTaint {
                key: "k".into(),
                value: "v".into(),
            },
            "TaintToleration",
            true,
        ),
        (FilterReason::AffinityMismatch, "NodeAffinity", true),
        (FilterReason::PortsInUse, "NodePorts", false),
        (
            FilterReason::InsufficientResources(Vec::new()),
            "NodeResourcesFit",
            false,
        ),
    ];
    for (reason, plugin, unresolvable) in cases {
        assert_eq!(reason.plugin().name(), plugin);
        assert_eq!(reason.plugin().to_string(), plugin);
        assert_eq!(reason.is_unresolvable(), unresolvable, "{reason:?}");
    }
}

#[test]
fn node_name_matches_exactly() {
    let n1 = info(&node("n1", json!({})));
    let cases = [
        (json!({}), true),
        (json!({ "nodeName": "n1" }), true),
        (json!({ "nodeName": "n2" }), false),
    ];
    for (spec, fits) in cases {
        let got = node_name::filter(&input(&pod("p", spec.clone())), &n1);
        assert_eq!(got.is_ok(), fits, "{spec}");
    }
}
