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

fn topo(name: &str, free: [u32; 2]) -> TopologyView {
    crate::test_support::two_zones(name, free)
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
        dra: None,
    }
}

fn settings(parallelism: usize) -> CycleSettings {
    crate::test_support::cycle_settings(parallelism)
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
        format!("0/1 nodes are available: 1 {NO_TOPOLOGY} (a).")
    );
}

#[test]
fn a_node_group_node_without_topology_takes_no_numa_sensitive_pod() {
    let nodes = [node("in-group", "16"), node("outside", "16")];
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let s = settings(1);
    let lookup = |n: &str| match n {
        "in-group" => TopologyView::Unpublished,
        _ => TopologyView::Missing,
    };
    // Even under `Schedule`, only the node outside every group is judged without NUMA.
    let Decision::Schedule(c) = decide(&guaranteed("6"), &refs, lookup, &s) else {
        panic!("the node outside the groups fits");
    };
    assert_eq!(c.node, "outside");
    let Decision::Unschedulable(r) = decide(&guaranteed("6"), &refs[..1], lookup, &s) else {
        panic!("the unpublished node is not eligible");
    };
    assert_eq!(
        r.message(1),
        format!("0/1 nodes are available: 1 {UNPUBLISHED_TOPOLOGY} (in-group).")
    );
    // A pod the kubelet pins nothing of (no whole CPUs: shared pool) still goes there.
    assert!(matches!(
        decide(&guaranteed("500m"), &refs[..1], lookup, &s),
        Decision::Schedule(_)
    ));
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

mod cluster_wide {
    use super::super::*;
    use crate::test_support::{input, node, place, pod};
    use serde_json::json;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn decide_for(
        nodes: &[NodeInfo],
        pod: &k8s_openapi::api::core::v1::Pod,
        namespaces: &NamespaceLabels,
    ) -> Decision {
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let cluster = ClusterView {
            nodes: &refs,
            namespaces,
        };
        decide_in(
            &input(pod),
            &cluster,
            |_| TopologyView::Missing,
            &super::settings(1),
        )
    }

    fn web(name: &str) -> k8s_openapi::api::core::v1::Pod {
        pod(name, &[("app", "web")], json!({}))
    }

    #[test]
    fn required_anti_affinity_filters_and_explains() {
        let mut nodes = vec![node("a", &[]), node("b", &[]), node("c", &[])];
        place(&mut nodes[0], &web("w1"));
        place(&mut nodes[2], &web("w2"));
        let replica = pod(
            "w3",
            &[("app", "web")],
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
        );
        let none = NamespaceLabels::new();
        match decide_for(&nodes, &replica, &none) {
            Decision::Schedule(c) => assert_eq!(c.node, "b"),
            Decision::Unschedulable(r) => panic!("{}", r.message(3)),
        }
        place(&mut nodes[1], &web("w0"));
        let Decision::Unschedulable(r) = decide_for(&nodes, &replica, &none) else {
            panic!("every node has a replica");
        };
        assert_eq!(
            r.message(3),
            "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules (a, b, c)."
        );
    }

    #[test]
    fn preferred_affinity_and_soft_spread_steer_the_choice() {
        let mut nodes = vec![
            node("a1", &[(ZONE, "a")]),
            node("a2", &[(ZONE, "a")]),
            node("b1", &[(ZONE, "b")]),
        ];
        place(&mut nodes[2], &pod("cache", &[("app", "cache")], json!({})));
        let near_cache = pod(
            "new",
            &[],
            json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": ZONE}}]}}}),
        );
        let none = NamespaceLabels::new();
        let Decision::Schedule(c) = decide_for(&nodes, &near_cache, &none) else {
            panic!("fits");
        };
        assert_eq!(c.node, "b1");

        place(&mut nodes[0], &web("w1"));
        place(&mut nodes[1], &web("w2"));
        let spread = pod(
            "w3",
            &[("app", "web")],
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}}]}),
        );
        let Decision::Schedule(c) = decide_for(&nodes, &spread, &none) else {
            panic!("fits");
        };
        assert_eq!(c.node, "b1", "zone b has no web pod yet");
    }

    #[test]
    fn hard_spread_and_namespace_selectors_use_the_cluster_view() {
        let mut nodes = vec![node("a1", &[(ZONE, "a")]), node("b1", &[(ZONE, "b")])];
        place(
            &mut nodes[1],
            &crate::test_support::pod_in("prod", "db", &[("app", "db")], json!({})),
        );
        let avoid_prod_db = pod(
            "new",
            &[],
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE,
                 "namespaceSelector": {"matchLabels": {"env": "prod"}}}]}}}),
        );
        let mut namespaces = NamespaceLabels::new();
        // Unlabelled namespace: the selector selects nothing, both nodes fit; the
        // tie-break is stable.
        assert!(matches!(
            decide_for(&nodes, &avoid_prod_db, &namespaces),
            Decision::Schedule(_)
        ));
        namespaces.insert(
            "prod".into(),
            [("env".to_owned(), "prod".to_owned())].into(),
        );
        let Decision::Schedule(c) = decide_for(&nodes, &avoid_prod_db, &namespaces) else {
            panic!("a1 fits");
        };
        assert_eq!(c.node, "a1");

        place(&mut nodes[0], &web("w1"));
        let hard = pod(
            "w2",
            &[("app", "web")],
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}),
        );
        place(&mut nodes[0], &web("w0"));
        let Decision::Schedule(c) = decide_for(&nodes, &hard, &namespaces) else {
            panic!("b1 fits");
        };
        assert_eq!(c.node, "b1");
    }
}

