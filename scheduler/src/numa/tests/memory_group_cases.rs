//! The memory manager `Static`'s grouping rules, from the zones' `memoryManagerGroup`
//! attributes (policy_static.go: calculateHints, isAffinityViolatingNUMAAllocations):
//! a zone of a multi-zone group serves only hints equal to that group, a zone holding
//! single-zone allocations never joins a multi-zone hint, whatever the free amounts say.

use tas_api::nrt::v1alpha2::AttributeInfo;

use super::*;

const CPU_NONE: (&str, &str) = ("cpuManagerPolicy", "none");

/// A node with the CPU manager `none` (only memory is aligned) whose zones carry these
/// `memoryManagerGroup` values.
pub(super) fn grouped(
    policy: &str,
    scope: &str,
    zones: &[(u32, Vec<ZoneResource<'_>>)],
    groups: &[(u32, &str)],
) -> NodeTopology {
    grouped_with_cpus(CPU_NONE.1, policy, scope, zones, groups)
}

/// [`grouped`] with the CPU manager `cpu_policy`.
pub(super) fn grouped_with_cpus(
    cpu_policy: &str,
    policy: &str,
    scope: &str,
    zones: &[(u32, Vec<ZoneResource<'_>>)],
    groups: &[(u32, &str)],
) -> NodeTopology {
    let mut nrt = nrt_with(policy, scope, zones, flat_distance);
    nrt.attributes
        .push(AttributeInfo::new(CPU_NONE.0, cpu_policy));
    for &(id, value) in groups {
        let zone = nrt
            .zones
            .iter_mut()
            .find(|z| z.name == format!("node-{id}"))
            .expect("zone");
        zone.attributes
            .push(AttributeInfo::new("memoryManagerGroup", value));
    }
    NodeTopology::from_nrt(&nrt).expect("valid NRT")
}

pub(super) fn memory_pod(amounts: &[&str]) -> Pod {
    pod(amounts
        .iter()
        .enumerate()
        .map(|(i, &m)| guaranteed(&format!("c{i}"), &[("cpu", "1"), ("memory", m)]))
        .collect())
}

/// Zones 0 and 1 form a group whose 3Gi all came from zone 0: zone 1 looks untouched.
pub(super) fn group_on_0_1() -> Vec<(u32, Vec<ZoneResource<'static>>)> {
    vec![
        (
            0,
            vec![("cpu", "4", "4", "4"), ("memory", "1Gi", "4Gi", "4Gi")],
        ),
        free_zone(1, &[("cpu", "4"), ("memory", "4Gi")]),
        free_zone(2, &[("cpu", "4"), ("memory", "4Gi")]),
    ]
}

pub(super) const GROUP_0_1: [(u32, &str); 2] = [(0, "node-0,node-1"), (1, "node-0,node-1")];

/// 6Gi needs two zones. {0,1} lacks free memory; {1,2} has it, but zone 1 belongs to
/// the group {0,1}: the kubelet has no hint and refuses. Without the attribute zone 1
/// looks untouched and {1,2} a fine new group.
#[test]
fn a_zone_of_a_group_joins_no_other_group() {
    let pod = memory_pod(&["6Gi"]);
    for scope in ["container", "pod"] {
        for policy in ["restricted", "best-effort", "none"] {
            let node = grouped(policy, scope, &group_on_0_1(), &GROUP_0_1);
            assert!(try_fit(&node, &pod).is_err(), "{policy}/{scope}");
        }
        // The NRT of a writer that does not publish groups: today's judgement.
        let unknown = grouped("restricted", scope, &group_on_0_1(), &[]);
        assert_eq!(try_fit(&unknown, &pod), Ok(Some(vec![1, 2])), "{scope}");
    }
}

/// The group itself takes more memory: a hint equal to the group is allowed even
/// though zone 0 already holds memory (without the attribute it looks single).
#[test]
fn a_group_serves_hints_equal_to_it() {
    let mut zones = group_on_0_1();
    zones[2] = free_zone(2, &[("cpu", "4"), ("memory", "512Mi")]);
    let pod = memory_pod(&["5Gi"]);
    for scope in ["container", "pod"] {
        let node = grouped("restricted", scope, &zones, &GROUP_0_1);
        assert_eq!(try_fit(&node, &pod), Ok(Some(vec![0, 1])), "{scope}");
        let unknown = grouped("restricted", scope, &zones, &[]);
        assert!(try_fit(&unknown, &pod).is_err(), "{scope}");
    }
}

/// A zone of a group takes no single-zone hint: 1Gi under `single-numa-node` goes to
/// zone 2, though zones 0 and 1 have room (and zone 1 looks untouched); with zone 2
/// full the kubelet refuses.
#[test]
fn a_zone_of_a_group_takes_no_single_zone_hint() {
    let pod = memory_pod(&["1Gi"]);
    for scope in ["container", "pod"] {
        let node = grouped("single-numa-node", scope, &group_on_0_1(), &GROUP_0_1);
        assert_eq!(try_fit(&node, &pod), Ok(Some(vec![2])), "{scope}");
        let mut zones = group_on_0_1();
        zones[2] = (
            2,
            vec![("cpu", "4", "4", "4"), ("memory", "0", "4Gi", "4Gi")],
        );
        let full = grouped("single-numa-node", scope, &zones, &GROUP_0_1);
        let err = try_fit(&full, &pod).unwrap_err();
        assert!(
            err.contains("mix single-zone and multi-zone"),
            "{scope}: {err}"
        );
        let unknown = grouped("single-numa-node", scope, &zones, &[]);
        assert_eq!(try_fit(&unknown, &pod), Ok(Some(vec![0])), "{scope}");
    }
}

/// A zone holding single-zone allocations never joins a multi-zone hint, even when its
/// free amounts look untouched.
#[test]
fn a_single_zone_never_joins_a_group() {
    let zones = [
        free_zone(0, &[("cpu", "4"), ("memory", "4Gi")]),
        free_zone(1, &[("cpu", "4"), ("memory", "4Gi")]),
    ];
    let pod = memory_pod(&["6Gi"]);
    let node = grouped("restricted", "pod", &zones, &[(1, "node-1")]);
    assert!(try_fit(&node, &pod).is_err());
    let unknown = grouped("restricted", "pod", &zones, &[]);
    assert_eq!(try_fit(&unknown, &pod), Ok(Some(vec![0, 1])));
}

/// The pod's own groups count for its later containers: c0's memory and hugepages
/// need zones 0 and 1 together (only zone 1 has hugepages, only zone 0 enough memory),
/// which makes them a group; c1's 512Mi then has only the hint {0,1}, not preferred
/// (one zone would hold it), though zone 0 still has memory free: `restricted` refuses
/// c1. Zone 2 is full.
#[test]
fn a_containers_group_binds_the_next_container() {
    let zones = [
        free_zone(0, &[("cpu", "4"), ("memory", "4Gi")]),
        free_zone(
            1,
            &[("cpu", "4"), ("memory", "2Gi"), ("hugepages-1Gi", "2Gi")],
        ),
        (
            2,
            vec![("cpu", "4", "4", "4"), ("memory", "0", "4Gi", "4Gi")],
        ),
    ];
    let node = grouped("restricted", "container", &zones, &[]);
    let c0 = || {
        guaranteed(
            "c0",
            &[("cpu", "1"), ("memory", "3Gi"), ("hugepages-1Gi", "2Gi")],
        )
    };
    let c1 = guaranteed("c1", &[("cpu", "1"), ("memory", "512Mi")]);
    let err = try_fit(&node, &pod(vec![c0(), c1])).unwrap_err();
    assert!(err.contains("c1"), "{err}");
    assert_eq!(try_fit(&node, &pod(vec![c0()])), Ok(Some(vec![0, 1])));
}

/// A group naming a zone the object does not have, or leaving out the zone itself, is
/// refused with the attribute's name.
#[test]
fn bad_groups_are_refused() {
    let zones = [free_zone(0, &[("cpu", "4"), ("memory", "4Gi")])];
    for value in ["node-0,node-3", "node-1", "zero"] {
        let mut nrt = nrt_with("restricted", "pod", &zones, flat_distance);
        nrt.zones[0]
            .attributes
            .push(AttributeInfo::new("memoryManagerGroup", value));
        let err = NodeTopology::from_nrt(&nrt).unwrap_err();
        assert!(err.to_string().contains("memoryManagerGroup"), "{err}");
    }
}
