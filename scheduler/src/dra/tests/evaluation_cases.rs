//! When selectors are evaluated and what a request may ask for, as kube-scheduler
//! does: lazily in search order for `ExactCount` (a runtime error on a device the
//! search does not reach is no error), up front on every device for `All`; a
//! subrequest past the per-claim limit gives way to the next; partitionable devices
//! are matched but never allocated.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Counter, DeviceCounterConsumption, DeviceRequest};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::dra::AllocateError;

use super::builders::{
    Case, DeviceExt, all, claim, device, first_available, gpus, id, names, plain_devices,
    selectors, slice,
};

const CORES: &str = r#"device.attributes["gpu.example.com"].cores >= 4"#;

/// a (4 cores), b (no cores attribute), c (8 cores).
fn cores() -> Case {
    Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("a").int("cores", 4),
            device("b"),
            device("c").int("cores", 8),
        ],
    )])
}

fn runtime_error_on(err: &AllocateError) -> Option<&str> {
    match err {
        AllocateError::SelectorRuntime { device, .. } => Some(&device.device),
        _ => None,
    }
}

#[test]
fn a_selector_error_counts_only_on_a_device_the_search_reaches() {
    let case = cores();
    // One device: a is found before b is looked at.
    assert_eq!(names(&case.run(&gpus(1, &[CORES])).expect("fits")), [["a"]]);
    // Two: the search reaches b.
    let err = case.run(&gpus(2, &[CORES])).expect_err("b has no cores");
    assert_eq!(runtime_error_on(&err), Some("b"), "{err}");
    // A device in use is never looked at.
    let mut held = cores();
    held.in_use.insert(id("pool", "b"));
    assert_eq!(
        names(&held.run(&gpus(2, &[CORES])).expect("fits")),
        [["a", "c"]]
    );
}

/// `firstAvailable`: one device matching [`CORES`], else all of them.
fn one_else_all() -> DeviceRequest {
    let mut request = first_available("gpu", &[("one", "gpu", 1), ("every", "gpu", 1)]);
    if let Some(subs) = request.first_available.as_mut() {
        subs[0].selectors = selectors(&[CORES]);
        subs[1].selectors = selectors(&[CORES]);
        subs[1].allocation_mode = Some("All".to_owned());
        subs[1].count = None;
    }
    request
}

#[test]
fn all_evaluates_every_device_before_the_search_even_when_not_reached() {
    let case = cores();
    // The first subrequest fits with a, yet the `All` one was evaluated on b before.
    let err = case
        .run(&[claim("c", vec![one_else_all()])])
        .expect_err("b has no cores");
    assert_eq!(runtime_error_on(&err), Some("b"), "{err}");
    // Also on a device in use.
    let mut held = cores();
    held.in_use.insert(id("pool", "b"));
    let err = held
        .run(&[claim("c", vec![one_else_all()])])
        .expect_err("b has no cores");
    assert_eq!(runtime_error_on(&err), Some("b"), "{err}");
    // Where every device has the attribute, the first subrequest is taken.
    let mut fine = cores();
    fine.slices[0].spec.devices = Some(vec![device("a").int("cores", 4)]);
    let allocation = fine.run(&[claim("c", vec![one_else_all()])]).expect("fits");
    assert_eq!(allocation.claims[0].devices[0].request, "gpu/one");
}

#[test]
fn a_subrequest_past_the_claim_limit_gives_way_to_the_next() {
    let case = Case::new(vec![slice("s", "pool", plain_devices(2))]);
    let request = first_available("gpu", &[("many", "gpu", 40), ("one", "gpu", 1)]);
    let allocation = case.run(&[claim("c", vec![request])]).expect("fits");
    assert_eq!(allocation.claims[0].devices[0].request, "gpu/one");
    let err = case.reason(&gpus(40, &[]));
    assert!(
        err.contains("asks for at least 40 devices, more than the limit of 32"),
        "{err}"
    );
}

#[test]
fn partitionable_devices_match_but_are_never_allocated() {
    let mut partition = device("part");
    partition.consumes_counters = Some(vec![DeviceCounterConsumption {
        counter_set: "memory".to_owned(),
        counters: BTreeMap::from([(
            "gb".to_owned(),
            Counter {
                value: Quantity("10".to_owned()),
            },
        )]),
    }]);
    let case = Case::new(vec![slice("s", "pool", vec![partition, device("whole")])]);
    assert_eq!(names(&case.run(&gpus(1, &[])).expect("fits")), [["whole"]]);
    let err = case.reason(&gpus(2, &[]));
    assert!(err.contains("1 of a kind TAS does not allocate"), "{err}");
    // `All` takes every matching device, the partition too, so it cannot be allocated.
    let err = case.reason(&[claim("c", vec![all("gpu", "gpu")])]);
    assert!(err.contains("not all of them are free"), "{err}");
}
