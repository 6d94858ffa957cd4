//! Which pools and devices a node sees: generations and completeness of the slices
//! reaching it, duplicates, and slices reaching the node by name, selector or to all
//! nodes.

use crate::dra::{AllocateError, PoolState};

use super::builders::{Case, SliceExt, all, claim, device, gpus, names, plain_devices, slice};

#[test]
fn only_the_newest_generation_of_a_pool_counts() {
    let case = Case::new(vec![
        slice("old", "pool", vec![device("stale")]).generation(1, 1),
        slice("new", "pool", vec![device("fresh")]).generation(2, 1),
    ]);
    let allocation = case.run(&gpus(1, &[])).expect("fits");
    assert_eq!(names(&allocation), [["fresh"]]);
    let err = case.reason(&gpus(2, &[]));
    assert!(
        err.contains("needs 2 device(s), 1 free of 1 matching"),
        "{err}"
    );
}

#[test]
fn an_incomplete_pool_serves_exact_counts_but_no_all_request() {
    let case = Case::new(vec![
        slice("a", "pool", plain_devices(2)).generation(3, 2),
        slice("old", "pool", vec![device("x")]).generation(2, 2),
    ]);
    assert_eq!(
        case.devices().pools()[0].state,
        PoolState::Incomplete {
            slices: 1,
            expected: 2
        }
    );
    let allocation = case.run(&gpus(2, &[])).expect("fits");
    assert_eq!(names(&allocation), [["dev-0", "dev-1"]]);
    let every = [claim("c", vec![all("gpu", "gpu")])];
    let err = case.reason(&every);
    assert!(
        err.contains("asks for all devices, but resource pool gpu.example.com/pool is incomplete (1 of 2 slices"),
        "{err}"
    );
    // The second slice of the generation completes it.
    let mut complete = case;
    complete
        .slices
        .push(slice("b", "pool", vec![device("other")]).generation(3, 2));
    assert_eq!(
        names(&complete.run(&every).expect("fits")),
        [["dev-0", "dev-1", "other"]]
    );
}

#[test]
fn only_the_slices_reaching_the_node_make_up_its_pool() {
    // Generation 2 is out for node-b only: node-a still uses generation 1.
    let case = Case::new(vec![
        slice("new", "pool", vec![device("fresh")])
            .generation(2, 1)
            .on_node("node-b"),
        slice("old", "pool", vec![device("stale")]).generation(1, 1),
    ]);
    assert_eq!(names(&case.run(&gpus(1, &[])).expect("fits")), [["stale"]]);
    // One slice per rack: from either rack the pool is incomplete, its devices usable.
    let case = Case::new(vec![
        slice("r1", "pool", vec![device("mine")])
            .generation(1, 2)
            .reach_label("rack", "r1"),
        slice("r2", "pool", vec![device("theirs")])
            .generation(1, 2)
            .reach_label("rack", "r2"),
    ]);
    assert_eq!(
        case.devices().pools()[0].state,
        PoolState::Incomplete {
            slices: 1,
            expected: 2
        }
    );
    assert_eq!(names(&case.run(&gpus(1, &[])).expect("fits")), [["mine"]]);
}

#[test]
fn duplicate_device_names_make_a_pool_invalid() {
    let case = Case::new(vec![
        slice("a", "pool", vec![device("d")]).generation(1, 2),
        slice("b", "pool", vec![device("d")]).generation(1, 2),
    ]);
    let err = case.reason(&gpus(1, &[]));
    assert!(
        err.contains("resource pool gpu.example.com/pool is invalid: duplicate device name d"),
        "{err}"
    );
}

#[test]
fn slices_reach_the_node_by_name_selector_or_all_nodes() {
    let case = Case::new(vec![
        slice("mine", "p1", vec![device("by-name")]),
        slice("theirs", "p2", vec![device("other-node")]).on_node("node-b"),
        slice("rack", "p3", vec![device("by-label")]).reach_label("rack", "r1"),
        slice("rack2", "p4", vec![device("other-rack")]).reach_label("rack", "r2"),
        slice("fabric", "p5", vec![device("everywhere")]).reach_all(),
    ]);
    let visible: Vec<String> = case
        .devices()
        .pools()
        .iter()
        .map(|p| p.id.pool.clone())
        .collect();
    assert_eq!(visible, ["p1", "p3", "p5"]);
    let first = case.run(&gpus(1, &[])).expect("fits");
    assert_eq!(names(&first), [["by-name"]]);
    let pinned = first.claims[0]
        .result
        .as_ref()
        .and_then(|r| r.node_selector.clone())
        .expect("pinned");
    let fields = pinned.node_selector_terms[0]
        .match_fields
        .clone()
        .expect("fields");
    assert_eq!(fields[0].key, "metadata.name");
    assert_eq!(fields[0].values, Some(vec!["node-a".to_owned()]));
    let label_only = Case {
        slices: case.slices[2..4].to_vec(),
        ..Case::new(vec![])
    };
    let result = label_only.run(&gpus(1, &[])).expect("fits");
    let selector = result.claims[0]
        .result
        .as_ref()
        .and_then(|r| r.node_selector.clone());
    assert_eq!(
        selector,
        Some(super::builders::label_selector("rack", "r1"))
    );
    let everywhere = Case {
        slices: case.slices[4..].to_vec(),
        ..Case::new(vec![])
    };
    let result = everywhere.run(&gpus(1, &[])).expect("fits");
    assert_eq!(
        result.claims[0]
            .result
            .as_ref()
            .and_then(|r| r.node_selector.clone()),
        None
    );
}

#[test]
fn per_device_node_selection_slices_are_skipped_with_a_warning() {
    let mut s = slice("per-device", "pool", plain_devices(1));
    s.spec.node_name = None;
    s.spec.per_device_node_selection = Some(true);
    let case = Case::new(vec![s]);
    let devices = case.devices();
    assert!(devices.pools().is_empty());
    assert!(
        devices.warnings()[0]
            .message
            .contains("perDeviceNodeSelection")
    );
    assert!(matches!(
        case.run(&gpus(1, &[])),
        Err(AllocateError::Unsatisfiable { .. })
    ));
}
