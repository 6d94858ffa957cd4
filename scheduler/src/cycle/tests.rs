use super::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use tas_api::nrt::v1alpha2::NodeResourceTopology;

fn node(name: &str, cpu: &str) -> NodeInfo {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}
    }))
    .unwrap();
    NodeInfo::new(&n).unwrap()
}

/// Two zones with `free` CPUs each available (8 allocatable), single-numa-node, pod scope.
fn topo(name: &str, free: [u32; 2]) -> TopologyView {
    let zone = |id: u32, f: u32| {
        json!({"name": format!("node-{id}"), "type": "Node", "resources": [
            {"name": "cpu", "capacity": "8", "allocatable": "8", "available": f.to_string()},
            {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"}
        ]})
    };
    let nrt: NodeResourceTopology = serde_json::from_value(json!({
        "metadata": {"name": name},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "pod"}
        ],
        "zones": [zone(0, free[0]), zone(1, free[1])]
    }))
    .unwrap();
    TopologyView::Known(Arc::new(NodeTopology::from_nrt(&nrt).unwrap()))
}

fn guaranteed(cpu: &str) -> PodInput {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-1"},
        "spec": {"containers": [{"name": "app", "resources": {
            "requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}}}]}
    }))
    .unwrap();
    PodInput {
        uid: "uid-1".into(),
        filter: PodFilterInput::new(&pod).unwrap(),
        request: PodRequest::from_pod(&pod).unwrap(),
    }
}

fn settings(parallelism: usize) -> CycleSettings {
    CycleSettings {
        score: ScoreConfig::default(),
        nodes_without_topology: NodesWithoutTopology::Schedule,
        parallelism,
    }
}

#[test]
fn picks_the_only_node_whose_zone_fits() {
    let nodes = [node("a", "16"), node("b", "16")];
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    // a: 4+4 free (6 needs one zone: no); b: 2+6 free.
    let lookup = |n: &str| {
        if n == "a" {
            topo(n, [4, 4])
        } else {
            topo(n, [2, 6])
        }
    };
    match decide(&guaranteed("6"), &refs, lookup, &settings(1)) {
        Decision::Schedule(c) => assert_eq!(c.node, "b"),
        Decision::Unschedulable(r) => panic!("{}", r.message(2)),
    }
}

#[test]
fn explains_every_node() {
    let nodes = [node("a", "16"), node("b", "4"), node("c", "16")];
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let lookup = |n: &str| match n {
        "c" => {
            let bad: NodeResourceTopology = serde_json::from_value(
                json!({"metadata": {"name": "c"}, "zones": [{"name": "bogus", "type": "Node"}]}),
            )
            .unwrap();
            TopologyView::Invalid(Arc::new(NodeTopology::from_nrt(&bad).unwrap_err()))
        }
        _ => topo(n, [4, 4]),
    };
    let Decision::Unschedulable(r) = decide(&guaranteed("6"), &refs, lookup, &settings(1)) else {
        panic!("nothing fits");
    };
    let msg = r.message(3);
    assert!(msg.starts_with("0/3 nodes are available: "), "{msg}");
    assert!(msg.contains("1 Insufficient cpu"), "{msg}");
    assert!(msg.contains(INVALID_TOPOLOGY), "{msg}");
    assert!(msg.contains("NUMA"), "{msg}");
}

#[test]
fn missing_topology_follows_the_setting() {
    let nodes = [node("a", "16")];
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let s = settings(1);
    assert!(matches!(
        decide(&guaranteed("6"), &refs, |_| TopologyView::Missing, &s),
        Decision::Schedule(_)
    ));
    let skip = CycleSettings {
        nodes_without_topology: NodesWithoutTopology::Skip,
        ..s
    };
    let Decision::Unschedulable(r) =
        decide(&guaranteed("6"), &refs, |_| TopologyView::Missing, &skip)
    else {
        panic!("skipped");
    };
    assert_eq!(
        r.message(1),
        format!("0/1 nodes are available: 1 {NO_TOPOLOGY}.")
    );
}

#[test]
fn parallel_and_serial_agree() {
    let nodes: Vec<NodeInfo> = (0..2000).map(|i| node(&format!("n{i:04}"), "16")).collect();
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let lookup = |n: &str| {
        let i: u32 = n[1..].parse().unwrap();
        topo(n, [i % 9, (i / 9) % 9])
    };
    let one = match decide(&guaranteed("3"), &refs, lookup, &settings(1)) {
        Decision::Schedule(c) => c,
        Decision::Unschedulable(_) => panic!("fits somewhere"),
    };
    let four = match decide(&guaranteed("3"), &refs, lookup, &settings(4)) {
        Decision::Schedule(c) => c,
        Decision::Unschedulable(_) => panic!("fits somewhere"),
    };
    assert_eq!(one, four);
}
