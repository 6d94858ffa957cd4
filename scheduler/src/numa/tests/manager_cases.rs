//! The CPU and memory managers' part of admission, per the NRT's manager attributes:
//! the memory manager refusing under `none`/`best-effort`, multi-zone memory groups,
//! `prefer-closest-numa-nodes`, and managers switched off.

use tas_api::nrt::v1alpha2::AttributeInfo;

use super::*;

const MEMORY_NONE: (&str, &str) = ("memoryManagerPolicy", "None");
const CPU_NONE: (&str, &str) = ("cpuManagerPolicy", "none");

fn g(name: &str, resources: &[(&str, &str)]) -> Container {
    guaranteed(name, resources)
}

/// The first example: policy `none`, pod scope, three zones, only one of which
/// has two 1Gi hugepages free. The memory manager pins app0 to zone 0 (the lowest zone
/// with room), which leaves app1 no single zone, and zone 0 cannot join a multi-zone
/// group any more: the kubelet answers UnexpectedAdmissionError.
#[test]
fn memory_manager_refuses_under_policy_none() {
    let zones = [
        free_zone(
            0,
            &[("cpu", "4"), ("memory", "4Gi"), ("hugepages-1Gi", "1Gi")],
        ),
        free_zone(
            1,
            &[
                ("cpu", "4"),
                ("memory", "2Gi"),
                ("hugepages-1Gi", "2Gi"),
                ("example.com/gpu", "2"),
            ],
        ),
        free_zone(
            2,
            &[("cpu", "4"), ("memory", "1Gi"), ("example.com/gpu", "2")],
        ),
    ];
    let pod = pod(vec![
        g(
            "app0",
            &[("cpu", "1"), ("hugepages-1Gi", "1Gi"), ("memory", "1Gi")],
        ),
        g(
            "app1",
            &[
                ("cpu", "1"),
                ("example.com/gpu", "2"),
                ("hugepages-1Gi", "1Gi"),
                ("memory", "3840Mi"),
            ],
        ),
    ]);
    for policy in ["none", "best-effort"] {
        for scope in ["pod", "container"] {
            let got = try_fit(&node(policy, scope, &zones), &pod);
            if (policy, scope) == ("best-effort", "pod") {
                // The kubelet's merged pod hint is {0,1}, not preferred (the devices
                // want one zone, memory two): both containers' memory goes to that
                // new two-zone group and the pod is admitted (checked on the referee).
                assert_eq!(got, Ok(Some(vec![0, 1])), "{policy}/{scope}");
            } else {
                let err = got.unwrap_err();
                assert!(err.contains("app1"), "{policy}/{scope}: {err}");
            }
            // Without the memory manager nothing is pinned and the node fits.
            let relaxed = managers_node(policy, scope, &zones, &[MEMORY_NONE]);
            assert!(try_fit(&relaxed, &pod).is_ok(), "{policy}/{scope}");
        }
    }
    // One container alone fits: the memory manager has a zone for it.
    let single = super::pod(vec![g(
        "app",
        &[("cpu", "1"), ("hugepages-1Gi", "2Gi"), ("memory", "1Gi")],
    )]);
    assert!(try_fit(&node("none", "pod", &zones), &single).is_ok());
}

