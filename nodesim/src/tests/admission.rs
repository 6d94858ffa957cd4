//! What the kubelet decides on scenario nodes: the worked cases of the Topology Manager
//! reference, scopes, init containers and sidecars, node-level fit. Each case is a
//! scenario node in the referee; the expectations are the kubelet's verdicts.

use super::*;
use crate::verdict::{Rejection, TOPOLOGY_AFFINITY_MESSAGE};

const POLICIES: [&str; 3] = ["best-effort", "restricted", "single-numa-node"];
/// Two zones of 4 CPUs and 8 GiB.
const TWO_ZONES: &str = "[{ count: 2, cpus: 4, memory: 8Gi }]";
/// Two zones of 4 CPUs and 8 GiB with one NIC each.
const TWO_ZONES_ONE_NIC_EACH: &str =
    "[{ count: 2, cpus: 4, memory: 8Gi, devices: { example.com/nic: 1 } }]";

fn policy(policy: &str) -> String {
    format!("topologyManagerPolicy: {policy}")
}

/// CPUs (and devices) give hints, memory does not.
fn cpu_only(policy_name: &str) -> String {
    format!("{}\nmemoryManagerPolicy: None", policy(policy_name))
}

/// Worked case 1: 2 CPUs fit one zone, but the two NICs sit one per zone, so the CPU
/// and device preferences differ: only best-effort admits.
#[tokio::test]
async fn case_1_cpu_and_device_preferences_differ() {
    let Some(referee) = referee() else { return };
    let wants = pod(
        "p",
        &[],
        &[fixed("c", &[("cpu", "2"), ("memory", "1Gi"), (NIC, "2")])],
    );
    let expected = ["Admitted", "TopologyAffinityError", "TopologyAffinityError"];
    for (name, expected) in POLICIES.into_iter().zip(expected) {
        let node = node(&referee, name, &cpu_only(name), TWO_ZONES_ONE_NIC_EACH).await;
        let verdict = node.verdict(&wants).await;
        assert_eq!(outcome(&verdict), expected, "{name}");
        if let Admission::Rejected(Rejection { message, .. }) = verdict {
            assert_eq!(message, TOPOLOGY_AFFINITY_MESSAGE);
        }
    }
}

/// Worked case 3: single-numa-node rejects when one resource has only a two-zone hint
/// (two NICs, one per zone) while the CPUs could go either way; a rejected pod holds
/// nothing.
#[tokio::test]
async fn case_3_single_numa_node_needs_a_single_zone_for_every_resource() {
    let Some(referee) = referee() else { return };
    let node = node(
        &referee,
        "n",
        &cpu_only("single-numa-node"),
        TWO_ZONES_ONE_NIC_EACH,
    )
    .await;
    let both_nics = pod(
        "p",
        &[],
        &[fixed("c", &[("cpu", "1"), ("memory", "1Gi"), (NIC, "2")])],
    );
    assert_eq!(node.admit(&both_nics).await, "TopologyAffinityError");
    // Everything is still free: two pods of a whole zone each.
    assert_eq!(node.admit(&guaranteed("a", 4, 1)).await, "Admitted");
    assert_eq!(node.admit(&guaranteed("b", 4, 1)).await, "Admitted");
}

/// Worked case 4: one NIC for a request of two. Restricted and single-numa-node refuse
/// at the merge; best-effort passes it ("any"), and then the device manager cannot
/// allocate: the kubelet fails the pod with `UnexpectedAdmissionError`.
#[tokio::test]
async fn case_4_too_few_devices() {
    let Some(referee) = referee() else { return };
    let expected = [
        "UnexpectedAdmissionError",
        "TopologyAffinityError",
        "TopologyAffinityError",
    ];
    let zones =
        "[{ cpus: 4, memory: 8Gi, devices: { example.com/nic: 1 } }, { cpus: 4, memory: 8Gi }]";
    for (name, expected) in POLICIES.into_iter().zip(expected) {
        let node = node(&referee, name, &policy(name), zones).await;
        let two_nics = pod("p", &[], &[fixed("c", &[(NIC, "2")])]);
        assert_eq!(node.admit(&two_nics).await, expected, "{name}");
        let one_nic = pod("q", &[], &[fixed("c", &[(NIC, "1")])]);
        assert_eq!(
            node.admit(&one_nic).await,
            "Admitted",
            "{name}: nothing held"
        );
    }
}

