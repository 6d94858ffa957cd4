//! Groups doubted after a kubelet refusal ([`crate::numa::memory_doubt`]): each zone
//! of a multi-zone group the NRT still shows may hold the group's cells or its own,
//! and a pod fits only when it fits in every such world, on nodes whose kubelet can
//! split a group (`Static` memory manager under `best-effort`), after a refused pod
//! whose earlier container another hint provider could have narrowed to one zone;
//! elsewhere a refusal changes nothing.

use super::memory_group_cases::{GROUP_0_1, group_on_0_1, grouped_with_cpus, memory_pod};
use super::*;
use crate::numa::{MemoryDoubt, NumaSet};

/// A node with the CPU manager `static` (its hints can narrow the merge to one zone)
/// whose zones carry these `memoryManagerGroup` values.
fn grouped(
    policy: &str,
    scope: &str,
    zones: &[(u32, Vec<ZoneResource<'_>>)],
    groups: &[(u32, &str)],
) -> NodeTopology {
    grouped_with_cpus("static", policy, scope, zones, groups)
}

fn two_containers() -> PodRequest {
    PodRequest::from_pod(&memory_pod(&["1Gi", "1Gi"])).expect("valid")
}

fn doubted(mut node: NodeTopology) -> (NodeTopology, MemoryDoubt) {
    let mut doubt = MemoryDoubt::default();
    doubt.note_refusal(&node, Some(&two_containers()));
    doubt.apply(&mut node);
    (node, doubt)
}

/// The group {0,1} takes 1Gi more (zones 0 and 1 hold it, as the group's hint) until a
/// refusal; then the kubelet's cells of zone 0 or 1 may be the zone alone ("failed to
/// find NUMA nodes to extend"), so the scheduler refuses too.
#[test]
fn a_doubted_group_takes_no_more_memory() {
    let pod = memory_pod(&["5Gi"]);
    for scope in ["container", "pod"] {
        let node = grouped("best-effort", scope, &group_on_0_1(), &GROUP_0_1);
        assert!(try_fit(&node, &pod).is_ok(), "{scope}: before");
        let (node, doubt) = doubted(node);
        assert_eq!(
            doubt.zones(),
            &[
                (0, NumaSet::from_ids([0, 1])),
                (1, NumaSet::from_ids([0, 1]))
            ]
        );
        assert!(node.memory_zone_doubted(0) && node.memory_zone_doubted(1));
        assert!(!node.memory_zone_doubted(2));
        assert!(try_fit(&node, &pod).is_err(), "{scope}: after");
    }
}

/// A doubted zone's cells are the group's or its own, and the pod fits when it fits
/// either way. 1Gi: with the group, it goes to zone 2 (zones 0 and 1 serve only the
/// group's hint); with zone 0 split, to zone 0. With zone 2 full it still fits: the
/// group's hint {0,1} holds it, and a split zone 0 or 1 holds it alone. The reported
/// placement is the one of the groups the object shows.
#[test]
fn a_doubted_zone_takes_memory_every_world_places() {
    let pod = memory_pod(&["1Gi"]);
    for scope in ["container", "pod"] {
        let (node, _) = doubted(grouped("best-effort", scope, &group_on_0_1(), &GROUP_0_1));
        assert_eq!(try_fit(&node, &pod), Ok(Some(vec![2])), "{scope}");
        let mut zones = group_on_0_1();
        zones[2] = (
            2,
            vec![("cpu", "4", "4", "4"), ("memory", "0", "4Gi", "4Gi")],
        );
        let (full, _) = doubted(grouped("best-effort", scope, &zones, &GROUP_0_1));
        assert_eq!(try_fit(&full, &pod), Ok(Some(vec![0, 1])), "{scope}");
    }
}

/// 2Gi with zone 2 full: the group's hint {0,1} holds it (1Gi + 4Gi free), but where
/// the kubelet left zone 0 single only zone 0's 1Gi could take it, and the pod is
/// refused in that world; so the scheduler refuses.
#[test]
fn a_pod_one_world_refuses_is_refused() {
    let mut zones = group_on_0_1();
    zones[2] = (
        2,
        vec![("cpu", "4", "4", "4"), ("memory", "0", "4Gi", "4Gi")],
    );
    let pod = memory_pod(&["2Gi"]);
    for scope in ["container", "pod"] {
        let node = grouped("best-effort", scope, &zones, &GROUP_0_1);
        assert_eq!(
            try_fit(&node, &pod),
            Ok(Some(vec![0, 1])),
            "{scope}: before"
        );
        let (node, _) = doubted(node);
        assert!(try_fit(&node, &pod).is_err(), "{scope}: after");
    }
}

/// Where the kubelet keeps groups whole (`restricted`, `single-numa-node`) or pins no
/// memory, a refusal doubts nothing.
#[test]
fn only_nodes_that_can_split_a_group_doubt() {
    for policy in ["none", "restricted", "single-numa-node"] {
        let node = grouped(policy, "container", &group_on_0_1(), &GROUP_0_1);
        let mut doubt = MemoryDoubt::default();
        assert!(!doubt.note_refusal(&node, None), "{policy}");
        assert!(doubt.is_empty());
    }
    // No multi-zone group shown: nothing to doubt.
    let plain = grouped("best-effort", "container", &group_on_0_1(), &[]);
    let mut doubt = MemoryDoubt::default();
    assert!(!doubt.note_refusal(&plain, None));
    // A pod of one container, or not Guaranteed, has no container admitted before
    // the refused one: no memory allocation of its is left behind.
    let node = grouped("best-effort", "container", &group_on_0_1(), &GROUP_0_1);
    let one = PodRequest::from_pod(&memory_pod(&["1Gi"])).expect("valid");
    assert!(!doubt.note_refusal(&node, Some(&one)));
    let burstable = PodRequest::from_pod(&pod(vec![
        container("a", &[("cpu", "1")], &[]),
        container("b", &[("cpu", "1")], &[]),
    ]))
    .expect("valid");
    assert!(!doubt.note_refusal(&node, Some(&burstable)));
    assert!(doubt.note_refusal(&node, Some(&two_containers())));
}

/// A doubt lasts while some zone shows the group: the kubelet resets a zone's cells
/// only when its last allocation leaves.
#[test]
fn a_doubt_ends_when_no_zone_shows_the_group() {
    let node = grouped("best-effort", "pod", &group_on_0_1(), &GROUP_0_1);
    let (_, mut doubt) = doubted(node.clone());
    doubt.prune(&node);
    assert_eq!(doubt.zones().len(), 2);
    let emptied = grouped(
        "best-effort",
        "pod",
        &[
            free_zone(0, &[("cpu", "4"), ("memory", "4Gi")]),
            free_zone(1, &[("cpu", "4"), ("memory", "4Gi")]),
            free_zone(2, &[("cpu", "4"), ("memory", "4Gi")]),
        ],
        &[],
    );
    doubt.prune(&emptied);
    assert!(doubt.is_empty());
    let mut fresh = emptied.clone();
    doubt.apply(&mut fresh);
    assert!(!fresh.memory_zone_doubted(0));
}

/// Only a zone an earlier container's memory fits in alone can have been split: with
/// 2Gi asked before the refused container, zone 0 (1Gi free) keeps its group, zone 1
/// (4Gi free) is doubted.
#[test]
fn only_zones_an_earlier_container_fits_in_are_doubted() {
    let node = grouped("best-effort", "container", &group_on_0_1(), &GROUP_0_1);
    let mut doubt = MemoryDoubt::default();
    let refused = PodRequest::from_pod(&memory_pod(&["2Gi", "1Gi"])).expect("valid");
    assert!(doubt.note_refusal(&node, Some(&refused)));
    assert_eq!(doubt.zones(), &[(1, NumaSet::from_ids([0, 1]))]);
    let mut view = node.clone();
    doubt.apply(&mut view);
    assert!(!view.memory_zone_doubted(0) && view.memory_zone_doubted(1));
}

/// Under `best-effort` the memory manager gets one zone of a group alone only when
/// another hint provider narrows the merge to it: with the CPU manager `none` and no
/// devices, the merge is the memory manager's own hints, which never name such a zone,
/// so a refusal doubts nothing; neither does one of a pod without exclusive CPUs. With
/// the CPU manager `static` exclusive CPUs may narrow it, when a CPU hint can hold the
/// zone without the rest of the group: zones 0 and 2 (or 1 and 2) have 8 CPUs free, so
/// an earlier container asking for 9 (in `pod` scope: a pod asking for 9 in all) can
/// never be narrowed to zone 0 or 1, one asking for 8 can.
#[test]
fn only_a_container_another_provider_narrows_can_split() {
    let two = |first: &str, second: &str| {
        PodRequest::from_pod(&pod(vec![
            guaranteed("c0", &[("cpu", first), ("memory", "1Gi")]),
            guaranteed("c1", &[("cpu", second), ("memory", "1Gi")]),
        ]))
        .expect("valid")
    };
    for (scope, wide, narrow) in [
        ("container", two("9", "1"), two("8", "1")),
        ("pod", two("8", "1"), two("7", "1")),
    ] {
        let no_cpus = grouped_with_cpus("none", "best-effort", scope, &group_on_0_1(), &GROUP_0_1);
        let mut doubt = MemoryDoubt::default();
        assert!(
            !doubt.note_refusal(&no_cpus, Some(&two_containers())),
            "{scope}"
        );
        let node = grouped("best-effort", scope, &group_on_0_1(), &GROUP_0_1);
        assert!(
            !doubt.note_refusal(&node, Some(&two("500m", "500m"))),
            "{scope}"
        );
        assert!(!doubt.note_refusal(&node, Some(&wide)), "{scope}");
        assert!(doubt.note_refusal(&node, Some(&narrow)), "{scope}");
    }
}
