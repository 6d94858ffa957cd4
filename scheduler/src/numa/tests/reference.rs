//! The numbered reference cases: numa-scheduling.md 1–6 and topology-manager.md worked
//! cases 1–6 (as explicit hint merges and as equivalent zone data).

use tas_api::nrt::TopologyManagerPolicy as P;

use super::super::hint::{Hint, Merged, ResourceHints, merge};
use super::super::{ScoreConfig, ScoringStrategy, score};
use super::*;

const SNN: &str = "single-numa-node";
/// Plenty of free memory in a zone.
const MEM: ZoneResource<'static> = ("memory", "8Gi", "8Gi", "8Gi");

#[test]
fn scheduling_case_1_container_too_big_for_any_zone() {
    let node = node(
        SNN,
        "container",
        &[
            free_zone(
                0,
                &[("cpu", "4"), ("memory", "8Gi"), ("example.com/nic", "10")],
            ),
            free_zone(
                1,
                &[("cpu", "8"), ("memory", "8Gi"), ("example.com/nic", "10")],
            ),
        ],
    );
    let pod = pod(vec![guaranteed(
        "app",
        &[("cpu", "9"), ("memory", "1Gi"), ("example.com/nic", "3")],
    )]);
    assert_fit(
        "case 1",
        &node,
        &pod,
        Err("cannot align container app to one NUMA zone (cpu: need 9, largest zone 8)"),
    );
}

#[test]
fn scheduling_cases_2_and_3_burstable_and_best_effort_only_align_devices() {
    let node = node(
        SNN,
        "pod",
        &[
            free_zone(
                0,
                &[("cpu", "2"), ("memory", "4Gi"), ("example.com/nic", "5")],
            ),
            free_zone(
                1,
                &[("cpu", "4"), ("memory", "4Gi"), ("example.com/nic", "2")],
            ),
        ],
    );
    let burstable_pod = |cpu, memory, nic| {
        pod(vec![burstable(
            "app",
            &[("cpu", cpu), ("memory", memory), ("example.com/nic", nic)],
        )])
    };
    let cases: &[FitCase] = &[
        (
            "2: cpu/mem ignored",
            burstable_pod("20", "5Gi", "5"),
            Ok(&[0]),
        ),
        (
            "2: nic 6",
            burstable_pod("2", "2Gi", "6"),
            Err("cannot align pod to one NUMA zone (example.com/nic: need 6, largest zone 5)"),
        ),
        (
            "3: best-effort nic 20",
            pod(vec![burstable("app", &[("example.com/nic", "20")])]),
            Err("example.com/nic: need 20, largest zone 5"),
        ),
        ("3: empty pod", pod(vec![burstable("app", &[])]), Ok(&[])),
    ];
    for (case, pod, expected) in cases {
        assert_fit(case, &node, pod, *expected);
    }
}

#[test]
fn scheduling_case_4_pod_scope_sums_containers() {
    let node = node(
        SNN,
        "pod",
        &[
            free_zone(
                0,
                &[("cpu", "2"), ("memory", "4Gi"), ("example.com/nic", "5")],
            ),
            free_zone(
                1,
                &[("cpu", "4"), ("memory", "4Gi"), ("example.com/nic", "2")],
            ),
        ],
    );
    let three = |cpu| {
        pod(["a", "b", "c"]
            .iter()
            .map(|n| guaranteed(n, &[("cpu", cpu), ("memory", "1Gi")]))
            .collect())
    };
    assert_fit("4: 3×1 cpu", &node, &three("1"), Ok(&[1]));
    assert_fit(
        "4: 3×3 cpu",
        &node,
        &three("3"),
        Err("cannot align pod to one NUMA zone (cpu: need 9, largest zone 4)"),
    );
}

#[test]
fn scheduling_case_5_container_scope_places_and_subtracts() {
    let node = node(
        SNN,
        "container",
        &[
            free_zone(0, &[("cpu", "30"), ("memory", "60Gi")]),
            free_zone(1, &[("cpu", "32"), ("memory", "64Gi")]),
        ],
    );
    let g = |name: &str, cpu| guaranteed(name, &[("cpu", cpu), ("memory", "1Gi")]);
    let apps = |cpus: &[&'static str]| {
        cpus.iter()
            .enumerate()
            .map(|(i, c)| g(&format!("app{i}"), c))
            .collect()
    };
    let inits = |cpus: &[&'static str]| {
        cpus.iter()
            .enumerate()
            .map(|(i, c)| g(&format!("init{i}"), c))
            .collect()
    };
    assert_fit("5: 20+20", &node, &pod(apps(&["20", "20"])), Ok(&[0, 1]));
    assert_fit(
        "5: 20+20+20",
        &node,
        &pod(apps(&["20", "20", "20"])),
        Err("cannot align container app2 to one NUMA zone (cpu: need 20, largest free zone 12)"),
    );
    // The reference table admits inits 30,30,30 with apps 20,20,2 (app1 on zone 1), but
    // the kubelet does not: app0 reuses 20 of the init containers' 30 CPUs on zone 0, and
    // while reusable CPUs remain the CPU manager hints only masks containing their zone
    // (policy_static.go, generateCPUTopologyHints), so app1 gets no single-zone hint.
    let reusing = pod_with(inits(&["30", "30", "30"]), apps(&["20", "20", "2"]), &[]);
    let err = fit(&node, &request(&reusing), &|_| false).unwrap_err();
    assert!(err.to_string().contains("app1"), "{err}");
    let with_inits = pod_with(inits(&["30", "30", "30"]), apps(&["20", "10", "2"]), &[]);
    let placement = fit(&node, &request(&with_inits), &|_| false).expect("fits");
    let zones: Vec<Vec<u32>> = placement
        .containers
        .iter()
        .map(|z| z.map(|s| s.iter().collect()).unwrap_or_default())
        .collect();
    assert_eq!(
        zones,
        [vec![0], vec![0], vec![0], vec![0], vec![0], vec![1]]
    );
    assert_fit(
        "5: init 40",
        &node,
        &pod_with(inits(&["40"]), apps(&["2"]), &[]),
        Err("cannot align init container init0 to one NUMA zone (cpu: need 40, largest zone 32)"),
    );
}

