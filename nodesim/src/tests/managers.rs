//! The resource managers: CPU ids, the memory group rule, hugepages, devices, release.

use tas_api::nrt::TopologyManagerPolicy::{BestEffort, Restricted, SingleNumaNode};
use tas_api::nrt::TopologyManagerScope;

use super::*;
use crate::request::ContainerKind::App;

#[test]
fn reserved_cpus_are_never_handed_out() {
    let mut machine = machine(vec![zone(4, 8), zone(4, 8)]);
    machine.reserved_cpus = BTreeSet::from([0]);
    let mut node = NodeState::new(
        &machine,
        settings(SingleNumaNode, TopologyManagerScope::Container),
    );
    // Zone 0 has 3 allocatable CPUs of 4: a 3-CPU pod still fits there, preferred.
    assert_eq!(node.admit(&guaranteed("a", 3, 1)), Admission::Admitted);
    assert_eq!(cpus(&node, "a", "c"), [1, 2, 3]);
    assert_eq!(node.admit(&guaranteed("b", 4, 1)), Admission::Admitted);
    assert_eq!(cpus(&node, "b", "c"), [4, 5, 6, 7]);
    assert!(node.cpu().free().is_empty());
    // The node's allocatable CPU count leaves the reserved CPU out.
    assert_eq!(node.machine().allocatable()["cpu"], 7000);
}

#[test]
fn cpus_are_packed_into_the_fullest_zone() {
    let mut node = cpu_only_node(
        vec![zone(4, 8), zone(4, 8), zone(4, 8)],
        tas_api::nrt::TopologyManagerPolicy::None,
    );
    assert_eq!(node.admit(&guaranteed("a", 1, 1)), Admission::Admitted);
    assert_eq!(node.admit(&guaranteed("b", 2, 1)), Admission::Admitted);
    assert_eq!(node.admit(&guaranteed("c", 4, 1)), Admission::Admitted);
    assert_eq!(cpus(&node, "a", "c"), [0]);
    assert_eq!(
        cpus(&node, "b", "c"),
        [1, 2],
        "zone 0 has the fewest free CPUs"
    );
    assert_eq!(cpus(&node, "c", "c"), [4, 5, 6, 7], "a whole free zone");
}

#[test]
fn fractional_cpus_stay_in_the_shared_pool() {
    let mut node = node(vec![zone(4, 8), zone(4, 8)], SingleNumaNode);
    let half = pod(
        "p",
        QosClass::Guaranteed,
        vec![container("c", App, &[("cpu", 1500), ("memory", GI)])],
    );
    assert_eq!(node.admit(&half), Admission::Admitted);
    assert!(cpus(&node, "p", "c").is_empty());
    assert_eq!(node.cpu().free().len(), 8);
    // Its memory is still pinned (Guaranteed pod).
    assert_eq!(node.memory().free(0, "memory"), 7 * GI);
}

/// A zone used by a multi-zone memory allocation serves only that group, and a zone
/// used by a single-zone allocation serves no group; both rules lift on release.
#[test]
fn memory_groups_keep_single_and_multi_zone_allocations_apart() {
    let mut node = node(vec![zone(4, 4), zone(4, 4)], Restricted);
    assert_eq!(node.admit(&guaranteed("wide", 6, 6)), Admission::Admitted);
    let blocks = node.memory().assigned(&key("wide"), "c").to_vec();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].affinity.to_string(), "{0, 1}");
    assert_eq!(blocks[0].size, 6 * GI);
    assert_eq!(
        node.memory().free(0, "memory") + node.memory().free(1, "memory"),
        2 * GI
    );

    // 1 CPU + 1 GiB would fit zone 0 alone, but zone 0 belongs to the {0,1} group.
    assert_eq!(
        node.admit(&guaranteed("narrow", 1, 1)),
        rejected("TopologyAffinityError")
    );
    assert!(node.release(&key("wide")));
    assert_eq!(node.admit(&guaranteed("narrow", 1, 1)), Admission::Admitted);

    // And the other way round: zone 0 is now single-zone, so no {0,1} allocation.
    assert_eq!(
        node.admit(&guaranteed("wide", 6, 6)),
        rejected("TopologyAffinityError")
    );
    let mut best_effort = NodeState::new(
        node.machine(),
        settings(BestEffort, TopologyManagerScope::Container),
    );
    assert_eq!(
        best_effort.admit(&guaranteed("narrow", 1, 1)),
        Admission::Admitted
    );
    assert_eq!(
        outcome(&best_effort.admit(&guaranteed("wide", 6, 6))),
        "UnexpectedAdmissionError",
        "best-effort passes the merge but the memory manager refuses the mixed group"
    );
}