mod sampling {
    use super::*;

    #[test]
    fn feasible_to_find_follows_kube_scheduler() {
        let adaptive = Sampling::new(0);
        assert_eq!(adaptive.feasible_to_find(50), 50);
        assert_eq!(adaptive.feasible_to_find(200), 100);
        // 5000 nodes: 50 - 40 = 10 %.
        assert_eq!(adaptive.feasible_to_find(5_000), 500);
        // 6000 nodes and more: the 5 % floor.
        assert_eq!(adaptive.feasible_to_find(10_000), 500);
        assert_eq!(Sampling::new(100).feasible_to_find(10_000), 10_000);
        assert_eq!(Sampling::new(30).feasible_to_find(1_000), 300);
        assert_eq!(Sampling::new(1).feasible_to_find(1_000), 100);
    }

    /// Each decision stops after enough feasible nodes, the next starts where it
    /// stopped, and every node is evaluated in turn; infeasible nodes are never picked.
    #[test]
    fn rotates_through_every_node_and_keeps_numa_correct() {
        let nodes: Vec<NodeInfo> = (0..1000).map(|i| node(&format!("n{i:04}"), "16")).collect();
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        // Every third node has no zone with 3 CPUs free.
        let lookup = |n: &str| {
            let i: u32 = n[1..].parse().unwrap();
            if i.is_multiple_of(3) {
                topo(n, [2, 2])
            } else {
                topo(n, [8, 3])
            }
        };
        for workers in [1, 4] {
            let s = CycleSettings {
                sampling: Sampling::new(10),
                ..settings(workers)
            };
            let mut seen = std::collections::HashSet::new();
            let mut decisions = 0;
            while seen.len() < 1000 {
                let start = s
                    .sampling
                    .next_start
                    .load(std::sync::atomic::Ordering::Relaxed);
                let (d, t) = decide_timed(
                    &guaranteed("3"),
                    &ClusterView {
                        nodes: &refs,
                        namespaces: &NamespaceLabels::new(),
                    },
                    lookup,
                    &s,
                );
                assert_eq!(t.feasible, 100, "stops at 100 feasible nodes");
                assert!(t.evaluated < 1000);
                let Decision::Schedule(c) = d else {
                    panic!("fits")
                };
                let i: usize = c.node[1..].parse().unwrap();
                assert!(!i.is_multiple_of(3), "an infeasible node was picked");
                let next = s
                    .sampling
                    .next_start
                    .load(std::sync::atomic::Ordering::Relaxed);
                let walked = (next + 1000 - start) % 1000;
                assert!((149..=151).contains(&walked), "walked {walked} nodes");
                seen.extend((0..walked).map(|k| (start + k) % 1000));
                decisions += 1;
                assert!(decisions <= 7, "every node had its turn within 7 decisions");
            }
        }
    }

    #[test]
    fn unschedulable_pod_gets_every_nodes_reason() {
        let nodes: Vec<NodeInfo> = (0..500).map(|i| node(&format!("n{i:04}"), "16")).collect();
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let Decision::Unschedulable(r) = decide(
            &guaranteed("3"),
            &refs,
            |n: &str| topo(n, [2, 2]),
            &settings(4),
        ) else {
            panic!("nothing fits")
        };
        assert!(
            r.message(500)
                .starts_with("0/500 nodes are available: 500 "),
            "{}",
            r.message(500)
        );
    }
}
