//! The memory manager's groups followed from one `List` to the next, on three zones.

use super::*;
use crate::accounting::MEMORY;
use crate::accounting::tests::{GIB, block, container, pod, zone};

fn three_zones() -> Topology {
    Topology {
        zones: (0..3u32)
            .map(|id| zone(id, id * 2..=id * 2 + 1, 8 * GIB, &[]))
            .collect(),
    }
}

/// A pod with one container holding memory on `zones`.
fn on(name: &str, zones: &[i64]) -> v1::PodResources {
    pod(
        name,
        vec![v1::ContainerResources {
            memory: vec![block(MEMORY, GIB, zones)],
            ..container("app")
        }],
    )
}

fn groups(pairs: &[(u32, &[u32])]) -> ZoneMemoryGroups {
    ZoneMemoryGroups(pairs.iter().map(|&(z, g)| (z, g.to_vec())).collect())
}

#[test]
fn the_first_list_gives_the_groups_of_the_blocks() {
    let topology = three_zones();
    let pods = [on("group", &[0, 1]), on("single", &[1]), on("other", &[2])];
    let mut cells = MemoryCells::default();
    let got = cells.observe(&topology, &pods);
    let blocks = [vec![0, 1], vec![1], vec![2]];
    assert_eq!(
        got,
        ZoneMemoryGroups::from_blocks(blocks.iter().map(Vec::as_slice))
    );
    assert_eq!(got, groups(&[(0, &[0, 1]), (1, &[1]), (2, &[2])]));
}

#[test]
fn a_zone_stays_single_after_its_single_zone_container_ends_while_the_group_holds_it() {
    let topology = three_zones();
    let mut cells = MemoryCells::default();
    cells.observe(&topology, &[on("group", &[1, 2])]);
    // A single-zone allocation lands on zone 1 of the group (best-effort), then ends.
    let got = cells.observe(&topology, &[on("group", &[1, 2]), on("single", &[1])]);
    assert_eq!(got, groups(&[(1, &[1]), (2, &[1, 2])]));
    let got = cells.observe(&topology, &[on("group", &[1, 2])]);
    // The blocks alone say {1, 2}; the kubelet still counts zone 1 as single.
    assert_eq!(got, groups(&[(1, &[1]), (2, &[1, 2])]));
    // Once nothing holds zone 1 the kubelet resets it.
    let got = cells.observe(&topology, &[on("other", &[2])]);
    assert_eq!(got, groups(&[(2, &[2])]));
}

#[test]
fn a_new_group_overwrites_what_a_zone_was_grouped_with() {
    let topology = three_zones();
    let mut cells = MemoryCells::default();
    cells.observe(&topology, &[on("a", &[0, 1])]);
    cells.observe(&topology, &[on("a", &[0, 1]), on("b", &[0, 1])]);
    let got = cells.observe(&topology, &[on("b", &[0, 1])]);
    assert_eq!(got, groups(&[(0, &[0, 1]), (1, &[0, 1])]));
    // Zone 1 freed between two lists and regrouped with zone 2: the newest group wins.
    let got = cells.observe(&topology, &[on("b2", &[0]), on("c", &[1, 2])]);
    assert_eq!(got, groups(&[(0, &[0]), (1, &[1, 2]), (2, &[1, 2])]));
}

#[test]
fn containers_without_pinned_memory_or_on_unknown_zones_change_nothing() {
    let topology = three_zones();
    let mut cells = MemoryCells::default();
    let pods = [
        pod("cpu-only", vec![container("app")]),
        on("elsewhere", &[7]),
        on("nowhere", &[]),
    ];
    assert_eq!(cells.observe(&topology, &pods), ZoneMemoryGroups::default());
}