#[test]
fn hugepages_are_pinned_like_memory() {
    let mut with_pages = zone(4, 8);
    with_pages.hugepages.insert("hugepages-1Gi".into(), GI);
    let mut node = node(vec![zone(4, 8), with_pages], SingleNumaNode);
    let wants_page = |name: &str| {
        pod(
            name,
            QosClass::Guaranteed,
            vec![container(
                "c",
                App,
                &[("cpu", 1000), ("memory", GI), ("hugepages-1Gi", GI)],
            )],
        )
    };
    assert_eq!(node.admit(&wants_page("a")), Admission::Admitted);
    assert_eq!(cpus(&node, "a", "c"), [4], "the zone with the pages");
    assert_eq!(node.memory().free(1, "hugepages-1Gi"), 0);
    assert_eq!(
        node.admit(&wants_page("b")),
        rejected("TopologyAffinityError")
    );
    node.release(&key("a"));
    assert_eq!(node.memory().free(1, "hugepages-1Gi"), GI);
}

#[test]
fn devices_follow_their_numa_node_for_any_qos() {
    let mut node = node(vec![zone(4, 8), with_nics(zone(4, 8), 2)], SingleNumaNode);
    let nic_pod = |name: &str, qos| pod(name, qos, vec![container("c", App, &[(NIC, 1)])]);
    assert_eq!(
        node.admit(&nic_pod("a", QosClass::BestEffort)),
        Admission::Admitted
    );
    let granted = node.devices().assigned(&key("a"), "c");
    assert_eq!(granted[NIC].iter().collect::<Vec<_>>(), ["nic-0-z1"]);

    // A Guaranteed pod with CPUs and a NIC lands where the NIC is.
    let aligned = pod(
        "b",
        QosClass::Guaranteed,
        vec![container(
            "c",
            App,
            &[("cpu", 2000), ("memory", GI), (NIC, 1)],
        )],
    );
    assert_eq!(node.admit(&aligned), Admission::Admitted);
    assert_eq!(cpus(&node, "b", "c"), [4, 5]);
    assert_eq!(
        node.admit(&nic_pod("c", QosClass::Burstable)),
        rejected("TopologyAffinityError")
    );
}

#[test]
fn release_gives_everything_back() {
    let mut node = node(vec![with_nics(zone(4, 8), 1), zone(4, 8)], SingleNumaNode);
    let fresh = node.clone();
    let request = pod(
        "p",
        QosClass::Guaranteed,
        vec![
            container(
                "init",
                ContainerKind::Init,
                &[("cpu", 2000), ("memory", 2 * GI)],
            ),
            container("c", App, &[("cpu", 3000), ("memory", GI), (NIC, 1)]),
        ],
    );
    assert_eq!(node.admit(&request), Admission::Admitted);
    assert_eq!(node.cpu().free().len(), 5);
    assert!(node.release(&key("p")));
    assert!(!node.release(&key("p")), "released once");
    assert_eq!(node.cpu().free(), fresh.cpu().free());
    assert_eq!(node.memory().free(0, "memory"), 8 * GI);
    assert_eq!(node.devices().free(NIC).len(), 1);
    assert!(!node.is_admitted(&key("p")));
    // The zone is usable for any shape again.
    assert_eq!(node.admit(&guaranteed("q", 4, 8)), Admission::Admitted);
}
