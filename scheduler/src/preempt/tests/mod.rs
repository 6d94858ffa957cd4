//! Victim selection (priorities, smallest set, the NUMA zone rule, budgets), the
//! nomination gate and budget counting, with builders shared by the cases.

mod budget_cases;
mod nomination_cases;
mod victim_cases;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};
use tas_api::nrt::v1alpha2::NodeResourceTopology;

use super::*;
use crate::affinity::NamespaceLabels;
use crate::cycle::{ClusterView, CycleSettings, TopologyView};
use crate::filter::NodeInfo;
use crate::numa::{NodeTopology, Resources};
use crate::test_support::{guaranteed_container, input, node, node_with, place, pod};

fn settings() -> CycleSettings {
    crate::test_support::cycle_settings(1)
}

/// A Guaranteed pod of `cpu` CPUs and `priority`.
fn gpod(name: &str, cpu: u32, priority: i32) -> Pod {
    pod(
        name,
        &[("app", name)],
        json!({"priority": priority, "containers": guaranteed_container(cpu)}),
    )
}

/// `zones[i]` = (allocatable CPUs, available CPUs); 8Gi of memory free per zone.
fn topology(policy: &str, zones: &[(u32, u32)]) -> TopologyView {
    let mut object = tas_testcluster::scope::nrt_object("x", policy, zones, "8Gi", None);
    object["attributes"][1] = json!({"name": "topologyManagerScope", "value": "pod"});
    let nrt: NodeResourceTopology = serde_json::from_value(object).expect("nrt");
    TopologyView::Known(Arc::new(NodeTopology::from_nrt(&nrt).expect("topology")))
}

/// [`topology`] with the containers' NUMA placement published the way
/// resource-topology-exporter writes it: container `app` of each pod (namespace
/// `default`) on its NUMA node.
fn topology_placed(policy: &str, zones: &[(u32, u32)], placed: &[(&str, usize)]) -> TopologyView {
    use tas_api::nrt::numa_placement::{ContainerRef, Payload};
    let mut object = tas_testcluster::scope::nrt_object("x", policy, zones, "8Gi", None);
    object["attributes"][1] = json!({"name": "topologyManagerScope", "value": "pod"});
    let mut nrt: NodeResourceTopology = serde_json::from_value(object).expect("nrt");
    let payload = Payload::encode(
        zones.len(),
        placed
            .iter()
            .map(|&(pod, zone)| (ContainerRef::new("default", pod, "app"), zone)),
    )
    .expect("encodes");
    payload.write_into(&mut nrt);
    TopologyView::Known(Arc::new(NodeTopology::from_nrt(&nrt).expect("topology")))
}

/// Runs the search; `(node, victim names)` of each plan, best first.
fn search(
    nodes: &[NodeInfo],
    views: &[TopologyView],
    preemptor: &Pod,
    budgets: &Budgets,
    reserved: &dyn Fn(&str, &str) -> Option<Resources>,
) -> Vec<(String, Vec<String>)> {
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let namespaces = NamespaceLabels::new();
    let cluster = ClusterView {
        nodes: &refs,
        namespaces: &namespaces,
    };
    let lookup = |name: &str| {
        let i = nodes.iter().position(|n| n.name() == name).expect("node");
        views[i].clone()
    };
    let pod = input(preemptor);
    victims::plans(&pod, &cluster, lookup, reserved, budgets, &settings(), 5)
        .into_iter()
        .map(|p| {
            let mut names: Vec<String> = p.victims.iter().map(|v| v.name.clone()).collect();
            names.sort();
            (p.node, names)
        })
        .collect()
}

/// [`search`] without budgets or reservations.
fn search_plain(
    nodes: &[NodeInfo],
    views: &[TopologyView],
    preemptor: &Pod,
) -> Vec<(String, Vec<String>)> {
    search(nodes, views, preemptor, &Budgets::default(), &none)
}

fn none(_: &str, _: &str) -> Option<Resources> {
    None
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}
