//! Admission tables: the worked cases on whole nodes, scopes, init containers.

use tas_api::nrt::TopologyManagerPolicy::{BestEffort, Restricted, SingleNumaNode};
use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use super::*;
use crate::admit::TOPOLOGY_AFFINITY_MESSAGE;
use crate::request::ContainerKind::{App, Init, Sidecar};

const ALL_POLICIES: [TopologyManagerPolicy; 3] = [BestEffort, Restricted, SingleNumaNode];

/// Worked case 1 on a node: 2 CPUs fit one zone, but the two NICs sit one per zone, so
/// the CPU and device preferences differ: only best-effort admits.
#[test]
fn case_1_cpu_and_device_preferences_differ() {
    for (policy, expected) in
        ALL_POLICIES
            .into_iter()
            .zip(["Admitted", "TopologyAffinityError", "TopologyAffinityError"])
    {
        let mut node = cpu_only_node(
            vec![with_nics(zone(4, 8), 1), with_nics(zone(4, 8), 1)],
            policy,
        );
        let request = pod(
            "p",
            QosClass::Guaranteed,
            vec![container(
                "c",
                App,
                &[("cpu", 2000), ("memory", GI), (NIC, 2)],
            )],
        );
        let admission = node.admit(&request);
        assert_eq!(outcome(&admission), expected, "{policy}");
        if expected == "TopologyAffinityError" {
            assert_eq!(admission, rejected(expected));
        }
    }
}

/// Worked case 3 on a node: single-numa-node rejects when one resource has only a
/// two-node hint (two NICs, one per zone) while the CPUs could go either way.
#[test]
fn case_3_single_numa_node_needs_a_single_node_for_every_resource() {
    let mut node = cpu_only_node(
        vec![with_nics(zone(4, 8), 1), with_nics(zone(4, 8), 1)],
        SingleNumaNode,
    );
    let request = pod(
        "p",
        QosClass::Guaranteed,
        vec![container(
            "c",
            App,
            &[("cpu", 1000), ("memory", GI), (NIC, 2)],
        )],
    );
    assert_eq!(node.admit(&request), rejected("TopologyAffinityError"));
    assert_eq!(node.cpu().free().len(), 8, "a rejected pod holds nothing");
}

/// Worked case 4 on a node: one NIC left for a request of two. The merge of best-effort
/// admits ("any"), but then the device manager cannot allocate: the kubelet fails the pod
/// with `UnexpectedAdmissionError`; restricted and single-numa-node refuse at the merge.
#[test]
fn case_4_too_few_devices() {
    let expected = [
        "UnexpectedAdmissionError",
        "TopologyAffinityError",
        "TopologyAffinityError",
    ];
    for (policy, expected) in ALL_POLICIES.into_iter().zip(expected) {
        let mut node = node(vec![with_nics(zone(4, 8), 1), zone(4, 8)], policy);
        let request = pod(
            "p",
            QosClass::BestEffort,
            vec![container("c", App, &[(NIC, 2)])],
        );
        assert_eq!(outcome(&node.admit(&request)), expected, "{policy}");
        assert_eq!(node.devices().free(NIC).len(), 1);
    }
}

/// Worked case 5: 2 × 4 CPUs, 6 requested: no single zone could ever hold 6, so {0,1}
/// is preferred: restricted admits across both zones, single-numa-node rejects.
#[test]
fn case_5_minimum_width_two_is_preferred() {
    let mut restricted = cpu_only_node(vec![zone(4, 8), zone(4, 8)], Restricted);
    assert_eq!(
        restricted.admit(&guaranteed("p", 6, 1)),
        Admission::Admitted
    );
    // A whole zone first, then the rest packed into the other.
    assert_eq!(cpus(&restricted, "p", "c"), [0, 1, 2, 3, 4, 5]);

    let mut single = cpu_only_node(vec![zone(4, 8), zone(4, 8)], SingleNumaNode);
    assert_eq!(
        single.admit(&guaranteed("p", 6, 1)),
        rejected("TopologyAffinityError")
    );
}

/// Worked case 6: 2 × 8 CPUs with 4 free in each; 6 requested: a single zone could hold
/// 6 of its 8, so the only feasible mask {0,1} is not preferred.
#[test]
fn case_6_minimum_width_counts_total_cpus_not_free_ones() {
    let expected = ["Admitted", "TopologyAffinityError"];
    for (policy, expected) in [BestEffort, Restricted].into_iter().zip(expected) {
        let mut node = cpu_only_node(vec![zone(8, 16), zone(8, 16)], policy);
        for name in ["a", "b", "c"] {
            assert_eq!(node.admit(&guaranteed(name, 4, 1)), Admission::Admitted);
        }
        assert_eq!(cpus(&node, "a", "c"), [0, 1, 2, 3]);
        assert_eq!(cpus(&node, "b", "c"), [4, 5, 6, 7]);
        assert_eq!(cpus(&node, "c", "c"), [8, 9, 10, 11]);
        assert!(node.release(&key("b")));

        assert_eq!(
            outcome(&node.admit(&guaranteed("d", 6, 1))),
            expected,
            "{policy}"
        );
        if expected == "Admitted" {
            assert_eq!(cpus(&node, "d", "c"), [4, 5, 6, 7, 12, 13]);
        }
    }
}

