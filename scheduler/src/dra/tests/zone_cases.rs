//! NUMA zones of devices and the zone rule, the warnings of malformed values, and the
//! inventory.

use std::collections::BTreeSet;

use crate::dra::topology::parse_zone_list;
use crate::dra::{AllocateError, DeviceCounts, ZoneRule, inventory};

use super::builders::{Case, DeviceExt, device, gpus, id, names, slice};

fn within(zones: &[u32], allow_unknown: bool) -> ZoneRule {
    ZoneRule::Within {
        zones: zones.iter().copied().collect(),
        allow_unknown,
    }
}

fn one_gpu() -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    gpus(1, &[]).to_vec()
}

#[test]
fn within_keeps_devices_to_the_numa_nodes_of_the_set() {
    let mut case = Case::new(vec![slice(
        "s",
        "pool",
        vec![device("zone0").numa(0), device("zone1").numa(1)],
    )]);
    case.rule = within(&[1], false);
    let allocation = case.run(&one_gpu()).expect("fits");
    assert_eq!(names(&allocation), [["zone1"]]);
    assert!(allocation.aligned);
    assert_eq!(
        allocation.claims[0].devices[0].zones,
        Some(BTreeSet::from([1]))
    );
    case.in_use.insert(id("pool", "zone1"));
    let err = case.reason(&one_gpu());
    assert!(err.contains("1 outside the allowed NUMA zones"), "{err}");
    case.rule = ZoneRule::Any;
    let allocation = case.run(&one_gpu()).expect("fits");
    assert_eq!(names(&allocation), [["zone0"]]);
    assert!(allocation.aligned, "known zones under Any");
}

#[test]
fn pcie_roots_map_to_zones_and_numa_node_wins() {
    let mut case = Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("root0").string("resource.kubernetes.io/pcieRoot", "pci0000:00"),
            device("both")
                .string("resource.kubernetes.io/pcieRoot", "pci0000:80")
                .numa(0),
            device("root1").string("resource.kubernetes.io/pcieRoot", "pci0000:80"),
        ],
    )]);
    case.pcie_roots = [
        ("pci0000:00".to_owned(), BTreeSet::from([0])),
        ("pci0000:80".to_owned(), BTreeSet::from([1])),
    ]
    .into();
    case.rule = within(&[1], false);
    assert_eq!(names(&case.run(&one_gpu()).expect("fits")), [["root1"]]);
    case.rule = within(&[0], false);
    let claims = gpus(2, &[]);
    assert_eq!(
        names(&case.run(&claims).expect("fits")),
        [["root0", "both"]]
    );
}

#[test]
fn unknown_zones_are_allowed_only_when_the_caller_says_so() {
    let mut case = Case::new(vec![slice(
        "s",
        "pool",
        vec![device("unknown"), device("far").numa(3)],
    )]);
    case.rule = within(&[0], false);
    assert!(matches!(
        case.run(&one_gpu()),
        Err(AllocateError::Unsatisfiable { .. })
    ));
    case.rule = within(&[0], true);
    let allocation = case.run(&one_gpu()).expect("fits");
    assert_eq!(names(&allocation), [["unknown"]]);
    assert!(!allocation.aligned);
}

#[test]
fn zone_lists_and_malformed_values() {
    assert_eq!(parse_zone_list("0-2,5"), Ok(BTreeSet::from([0, 1, 2, 5])));
    assert_eq!(parse_zone_list("1"), Ok(BTreeSet::from([1])));
    for bad in ["", "a", "2-1", "0,,1", "-1", "99999", "0-99999"] {
        assert!(parse_zone_list(bad).is_err(), "{bad:?}");
    }
    let mut case = Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("list").string("resource.kubernetes.io/numaNode", "0-1"),
            device("negative").numa(-1),
            device("garbage").string("resource.kubernetes.io/numaNode", "zero"),
        ],
    )]);
    let devices = case.devices();
    let warned: Vec<_> = devices
        .warnings()
        .iter()
        .map(|w| w.device.clone().unwrap_or_default())
        .collect();
    assert_eq!(warned, ["negative", "garbage"]);
    assert!(
        devices.warnings()[0]
            .to_string()
            .contains("NUMA zones unknown")
    );
    assert_eq!(
        devices.zones(&id("pool", "list")),
        Some(&BTreeSet::from([0, 1]))
    );
    assert_eq!(devices.zones(&id("pool", "negative")), None);
    case.rule = within(&[0, 1], false);
    assert_eq!(names(&case.run(&one_gpu()).expect("fits")), [["list"]]);
}

#[test]
fn the_inventory_counts_devices_per_driver_and_zone() {
    let mut case = Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("a").numa(0),
            device("b").numa(0),
            device("c").numa(1).taint("NoSchedule"),
            device("d"),
        ],
    )]);
    case.in_use.insert(id("pool", "b"));
    let counts = inventory(&case.devices(), &case.in_use);
    let gpu = &counts["gpu.example.com"];
    assert_eq!(
        gpu[&Some(0)],
        DeviceCounts {
            free: 1,
            in_use: 1,
            unusable: 0
        }
    );
    assert_eq!(
        gpu[&Some(1)],
        DeviceCounts {
            free: 0,
            in_use: 0,
            unusable: 1
        }
    );
    assert_eq!(
        gpu[&None],
        DeviceCounts {
            free: 1,
            in_use: 0,
            unusable: 0
        }
    );
}