#[test]
fn scheduling_case_6_most_and_least_allocated_pick_different_nodes() {
    let two = |cpu, mem| {
        node(
            SNN,
            "container",
            &[
                free_zone(0, &[("cpu", cpu), ("memory", mem)]),
                free_zone(1, &[("cpu", cpu), ("memory", mem)]),
            ],
        )
    };
    let nodes = [two("4", "500Mi"), two("2", "50Mi"), two("6", "60Mi")];
    let pod = request(&pod(vec![guaranteed(
        "app",
        &[("cpu", "2"), ("memory", "20Mi")],
    )]));
    let scores = |strategy| -> Vec<u8> {
        nodes
            .iter()
            .map(|n| score(n, &pod, &ScoreConfig::new(strategy)))
            .collect()
    };
    let most = scores(ScoringStrategy::MostAllocated);
    let least = scores(ScoringStrategy::LeastAllocated);
    assert_eq!(most, [27, 70, 33]);
    assert_eq!(least, [73, 30, 66]);
}

fn hints(list: &[(u64, bool)]) -> ResourceHints {
    ResourceHints::Hints(list.iter().map(|&(m, p)| Hint::new(m, p)).collect())
}

fn merged(policy: P, numa: u64, resources: &[ResourceHints]) -> (Option<u64>, bool, bool) {
    let Merged { hint, admit } = merge(policy, numa, resources);
    (hint.mask, hint.preferred, admit)
}

#[test]
fn topology_manager_cases_1_to_4_as_hint_merges() {
    // 1. cpu {0}/pref, device {0,1}/pref.
    let case1 = [hints(&[(0b01, true)]), hints(&[(0b11, true)])];
    assert_eq!(
        merged(P::BestEffort, 0b11, &case1),
        (Some(0b01), false, true)
    );
    assert!(!merged(P::Restricted, 0b11, &case1).2);
    assert!(!merged(P::SingleNumaNode, 0b11, &case1).2);
    // 2. r1 [{0,1,2,3}/no, {0,1}/no], r2 [{0,3}/no] → {0,3} not preferred.
    let case2 = [
        hints(&[(0b1111, false), (0b0011, false)]),
        hints(&[(0b1001, false)]),
    ];
    for policy in [P::BestEffort, P::Restricted] {
        assert_eq!(merged(policy, 0b1111, &case2).0, Some(0b1001));
        assert!(!merged(policy, 0b1111, &case2).1);
    }
    // 3. single-numa-node: r1 [{0,1}/pref], r2 [{0}/pref, {1}/pref, {0,1}/no] → reject.
    let case3 = [
        hints(&[(0b11, true)]),
        hints(&[(0b01, true), (0b10, true), (0b11, false)]),
    ];
    assert_eq!(
        merged(P::SingleNumaNode, 0b11, &case3),
        (None, false, false)
    );
    // 4. a device with an empty list: best-effort admits "any", the others reject.
    let case4 = [ResourceHints::DontCare, ResourceHints::Hints(Vec::new())];
    assert_eq!(
        merged(P::BestEffort, 0b11, &case4),
        (Some(0b11), false, true)
    );
    assert!(!merged(P::Restricted, 0b11, &case4).2);
    assert!(!merged(P::SingleNumaNode, 0b11, &case4).2);
    // Don't-care only: admitted everywhere; single-numa-node reports "any".
    let dont_care = [ResourceHints::DontCare];
    assert_eq!(
        merged(P::SingleNumaNode, 0b11, &dont_care),
        (None, true, true)
    );
    assert!(merged(P::None, 0b11, &case3).2);
}

/// A zone of 4 CPUs (`free_cpus` of them free), one free NIC and [`MEM`].
fn nic_zone(id: u32, free_cpus: &str) -> (u32, Vec<ZoneResource<'_>>) {
    (
        id,
        vec![
            ("cpu", free_cpus, "4", "4"),
            ("example.com/nic", "1", "1", "1"),
            MEM,
        ],
    )
}