/// With the memory manager on, memory prefers one zone while 6 CPUs prefer two: the
/// preferences differ, so even restricted rejects what case 5 admits.
#[test]
fn memory_preferring_one_zone_defeats_a_two_zone_cpu_preference() {
    let mut node = node(vec![zone(4, 8), zone(4, 8)], Restricted);
    assert_eq!(
        node.admit(&guaranteed("p", 6, 1)),
        rejected("TopologyAffinityError")
    );
    // Memory that needs both zones too makes the two preferences agree.
    assert_eq!(node.admit(&guaranteed("q", 6, 12)), Admission::Admitted);
}

#[test]
fn container_scope_aligns_each_container_pod_scope_the_whole_pod() {
    let two_containers = || {
        pod(
            "p",
            QosClass::Guaranteed,
            vec![app("a", 3, 1), app("b", 3, 1)],
        )
    };
    let mut per_container = node(vec![zone(4, 8), zone(4, 8)], SingleNumaNode);
    assert_eq!(per_container.admit(&two_containers()), Admission::Admitted);
    assert_eq!(cpus(&per_container, "p", "a"), [0, 1, 2]);
    assert_eq!(cpus(&per_container, "p", "b"), [4, 5, 6]);

    let mut per_pod = NodeState::new(
        &machine(vec![zone(4, 8), zone(4, 8)]),
        settings(SingleNumaNode, TopologyManagerScope::Pod),
    );
    assert_eq!(
        per_pod.admit(&two_containers()),
        rejected("TopologyAffinityError")
    );
    let fits = pod(
        "p",
        QosClass::Guaranteed,
        vec![app("a", 2, 1), app("b", 2, 1)],
    );
    assert_eq!(per_pod.admit(&fits), Admission::Admitted);
    assert_eq!(cpus(&per_pod, "p", "a"), [0, 1]);
    assert_eq!(cpus(&per_pod, "p", "b"), [2, 3]);
}

#[test]
fn init_containers_go_first_and_their_cpus_are_reused() {
    let mut node = node(vec![zone(4, 8), zone(4, 8)], SingleNumaNode);
    let with_init = pod(
        "p",
        QosClass::Guaranteed,
        vec![
            container("init", Init, &[("cpu", 4000), ("memory", GI)]),
            app("c", 4, 1),
        ],
    );
    assert_eq!(node.admit(&with_init), Admission::Admitted);
    assert_eq!(cpus(&node, "p", "init"), [0, 1, 2, 3]);
    assert_eq!(
        cpus(&node, "p", "c"),
        [0, 1, 2, 3],
        "the app reuses the init CPUs"
    );
    assert_eq!(node.memory().free(0, "memory"), 7 * GI, "memory reused too");
    // Zone 1 is untouched: a second 4-CPU pod fits there.
    assert_eq!(node.admit(&guaranteed("q", 4, 1)), Admission::Admitted);
    assert_eq!(cpus(&node, "q", "c"), [4, 5, 6, 7]);
}

#[test]
fn an_init_container_that_cannot_be_aligned_rejects_the_pod() {
    let mut node = node(vec![zone(4, 8), zone(4, 8)], SingleNumaNode);
    let request = pod(
        "p",
        QosClass::Guaranteed,
        vec![
            container("init", Init, &[("cpu", 6000), ("memory", GI)]),
            app("c", 1, 1),
        ],
    );
    let Admission::Rejected(rejection) = node.admit(&request) else {
        panic!("admitted");
    };
    assert_eq!(rejection.message, TOPOLOGY_AFFINITY_MESSAGE);
}

#[test]
fn sidecars_count_with_the_app_containers() {
    let mut node = NodeState::new(
        &machine(vec![zone(4, 8), zone(4, 8)]),
        settings(SingleNumaNode, TopologyManagerScope::Pod),
    );
    let request = pod(
        "p",
        QosClass::Guaranteed,
        vec![
            container("side", Sidecar, &[("cpu", 2000), ("memory", GI)]),
            app("c", 3, 1),
        ],
    );
    // Pod scope: sidecar + app = 5 CPUs, more than a zone.
    assert_eq!(node.admit(&request), rejected("TopologyAffinityError"));
}

#[test]
fn burstable_pods_only_count_against_the_node() {
    let mut node = node(vec![zone(4, 8), zone(4, 8)], SingleNumaNode);
    let burstable = |name: &str, cpus: u64| {
        pod(
            name,
            QosClass::Burstable,
            vec![container("c", App, &[("cpu", cpus * 1000)])],
        )
    };
    assert_eq!(node.admit(&burstable("a", 5)), Admission::Admitted);
    assert_eq!(node.cpu().free().len(), 8, "shared pool: no exclusive CPUs");
    let Admission::Rejected(rejection) = node.admit(&burstable("b", 4)) else {
        panic!("admitted beyond the node's CPUs");
    };
    assert_eq!(rejection.reason, "OutOfcpu");
    assert_eq!(
        rejection.message,
        "Node didn't have enough resource: cpu, requested: 4000, used: 5000, capacity: 8000"
    );
    // Exclusive CPUs count against the node too.
    assert_eq!(outcome(&node.admit(&guaranteed("g", 3, 1))), "Admitted");
    assert_eq!(outcome(&node.admit(&guaranteed("h", 1, 1))), "OutOfcpu");
}

#[test]
fn policy_none_admits_and_still_hands_out_cpus() {
    let mut node = node(vec![zone(4, 8), zone(4, 8)], TopologyManagerPolicy::None);
    assert_eq!(node.admit(&guaranteed("p", 6, 12)), Admission::Admitted);
    assert_eq!(cpus(&node, "p", "c").len(), 6);
    assert_eq!(
        node.admit(&guaranteed("p", 6, 12)),
        Admission::Admitted,
        "idempotent"
    );
    assert_eq!(node.cpu().free().len(), 2);
}
