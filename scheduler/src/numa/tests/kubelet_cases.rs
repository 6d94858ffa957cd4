//! Cases reduced from the differential test (`e2e/tests/differential.rs`), each checked
//! on the referee (the kubelet's own managers): what the kubelet's CPU, memory and
//! device managers refuse after the Topology Manager has merged its hints.

use super::*;

const MEMORY_NONE: (&str, &str) = ("memoryManagerPolicy", "None");

fn g(name: &str, resources: &[(&str, &str)]) -> Container {
    guaranteed(name, resources)
}

/// Policy `none`: the CPU manager `static` still gives whole CPUs and fails when fewer
/// are free ("not enough cpus available to satisfy request: requested=3,
/// available=2"). App containers reuse the init container's CPUs, so 4 + 2 + 1 + 2 of
/// 5 free fits and 4 + 2 + 1 + 3 does not.
#[test]
fn cpu_manager_counts_cpus_under_policy_none() {
    let zones = [
        (
            0,
            vec![("cpu", "2", "2", "3"), ("memory", "4Gi", "4Gi", "4Gi")],
        ),
        (
            1,
            vec![("cpu", "3", "3", "3"), ("memory", "4Gi", "4Gi", "4Gi")],
        ),
    ];
    let with_last = |cpus: &str| {
        pod_with(
            vec![g("init0", &[("cpu", "4"), ("memory", "1Gi")])],
            vec![
                g("app0", &[("cpu", "2"), ("memory", "1Gi")]),
                g("app1", &[("cpu", "1"), ("memory", "1Gi")]),
                g("app2", &[("cpu", cpus), ("memory", "1Gi")]),
            ],
            &[],
        )
    };
    for policy in ["none", "best-effort"] {
        let node = managers_node(policy, "container", &zones, &[MEMORY_NONE]);
        assert!(try_fit(&node, &with_last("2")).is_ok(), "{policy}");
        assert_fit(
            policy,
            &node,
            &with_last("3"),
            Err("container app2 exclusive CPUs (need 3, 2 free)"),
        );
    }
}

/// Container scope: the device manager only hints zone sets that hold the devices
/// earlier init containers left to reuse, so app0's two GPUs must come with zone 0,
/// which has one: no preferred hint, TopologyAffinityError.
#[test]
fn reused_init_container_devices_bind_later_hints() {
    let zones = [
        free_zone(
            0,
            &[("cpu", "2"), ("memory", "4Gi"), ("example.com/gpu", "1")],
        ),
        free_zone(
            1,
            &[("cpu", "2"), ("memory", "4Gi"), ("example.com/gpu", "2")],
        ),
    ];
    let gpus = |name: &str, n: &str| container(name, &[], &[("example.com/gpu", n)]);
    let pod = pod_with(vec![gpus("init0", "1")], vec![gpus("app0", "2")], &[]);
    for policy in ["restricted", "single-numa-node"] {
        let node = managers_node(policy, "container", &zones, &[MEMORY_NONE]);
        assert_fit(policy, &node, &pod, Err("app0"));
    }
    // Without the init container, app0 goes to zone 1.
    let alone = super::pod(vec![gpus("app0", "2")]);
    let node = managers_node("restricted", "container", &zones, &[MEMORY_NONE]);
    assert_fit("alone", &node, &alone, Ok(&[1]));
}

/// Pod scope: the memory manager's pod hints count only the memory types app
/// containers ask for, so the pod hint is zone 0 (memory only); init0's 1Gi hugepages
/// are then not on zone 0 and the only extension is the two zones, not preferred:
/// "failed to find the extended preferred hint".
#[test]
fn pod_scope_memory_hint_ignores_init_only_hugepages() {
    let zones = [
        free_zone(
            0,
            &[("cpu", "4"), ("memory", "4Gi"), ("hugepages-1Gi", "0")],
        ),
        free_zone(
            1,
            &[("cpu", "4"), ("memory", "4Gi"), ("hugepages-1Gi", "2Gi")],
        ),
    ];
    let pod = pod_with(
        vec![g(
            "init0",
            &[("cpu", "1"), ("hugepages-1Gi", "2Gi"), ("memory", "1536Mi")],
        )],
        vec![g("app0", &[("cpu", "2"), ("memory", "2Gi")])],
        &[],
    );
    for policy in ["restricted", "single-numa-node"] {
        assert_fit(
            policy,
            &node(policy, "pod", &zones),
            &pod,
            Err("init container init0: the extended topology hint would not be preferred"),
        );
    }
}

