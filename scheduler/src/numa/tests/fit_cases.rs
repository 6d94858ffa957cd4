//! Fit behaviour beyond the reference tables.

use super::super::unfit::UnfitReason;
use super::*;

const SNN: &str = "single-numa-node";

fn g(name: &str, resources: &[(&str, &str)]) -> Container {
    guaranteed(name, resources)
}

#[test]
fn sparse_numa_ids_are_reported_by_id() {
    let zones = [
        free_zone(0, &[("cpu", "2"), ("memory", "4Gi")]),
        free_zone(2, &[("cpu", "4"), ("memory", "4Gi")]),
        free_zone(5, &[("cpu", "8"), ("memory", "8Gi")]),
    ];
    let node = node(SNN, "container", &zones);
    let cases: &[FitCase] = &[
        (
            "lowest id that fits",
            pod(vec![g("a", &[("cpu", "3"), ("memory", "1Gi")])]),
            Ok(&[2]),
        ),
        (
            "only the last zone",
            pod(vec![g("a", &[("cpu", "6"), ("memory", "6Gi")])]),
            Ok(&[5]),
        ),
        (
            "containers spread over sparse zones",
            pod(vec![
                g("a", &[("cpu", "8"), ("memory", "1Gi")]),
                g("b", &[("cpu", "4"), ("memory", "1Gi")]),
            ]),
            Ok(&[2, 5]),
        ),
    ];
    for (case, pod, expected) in cases {
        assert_fit(case, &node, pod, *expected);
    }
    let restricted = super::node("restricted", "pod", &zones);
    let wide = pod(vec![g("a", &[("cpu", "10"), ("memory", "1Gi")])]);
    // cpu needs two zones (8+4 ≥ 10) while 1Gi of memory prefers one: rejected.
    assert!(
        try_fit(&restricted, &wide)
            .unwrap_err()
            .contains("cpu needs 2 zones, memory needs 1 zone")
    );
    let wide = pod(vec![g("a", &[("cpu", "10"), ("memory", "10Gi")])]);
    // Both {0,5} and {2,5} hold it; the kubelet takes the numerically lowest mask.
    assert_eq!(try_fit(&restricted, &wide), Ok(Some(vec![0, 5])));
}

#[test]
fn eight_zone_nodes() {
    let zones: Vec<_> = (0..8)
        .map(|id| {
            let cpu = if id == 6 { "16" } else { "4" };
            free_zone(
                id,
                &[("cpu", cpu), ("memory", "16Gi"), ("example.com/nic", "1")],
            )
        })
        .collect();
    let snn = node(SNN, "container", &zones);
    assert_fit(
        "one big zone",
        &snn,
        &pod(vec![g("a", &[("cpu", "12"), ("memory", "1Gi")])]),
        Ok(&[6]),
    );
    let restricted = node("restricted", "container", &zones);
    // 3 NICs need three zones; memory 40Gi needs three zones; cpu 9 fits in zone 6 alone.
    let three = pod(vec![g(
        "a",
        &[("cpu", "9"), ("memory", "40Gi"), ("example.com/nic", "3")],
    )]);
    assert!(
        try_fit(&restricted, &three)
            .unwrap_err()
            .contains("cpu needs 1 zone")
    );
    // 21 CPUs need three zones too (16+4 < 21): the lowest 3-zone mask with zone 6.
    let three = pod(vec![g(
        "a",
        &[("cpu", "21"), ("memory", "40Gi"), ("example.com/nic", "3")],
    )]);
    assert_eq!(try_fit(&restricted, &three), Ok(Some(vec![0, 1, 6])));
    let all = pod(vec![g(
        "a",
        &[("cpu", "44"), ("memory", "128Gi"), ("example.com/nic", "8")],
    )]);
    assert_eq!(try_fit(&restricted, &all), Ok(Some((0..8).collect())));
}

#[test]
fn container_and_pod_scope_differ() {
    let zones = [
        free_zone(0, &[("cpu", "4"), ("memory", "8Gi")]),
        free_zone(1, &[("cpu", "4"), ("memory", "8Gi")]),
    ];
    let two_by_three = pod(vec![
        g("a", &[("cpu", "3"), ("memory", "1Gi")]),
        g("b", &[("cpu", "3"), ("memory", "1Gi")]),
    ]);
    assert_fit(
        "container scope splits",
        &node(SNN, "container", &zones),
        &two_by_three,
        Ok(&[0, 1]),
    );
    assert_fit(
        "pod scope needs one zone for 6 CPUs",
        &node(SNN, "pod", &zones),
        &two_by_three,
        Err("cannot align pod to one NUMA zone (cpu: need 6, largest zone 4)"),
    );
}