/// Fit per policy for the same node and pod: `Ok(zones)` or `Err(text)`.
fn per_policy(
    zones: &[(u32, Vec<ZoneResource<'_>>)],
    pod: &Pod,
    policy: &str,
) -> Result<Option<Vec<u32>>, String> {
    try_fit(&node(policy, "container", zones), pod)
}

#[test]
fn topology_manager_cases_1_to_4_as_zone_data() {
    // 1. cpu fits one zone (only zone 0 has free CPUs), the devices need both zones.
    let zones = [nic_zone(0, "4"), nic_zone(1, "0")];
    let pod1 = pod(vec![guaranteed(
        "app",
        &[("cpu", "2"), ("memory", "1Gi"), ("example.com/nic", "2")],
    )]);
    let f = |policy| per_policy(&zones, &pod1, policy);
    assert_eq!(f("best-effort"), Ok(Some(vec![0, 1])));
    assert_eq!(
        f("restricted"),
        Err("cannot align container app to minimum-width NUMA set (cpu needs 1 zone, example.com/nic needs 2 zones)".into())
    );
    assert!(
        f(SNN)
            .unwrap_err()
            .contains("example.com/nic: need 2, largest zone 1")
    );
    // 3. r1 needs two zones, r2 fits one: single-numa-node rejects.
    let pod3 = pod(vec![guaranteed(
        "app",
        &[("cpu", "6"), ("memory", "1Gi"), ("example.com/nic", "1")],
    )]);
    let zones3 = [nic_zone(0, "4"), nic_zone(1, "4")];
    assert!(per_policy(&zones3, &pod3, SNN).is_err());
    // 4. fewer free devices than requested: only best-effort admits.
    let pod4 = pod(vec![burstable("app", &[("example.com/nic", "3")])]);
    assert_eq!(
        per_policy(&zones3, &pod4, "best-effort"),
        Ok(Some(vec![0, 1]))
    );
    assert!(
        per_policy(&zones3, &pod4, "restricted")
            .unwrap_err()
            .contains("need 3, largest free 2-zone set 2")
    );
    assert!(per_policy(&zones3, &pod4, SNN).is_err());
}

#[test]
fn topology_manager_cases_5_and_6_minimum_width_uses_totals() {
    // The worked cases speak of CPUs only: memory is reported at node level here, so the
    // memory manager has no NUMA opinion.
    let memory_node_level = |r: &str| r == "memory";
    let check = |zones: &[(u32, Vec<ZoneResource<'_>>)], policy| {
        let node = node(policy, "container", zones);
        let pod = pod(vec![guaranteed("app", &[("cpu", "6"), ("memory", "1Gi")])]);
        fit(&node, &request(&pod), &memory_node_level)
    };
    let ids = |p: super::super::Placement| p.zones.map(|z| z.iter().collect::<Vec<_>>());
    // 5. 4 CPUs per zone in total, all free: {0,1} is the minimum width.
    let zones5 = [free_zone(0, &[("cpu", "4")]), free_zone(1, &[("cpu", "4")])];
    assert!(
        check(&zones5, SNN)
            .unwrap_err()
            .to_string()
            .contains("cpu: need 6, largest zone 4")
    );
    assert_eq!(check(&zones5, "restricted").map(ids), Ok(Some(vec![0, 1])));
    // 6. 8 CPUs per zone, 4 free each: one zone could hold 6, so {0,1} is not preferred.
    let zones6 = [
        (0, vec![("cpu", "4", "8", "8")]),
        (1, vec![("cpu", "4", "8", "8")]),
    ];
    assert_eq!(
        check(&zones6, "restricted").unwrap_err().to_string(),
        "cannot align container app to minimum-width NUMA set (cpu: need 6, largest free zone 4)"
    );
    let placement = check(&zones6, "best-effort").expect("best-effort admits");
    assert!(!placement.aligned);
    assert_eq!(ids(placement), Some(vec![0, 1]));
}

#[test]
fn restricted_needs_memory_and_cpu_at_the_same_width() {
    // With memory reported per zone the memory manager prefers one zone for 1Gi while
    // the CPU manager prefers {0,1} for 6 CPUs: no merged hint is preferred, and the
    // kubelet (memory manager policy Static) rejects the pod.
    let zones = [
        free_zone(0, &[("cpu", "4"), ("memory", "8Gi")]),
        free_zone(1, &[("cpu", "4"), ("memory", "8Gi")]),
    ];
    let one_gi = pod(vec![guaranteed("app", &[("cpu", "6"), ("memory", "1Gi")])]);
    assert_eq!(
        per_policy(&zones, &one_gi, "restricted"),
        Err("cannot align container app to minimum-width NUMA set (cpu needs 2 zones, memory needs 1 zone)".into())
    );
    let twelve_gi = pod(vec![guaranteed("app", &[("cpu", "6"), ("memory", "12Gi")])]);
    assert_eq!(
        per_policy(&zones, &twelve_gi, "restricted"),
        Ok(Some(vec![0, 1]))
    );
}