/// Pod scope: the pod's 5Gi need both zones, and zone 0 already holds a single-zone
/// allocation, so the memory manager has no hint and the merged hint is the CPUs'
/// {0,1}. Each container's 2.5Gi fits there, but on zones mixing single- and
/// multi-zone allocations: "preferred hint violates NUMA node allocation".
#[test]
fn memory_manager_never_mixes_groups_on_the_pod_hint() {
    let zones = [
        (
            0,
            vec![("cpu", "2", "2", "3"), ("memory", "3Gi", "5Gi", "5Gi")],
        ),
        (
            1,
            vec![("cpu", "2", "2", "2"), ("memory", "4Gi", "4Gi", "4Gi")],
        ),
    ];
    let pod = pod(vec![
        g("app0", &[("cpu", "2"), ("memory", "2560Mi")]),
        g("app1", &[("cpu", "2"), ("memory", "2560Mi")]),
    ]);
    assert_fit(
        "best-effort",
        &node("best-effort", "pod", &zones),
        &pod,
        Err("container app0: the zones would mix"),
    );
    // `restricted` refuses too (the kubelet in the memory manager's Allocate, the
    // scheduler already at the merge: zone 0's allocatable alone would hold 5Gi).
    assert!(try_fit(&node("restricted", "pod", &zones), &pod).is_err());
    // Without the memory manager the CPUs' two zones fit.
    let relaxed = managers_node("best-effort", "pod", &zones, &[MEMORY_NONE]);
    assert_fit("relaxed", &relaxed, &pod, Ok(&[0, 1]));
}

/// Pod scope, no CPU manager: the pod's 3.5Gi fit no free zone and the only two-zone
/// set mixes allocations, so the memory manager has no hint and the Topology Manager
/// reads it as "no preference". `single-numa-node` then hands over no NUMA affinity
/// and each container takes its own zone (admitted); `restricted` hands over both
/// zones, which mix allocations ("preferred hint violates NUMA node allocation").
#[test]
fn memory_manager_without_hints_has_no_preference() {
    let zones = [
        (
            0,
            vec![("cpu", "2", "2", "2"), ("memory", "1Gi", "4Gi", "4Gi")],
        ),
        (
            1,
            vec![("cpu", "2", "2", "2"), ("memory", "2560Mi", "4Gi", "4Gi")],
        ),
    ];
    let pod = pod(vec![
        g("app0", &[("cpu", "500m"), ("memory", "1Gi")]),
        g("app1", &[("cpu", "500m"), ("memory", "2560Mi")]),
    ]);
    let cpu_none = [("cpuManagerPolicy", "none")];
    let single = managers_node("single-numa-node", "pod", &zones, &cpu_none);
    assert_fit("single-numa-node", &single, &pod, Ok(&[]));
    let restricted = managers_node("restricted", "pod", &zones, &cpu_none);
    assert_fit(
        "restricted",
        &restricted,
        &pod,
        Err("container app0: the zones would mix"),
    );
}

/// Container scope, from node 693 of the large seed: init0's one CPU is a lone thread
/// (its sibling reserved) that app0's four CPUs, taken as two whole cores, leave where
/// it is. It stays reusable, so the CPU manager hints app1 only zone sets with zone 0,
/// where its memory no longer fits: no preferred hint, TopologyAffinityError. When
/// app0 takes every free CPU of zone 0 it takes init0's too, and app1 fits on zone 1.
#[test]
fn init_container_cpus_an_app_container_leaves_bind_later_hints() {
    let zones = node_693_zones();
    for policy in ["restricted", "single-numa-node"] {
        let node = node(policy, "container", &zones);
        assert_fit(policy, &node, &node_693_pod("4"), Err("container app1"));
        assert_fit(policy, &node, &node_693_pod("7"), Ok(&[0, 1]));
    }
}

/// The zones of node 693: zone 0 with 7 of 8 CPUs free (one reserved), zone 1 with 3
/// of 4.
pub(super) fn node_693_zones() -> Vec<(u32, Vec<ZoneResource<'static>>)> {
    vec![
        (
            0,
            vec![
                ("cpu", "7", "7", "8"),
                ("memory", "6044Mi", "6044Mi", "6656Mi"),
            ],
        ),
        (
            1,
            vec![("cpu", "3", "3", "4"), ("memory", "12Gi", "12Gi", "12Gi")],
        ),
    ]
}

/// The pod of node 693 with app0 asking for `cpus`: init0 (1 CPU) on zone 0, then app0
/// and app1 (2 CPUs, with memory only zone 1 still holds).
pub(super) fn node_693_pod(cpus: &str) -> Pod {
    pod_with(
        vec![g("init0", &[("cpu", "1"), ("memory", "4Gi")])],
        vec![
            g("app0", &[("cpu", cpus), ("memory", "5632Mi")]),
            g("app1", &[("cpu", "2"), ("memory", "5888Mi")]),
        ],
        &[],
    )
}