#[test]
fn devices_align_for_every_qos_class() {
    let zones = [
        free_zone(
            0,
            &[("cpu", "1"), ("memory", "1Gi"), ("example.com/nic", "1")],
        ),
        free_zone(
            1,
            &[("cpu", "1"), ("memory", "1Gi"), ("example.com/gpu", "2")],
        ),
    ];
    let node = node(SNN, "container", &zones);
    let cases: &[FitCase] = &[
        (
            "best-effort with a device",
            pod(vec![burstable("a", &[("example.com/gpu", "2")])]),
            Ok(&[1]),
        ),
        (
            "burstable cpu is the shared pool",
            pod(vec![burstable(
                "a",
                &[("cpu", "8"), ("example.com/nic", "1")],
            )]),
            Ok(&[0]),
        ),
        (
            "devices on different zones",
            pod(vec![burstable(
                "a",
                &[("example.com/nic", "1"), ("example.com/gpu", "1")],
            )]),
            Err(
                "cannot align container a to one NUMA zone (no zone has enough free example.com/gpu and example.com/nic together)",
            ),
        ),
        (
            "a resource no zone reports",
            pod(vec![burstable("a", &[("example.com/fpga", "1")])]),
            Err("no NUMA zone reports example.com/fpga"),
        ),
        (
            "ephemeral storage is never aligned",
            pod(vec![burstable("a", &[("ephemeral-storage", "1Ti")])]),
            Ok(&[]),
        ),
    ];
    for (case, pod, expected) in cases {
        assert_fit(case, &node, pod, *expected);
    }
    let fpga = request(&pod(vec![burstable("a", &[("example.com/fpga", "1")])]));
    assert!(fit(&node, &fpga, &|r| r == "example.com/fpga").is_ok());
}

#[test]
fn memory_and_hugepages_align_together() {
    let zones = [
        free_zone(
            0,
            &[("cpu", "8"), ("memory", "8Gi"), ("hugepages-1Gi", "0")],
        ),
        free_zone(
            1,
            &[("cpu", "8"), ("memory", "1Gi"), ("hugepages-1Gi", "4Gi")],
        ),
    ];
    let node = node(SNN, "container", &zones);
    let pod = pod(vec![g(
        "a",
        &[("cpu", "1"), ("memory", "2Gi"), ("hugepages-1Gi", "2Gi")],
    )]);
    let err = fit(&node, &request(&pod), &|_| false).unwrap_err();
    assert!(matches!(err.reason, UnfitReason::Disjoint { .. }), "{err}");
    assert_eq!(err.code(), "NUMAResourcesNotColocated");
    assert!(
        err.to_string()
            .contains("no zone has enough free hugepages-1Gi and memory together"),
        "{err}"
    );
}

#[test]
fn init_containers_are_reused_and_sidecars_are_not() {
    let zones = [
        free_zone(0, &[("cpu", "4"), ("memory", "8Gi")]),
        free_zone(1, &[("cpu", "4"), ("memory", "8Gi")]),
    ];
    let node = node(SNN, "container", &zones);
    let c = |name: &str, cpu| g(name, &[("cpu", cpu), ("memory", "1Gi")]);
    // A 4-CPU init container leaves zone 0 whole for the app after it.
    assert_fit(
        "init reused",
        &node,
        &pod_with(vec![c("init", "4")], vec![c("a", "4"), c("b", "4")], &[]),
        Ok(&[0, 1]),
    );
    // A 3-CPU sidecar keeps running: the 2-CPU app goes to zone 1, the 4-CPU app has no zone left.
    assert_fit(
        "sidecar kept",
        &node,
        &pod_with(
            vec![sidecar(c("proxy", "3"))],
            vec![c("a", "2"), c("b", "4")],
            &[],
        ),
        Err("cannot align container b to one NUMA zone (cpu: need 4, largest free zone 2)"),
    );
    assert_fit(
        "sidecar and app",
        &node,
        &pod_with(vec![sidecar(c("proxy", "3"))], vec![c("a", "2")], &[]),
        Ok(&[0, 1]),
    );
}

#[test]
fn pod_overhead_is_not_aligned() {
    // The kubelet's hint providers never see the overhead and node agents do not take it
    // from any zone, so a 4-CPU pod with 250m overhead still fits a 4-CPU zone.
    let zones = [free_zone(0, &[("cpu", "4"), ("memory", "4Gi")])];
    let node = node(SNN, "pod", &zones);
    let pod = pod_with(
        Vec::new(),
        vec![g("a", &[("cpu", "4"), ("memory", "4Gi")])],
        &[("cpu", "250m"), ("memory", "100Mi")],
    );
    assert_eq!(request(&pod).effective().get("cpu"), 4250);
    assert_fit("overhead", &node, &pod, Ok(&[0]));
}