/// A zone that already holds a single-zone memory allocation cannot join a multi-zone
/// group, so 6Gi over two 4Gi zones needs both untouched.
#[test]
fn multi_zone_memory_needs_untouched_zones() {
    let used = [
        (
            0,
            vec![("cpu", "4", "4", "4"), ("memory", "3Gi", "4Gi", "4Gi")],
        ),
        free_zone(1, &[("cpu", "4"), ("memory", "4Gi")]),
    ];
    let fresh = [
        free_zone(0, &[("cpu", "4"), ("memory", "4Gi")]),
        free_zone(1, &[("cpu", "4"), ("memory", "4Gi")]),
    ];
    let pod = pod(vec![g("a", &[("cpu", "1"), ("memory", "6Gi")])]);
    // CPU manager none: only memory is aligned, so the minimum width is 2 for all.
    let restricted = |zones: &[(u32, Vec<ZoneResource<'_>>)]| {
        managers_node("restricted", "container", zones, &[CPU_NONE])
    };
    assert!(try_fit(&restricted(&used), &pod).is_err());
    assert_eq!(try_fit(&restricted(&fresh), &pod), Ok(Some(vec![0, 1])));
    // The same under none and best-effort: the memory manager's own rule.
    assert!(try_fit(&node("none", "container", &used), &pod).is_err());
    assert!(try_fit(&node("best-effort", "pod", &used), &pod).is_err());
    assert!(try_fit(&node("none", "container", &fresh), &pod).is_ok());
}

/// The kubelet's four-zone distance table (policy_test.go): 0–1 and 2–3 are close.
fn four_zone_distance(from: u32, to: u32) -> i64 {
    const D: [[i64; 4]; 4] = [
        [10, 11, 12, 12],
        [11, 10, 12, 12],
        [12, 12, 10, 11],
        [12, 12, 11, 10],
    ];
    D[from as usize][to as usize]
}

#[test]
fn prefer_closest_numa_nodes_picks_the_closest_set() {
    let zones = [
        (
            0,
            vec![("cpu", "0", "4", "4"), ("memory", "8Gi", "8Gi", "8Gi")],
        ),
        free_zone(1, &[("cpu", "4"), ("memory", "8Gi")]),
        free_zone(2, &[("cpu", "4"), ("memory", "8Gi")]),
        free_zone(3, &[("cpu", "4"), ("memory", "8Gi")]),
    ];
    let build = |policy: &str, closest: bool| {
        let mut nrt = nrt_with(policy, "pod", &zones, four_zone_distance);
        nrt.attributes
            .push(AttributeInfo::new(MEMORY_NONE.0, MEMORY_NONE.1));
        if closest {
            nrt.attributes.push(AttributeInfo::new(
                "topologyManagerPolicyOptions",
                "prefer-closest-numa-nodes=true",
            ));
        }
        NodeTopology::from_nrt(&nrt).expect("valid NRT")
    };
    // 6 CPUs need two zones; zone 0 is full. {1,2} is the lowest mask, {2,3} the closest.
    let pod = pod(vec![g("a", &[("cpu", "6"), ("memory", "1Gi")])]);
    assert_eq!(
        try_fit(&build("restricted", false), &pod),
        Ok(Some(vec![1, 2]))
    );
    assert_eq!(
        try_fit(&build("restricted", true), &pod),
        Ok(Some(vec![2, 3]))
    );
    assert_eq!(
        try_fit(&build("best-effort", true), &pod),
        Ok(Some(vec![2, 3]))
    );
    // single-numa-node ignores the option (one zone anyway).
    assert!(!build("single-numa-node", true).prefer_closest());
}

#[test]
fn managers_off_relax_their_constraints() {
    let zones = [
        free_zone(0, &[("cpu", "2"), ("memory", "4Gi")]),
        free_zone(1, &[("cpu", "2"), ("memory", "4Gi")]),
    ];
    let cpu_heavy = pod(vec![g("a", &[("cpu", "3"), ("memory", "1Gi")])]);
    let memory_heavy = pod(vec![g("a", &[("cpu", "1"), ("memory", "6Gi")])]);
    for scope in ["container", "pod"] {
        let snn = node("single-numa-node", scope, &zones);
        assert!(try_fit(&snn, &cpu_heavy).is_err());
        assert!(try_fit(&snn, &memory_heavy).is_err());
        let no_cpu = managers_node("single-numa-node", scope, &zones, &[CPU_NONE]);
        assert_eq!(try_fit(&no_cpu, &cpu_heavy), Ok(Some(vec![0])));
        assert!(try_fit(&no_cpu, &memory_heavy).is_err());
        let no_memory = managers_node("single-numa-node", scope, &zones, &[MEMORY_NONE]);
        assert_eq!(try_fit(&no_memory, &memory_heavy), Ok(Some(vec![0])));
        assert!(try_fit(&no_memory, &cpu_heavy).is_err());
        let neither = managers_node("single-numa-node", scope, &zones, &[CPU_NONE, MEMORY_NONE]);
        assert_eq!(try_fit(&neither, &cpu_heavy), Ok(None));
    }
}

/// The second example: single-numa-node, container scope, six zones; init
/// {cpu 2, memory 4608Mi} then app {cpu 4, memory 5376Mi}. The init container's CPUs on
/// zone 0 are reusable by the app, so the CPU manager hints only masks containing zone
/// 0; zone 0 cannot hold the app, so the kubelet refuses (TAS used to put the app on 2).
#[test]
fn init_container_cpus_pin_later_containers_to_their_zone() {
    let mut zones = vec![
        free_zone(0, &[("cpu", "4"), ("memory", "5Gi")]),
        free_zone(1, &[("cpu", "2"), ("memory", "8Gi")]),
    ];
    zones.extend((2..6).map(|id| free_zone(id, &[("cpu", "8"), ("memory", "8Gi")])));
    let node = node("single-numa-node", "container", &zones);
    let pod = pod_with(
        vec![g("init", &[("cpu", "2"), ("memory", "4608Mi")])],
        vec![g("app", &[("cpu", "4"), ("memory", "5376Mi")])],
        &[],
    );
    let err = try_fit(&node, &pod).unwrap_err();
    assert!(err.contains("app"), "{err}");
    // Without exclusive CPUs (CPU manager none) nothing is reused; only memory is
    // aligned and zone 1 takes it.
    let relaxed = managers_node("single-numa-node", "container", &zones, &[CPU_NONE]);
    assert_eq!(try_fit(&relaxed, &pod), Ok(Some(vec![0, 1])));
    // A sidecar's CPUs are not reusable: the app may go elsewhere.
    let with_sidecar = pod_with(
        vec![sidecar(g("side", &[("cpu", "2"), ("memory", "1Gi")]))],
        vec![g("app", &[("cpu", "4"), ("memory", "5376Mi")])],
        &[],
    );
    assert_eq!(try_fit(&node, &with_sidecar), Ok(Some(vec![0, 2])));
}
