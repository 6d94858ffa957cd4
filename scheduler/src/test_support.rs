//! Builders shared by the unit tests of the cluster-wide plugins and preemption: nodes
//! with labels, pods written as JSON, and a pod placed on a node.

pub mod dra;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use std::sync::Arc;

use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::NodesWithoutTopology;

use crate::cycle::{CycleSettings, PodInput, TopologyView};
use crate::filter::{NodeInfo, PodFilterInput};
use crate::numa::PodRequest;
use crate::numa::{NodeTopology, ScoreConfig};

/// A node with 16 CPUs, 64Gi and room for 110 pods, its hostname label and `labels`.
pub fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    node_with(name, labels, json!({}))
}

/// As [`node`], with extra `spec` fields (taints, ...).
pub fn node_with(name: &str, labels: &[(&str, &str)], spec: Value) -> NodeInfo {
    let mut all = serde_json::Map::new();
    all.insert("kubernetes.io/hostname".into(), json!(name));
    for (k, v) in labels {
        all.insert((*k).into(), json!(v));
    }
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": all},
        "spec": spec,
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
    }))
    .expect("node");
    NodeInfo::new(&n).expect("node info")
}

/// A pod written as JSON: `name` in `default` (uid `uid-<name>`), one container of
/// 100m CPU (Burstable), with `spec` fields merged in and `labels`.
pub fn pod(name: &str, labels: &[(&str, &str)], spec: Value) -> Pod {
    pod_in("default", name, labels, spec)
}

/// As [`pod`], in namespace `ns`.
pub fn pod_in(ns: &str, name: &str, labels: &[(&str, &str)], spec: Value) -> Pod {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).into(), json!(v)))
        .collect();
    let mut s =
        json!({"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]});
    if let (Some(base), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"), "labels": labels},
        "spec": s
    }))
    .expect("pod")
}

/// A container of `cpu` whole CPUs and 1Gi, requests equal to limits.
pub fn guaranteed_container(cpu: u32) -> Value {
    json!([{"name": "app", "resources": {
        "requests": {"cpu": cpu.to_string(), "memory": "1Gi"},
        "limits": {"cpu": cpu.to_string(), "memory": "1Gi"}}}])
}

/// Places `pod` on `node`.
pub fn place(node: &mut NodeInfo, pod: &Pod) {
    node.add_pod(pod).expect("pod added");
}

/// The pod parsed for a decision.
pub fn input(pod: &Pod) -> PodInput {
    PodInput {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        filter: PodFilterInput::new(pod).expect("filter input"),
        request: PodRequest::from_pod(pod).expect("request"),
        dra: None,
    }
}

/// Shared state with default settings, a disabled event sender and fresh metrics.
pub fn shared() -> std::sync::Arc<crate::shared::Shared> {
    use crate::cache::{CacheMetrics, TopologyCache};
    let settings =
        crate::config::Settings::from_config(&Default::default()).expect("default settings");
    let cache = TopologyCache::new(
        crate::cache::CacheConfig::from_settings(&settings),
        CacheMetrics::default(),
    );
    crate::shared::Shared::new(
        settings,
        cache,
        crate::metrics::Metrics::new(),
        crate::events::EventSender::disabled(),
        crate::telemetry::Telemetry::off(),
    )
}

/// Decision settings of the tests: default scoring, nodes without topology judged at
/// node level, `parallelism` workers, every node judged.
pub fn cycle_settings(parallelism: usize) -> CycleSettings {
    CycleSettings {
        score: ScoreConfig::default(),
        nodes_without_topology: NodesWithoutTopology::Schedule,
        parallelism,
        sampling: Default::default(),
    }
}

/// Two zones with `free` CPUs each available (8 allocatable, 32Gi each),
/// single-numa-node, pod scope.
pub fn two_zones(name: &str, free: [u32; 2]) -> TopologyView {
    let nrt = two_zones_nrt(name, free);
    TopologyView::Known(Arc::new(NodeTopology::from_nrt(&nrt).expect("topology")))
}

/// The NodeResourceTopology object of [`two_zones`].
pub fn two_zones_nrt(name: &str, free: [u32; 2]) -> NodeResourceTopology {
    let zone = |id: u32, f: u32| {
        json!({"name": format!("node-{id}"), "type": "Node", "resources": [
            {"name": "cpu", "capacity": "8", "allocatable": "8", "available": f.to_string()},
            {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"}
        ]})
    };
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "pod"}
        ],
        "zones": [zone(0, free[0]), zone(1, free[1])]
    }))
    .expect("nrt")
}

/// The Node object of [`node`] without labels, as the scheduler's watch receives it.
pub fn node_object(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
    }))
    .expect("node")
}