/// Worked case 5: 2 × 4 CPUs, 6 requested: no single zone could ever hold 6, so {0,1}
/// is preferred: restricted admits across both zones, single-numa-node rejects.
#[tokio::test]
async fn case_5_minimum_width_two_is_preferred() {
    let Some(referee) = referee() else { return };
    let restricted = node(&referee, "r", &cpu_only("restricted"), TWO_ZONES).await;
    assert_eq!(restricted.admit(&guaranteed("p", 6, 1)).await, "Admitted");
    assert_eq!(restricted.zones("p"), [0, 1]);

    let single = node(&referee, "s", &cpu_only("single-numa-node"), TWO_ZONES).await;
    assert_eq!(
        single.admit(&guaranteed("p", 6, 1)).await,
        "TopologyAffinityError"
    );
}

/// Worked case 6: 2 × 8 CPUs with 4 free in each; 6 requested: a single zone could
/// hold 6 of its 8, so the only feasible mask {0,1} is not preferred: best-effort
/// admits, restricted rejects.
#[tokio::test]
async fn case_6_minimum_width_counts_total_cpus_not_free_ones() {
    let Some(referee) = referee() else { return };
    let expected = ["Admitted", "TopologyAffinityError"];
    for (name, expected) in ["best-effort", "restricted"].into_iter().zip(expected) {
        let node = node(
            &referee,
            name,
            &cpu_only(name),
            "[{ count: 2, cpus: 8, memory: 16Gi }]",
        )
        .await;
        for pod in ["a", "b", "c"] {
            assert_eq!(node.admit(&guaranteed(pod, 4, 1)).await, "Admitted");
        }
        // Free one of the two pods sharing a zone: 4 CPUs free in each zone.
        let shared = ["a", "b", "c"]
            .into_iter()
            .find(|p| {
                let zones = node.zones(p);
                ["a", "b", "c"]
                    .iter()
                    .filter(|other| node.zones(other) == zones)
                    .count()
                    == 2
            })
            .expect("two pods share a zone");
        assert!(node.release(shared).await);

        assert_eq!(node.admit(&guaranteed("d", 6, 1)).await, expected, "{name}");
        if expected == "Admitted" {
            assert_eq!(node.zones("d"), [0, 1]);
        }
    }
}

/// With the memory manager on, memory prefers one zone while 6 CPUs prefer two: the
/// preferences differ, so even restricted rejects what case 5 admits; memory that
/// needs both zones too makes the two preferences agree.
#[tokio::test]
async fn memory_preferring_one_zone_defeats_a_two_zone_cpu_preference() {
    let Some(referee) = referee() else { return };
    let node = node(&referee, "n", &policy("restricted"), TWO_ZONES).await;
    assert_eq!(
        node.admit(&guaranteed("p", 6, 1)).await,
        "TopologyAffinityError"
    );
    assert_eq!(node.admit(&guaranteed("q", 6, 12)).await, "Admitted");
}

#[tokio::test]
async fn container_scope_aligns_each_container_pod_scope_the_whole_pod() {
    let Some(referee) = referee() else { return };
    let two_containers = |a: &str, b: &str| {
        let app = |name, cpus| fixed(name, &[("cpu", cpus), ("memory", "1Gi")]);
        pod("p", &[], &[app("a", a), app("b", b)])
    };
    let per_container = node(&referee, "c", &policy("single-numa-node"), TWO_ZONES).await;
    assert_eq!(
        per_container.admit(&two_containers("3", "3")).await,
        "Admitted"
    );
    assert_eq!(per_container.zones("p"), [0, 1], "one zone per container");

    let settings = format!("{}\ntopologyManagerScope: pod", policy("single-numa-node"));
    let per_pod = node(&referee, "p", &settings, TWO_ZONES).await;
    assert_eq!(
        per_pod.admit(&two_containers("3", "3")).await,
        "TopologyAffinityError"
    );
    assert_eq!(per_pod.admit(&two_containers("2", "2")).await, "Admitted");
    assert_eq!(per_pod.zones("p").len(), 1, "the whole pod on one zone");
}

#[tokio::test]
async fn init_containers_go_first_and_their_cpus_are_reused() {
    let Some(referee) = referee() else { return };
    let node = node(&referee, "n", &policy("single-numa-node"), TWO_ZONES).await;
    let four = [("cpu", "4"), ("memory", "1Gi")];
    let with_init = pod("p", &[fixed("init", &four)], &[fixed("c", &four)]);
    assert_eq!(node.admit(&with_init).await, "Admitted");
    assert_eq!(node.zones("p").len(), 1, "the app reuses the init CPUs");
    // The other zone is untouched: a second 4-CPU pod fits there.
    assert_eq!(node.admit(&guaranteed("q", 4, 1)).await, "Admitted");
    assert_ne!(node.zones("q"), node.zones("p"));
}