#[test]
fn none_and_best_effort_always_fit() {
    let zones = [free_zone(
        0,
        &[("cpu", "1"), ("memory", "1Gi"), ("example.com/nic", "1")],
    )];
    let huge = pod(vec![g(
        "a",
        &[
            ("cpu", "64"),
            ("memory", "1Ti"),
            ("example.com/nic", "9"),
            ("example.com/fpga", "1"),
        ],
    )]);
    for scope in ["container", "pod"] {
        // With the CPU manager `static` and the memory manager `Static` (assumed
        // without attributes) the CPU manager has too few CPUs for 64 under every
        // policy, and the memory manager refuses 1Ti by itself (memory.rs).
        for policy in ["none", "best-effort"] {
            let err = fit(&node(policy, scope, &zones), &request(&huge), &|_| false).unwrap_err();
            assert!(err.to_string().contains("exclusive CPUs"), "{err}");
            let cpu_none = managers_node(policy, scope, &zones, &[("cpuManagerPolicy", "none")]);
            let err = fit(&cpu_none, &request(&huge), &|_| false).unwrap_err();
            assert!(err.to_string().contains("memory"), "{err}");
        }
        let node = |policy: &str, scope: &str, zones: &[(u32, Vec<ZoneResource<'_>>)]| {
            managers_node(
                policy,
                scope,
                zones,
                &[
                    ("memoryManagerPolicy", "None"),
                    ("cpuManagerPolicy", "none"),
                ],
            )
        };
        let none = fit(&node("none", scope, &zones), &request(&huge), &|_| false).unwrap();
        assert_eq!(none, super::super::Placement::unconstrained());
        let best = fit(
            &node("best-effort", scope, &zones),
            &request(&huge),
            &|_| false,
        )
        .unwrap();
        assert!(!best.aligned);
        let small = pod(vec![g("a", &[("cpu", "1"), ("memory", "1Gi")])]);
        let best = fit(
            &managers_node(
                "best-effort",
                scope,
                &zones,
                &[("memoryManagerPolicy", "None")],
            ),
            &request(&small),
            &|_| false,
        )
        .unwrap();
        assert!(best.aligned);
        assert_eq!(best.zones.map(|z| z.bits()), Some(1));
    }
}

#[test]
fn reasons_do_not_depend_on_the_node() {
    let zones_a = [free_zone(0, &[("cpu", "2"), ("memory", "4Gi")])];
    let mut nrt = nrt_with(SNN, "container", &zones_a, flat_distance);
    nrt.metadata.name = Some("worker-77".into());
    let other = NodeTopology::from_nrt(&nrt).unwrap();
    let pod = pod(vec![g("app", &[("cpu", "3"), ("memory", "1Gi")])]);
    let a = try_fit(&node(SNN, "container", &zones_a), &pod).unwrap_err();
    let b = try_fit(&other, &pod).unwrap_err();
    assert_eq!(a, b);
    assert!(!a.contains("worker"));
}

#[test]
fn cpu_minimum_width_counts_reserved_cpus() {
    // The CPU manager sizes masks by every CPU of the NUMA node, reserved ones included
    // (NRT capacity), so 8 CPUs "fit" one 8-CPU zone even though only 7 are allocatable:
    // the preferred width is 1, no zone has 8 free, and restricted rejects.
    let zones = [
        (0, vec![("cpu", "7", "7", "8")]),
        (1, vec![("cpu", "7", "7", "8")]),
    ];
    let node = node("restricted", "container", &zones);
    let pod = request(&pod(vec![g("a", &[("cpu", "8"), ("memory", "1Gi")])]));
    let err = fit(&node, &pod, &|r| r == "memory").unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot align container a to minimum-width NUMA set (cpu: need 8, largest free zone 7)"
    );
    // Devices likewise count unhealthy ones (capacity); memory counts allocatable.
    let zones = [
        (0, vec![("memory", "6Gi", "6Gi", "8Gi")]),
        (1, vec![("memory", "6Gi", "6Gi", "8Gi")]),
    ];
    let node = super::node("restricted", "container", &zones);
    let pod = request(&super::pod(vec![g(
        "a",
        &[("cpu", "1500m"), ("memory", "7Gi")],
    )]));
    let placement = fit(&node, &pod, &|r| r == "cpu").unwrap();
    assert_eq!(placement.zones.map(|z| z.bits()), Some(0b11));
}