#[tokio::test]
async fn an_init_container_that_cannot_be_aligned_rejects_the_pod() {
    let Some(referee) = referee() else { return };
    let node = node(&referee, "n", &policy("single-numa-node"), TWO_ZONES).await;
    let request = pod(
        "p",
        &[fixed("init", &[("cpu", "6"), ("memory", "1Gi")])],
        &[fixed("c", &[("cpu", "1"), ("memory", "1Gi")])],
    );
    let Admission::Rejected(rejection) = node.verdict(&request).await else {
        panic!("admitted");
    };
    assert_eq!(rejection.reason, "TopologyAffinityError");
    assert_eq!(rejection.message, TOPOLOGY_AFFINITY_MESSAGE);
}

/// Pod scope: sidecar + app = 5 CPUs, more than a zone.
#[tokio::test]
async fn sidecars_count_with_the_app_containers() {
    let Some(referee) = referee() else { return };
    let settings = format!("{}\ntopologyManagerScope: pod", policy("single-numa-node"));
    let node = node(&referee, "n", &settings, TWO_ZONES).await;
    let request = pod(
        "p",
        &[sidecar(fixed("side", &[("cpu", "2"), ("memory", "1Gi")]))],
        &[fixed("c", &[("cpu", "3"), ("memory", "1Gi")])],
    );
    assert_eq!(node.admit(&request).await, "TopologyAffinityError");
}

#[tokio::test]
async fn burstable_pods_only_count_against_the_node() {
    let Some(referee) = referee() else { return };
    let node = node(&referee, "n", &policy("single-numa-node"), TWO_ZONES).await;
    let burstable = |name: &str, cpus: &str| pod(name, &[], &[requests("c", &[("cpu", cpus)])]);
    assert_eq!(node.admit(&burstable("a", "5")).await, "Admitted");
    assert!(node.zones("a").is_empty(), "shared pool: nothing pinned");
    let Admission::Rejected(rejection) = node.verdict(&burstable("b", "4")).await else {
        panic!("admitted beyond the node's CPUs");
    };
    assert_eq!(rejection.reason, "OutOfcpu");
    assert_eq!(
        rejection.message,
        "Node didn't have enough resource: cpu, requested: 4000, used: 5000, capacity: 8000"
    );
    // Exclusive CPUs count against the node too.
    assert_eq!(node.admit(&guaranteed("g", 3, 1)).await, "Admitted");
    assert_eq!(node.admit(&guaranteed("h", 1, 1)).await, "OutOfcpu");
}

#[tokio::test]
async fn hugepages_and_devices_pull_the_pod_to_their_zone() {
    let Some(referee) = referee() else { return };
    let zones = "[{ cpus: 4, memory: 8Gi }, { cpus: 4, memory: 8Gi, hugepages-1Gi: 1Gi, devices: { example.com/nic: 1 } }]";
    let node = node(&referee, "n", &policy("single-numa-node"), zones).await;
    let page = pod(
        "a",
        &[],
        &[fixed(
            "c",
            &[("cpu", "1"), ("memory", "1Gi"), ("hugepages-1Gi", "1Gi")],
        )],
    );
    assert_eq!(node.admit(&page).await, "Admitted");
    assert_eq!(node.zones("a"), [1], "the zone with the pages");
    let nic = pod(
        "b",
        &[],
        &[fixed("c", &[("cpu", "2"), ("memory", "1Gi"), (NIC, "1")])],
    );
    assert_eq!(node.admit(&nic).await, "Admitted");
    assert_eq!(node.zones("b"), [1], "the zone with the NIC");
    let mut again = page.clone();
    again.metadata.name = Some("c".into());
    again.metadata.uid = Some("c".into());
    // No page left: the merge still passes (the memory manager's hints count what the
    // zones could hold, not what is free), and the allocation fails.
    assert_eq!(node.admit(&again).await, "UnexpectedAdmissionError");
    assert!(node.release("a").await);
    assert!(!node.release("a").await, "released once");
    assert_eq!(node.admit(&again).await, "Admitted");
}

/// Policy none aligns nothing: 6 CPUs and 12 GiB spread over both zones. The CPU
/// manager allocates before the node-level fit is checked, so a pod asking for more
/// exclusive CPUs than are free fails there, not with `OutOfcpu`.
#[tokio::test]
async fn policy_none_admits_what_the_managers_can_allocate() {
    let Some(referee) = referee() else { return };
    let node = node(&referee, "n", &cpu_only("none"), TWO_ZONES).await;
    assert_eq!(node.admit(&guaranteed("p", 6, 12)).await, "Admitted");
    assert_eq!(node.zones("p"), [0, 1]);
    assert_eq!(
        node.admit(&guaranteed("q", 3, 1)).await,
        "UnexpectedAdmissionError"
    );
}
