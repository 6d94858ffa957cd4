//! The search: devices in use, several claims of one pod, constraints, taints, claims
//! already allocated, and the step bound.

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult,
};

use crate::dra::AllocateError;

use super::builders::{
    Case, ClaimExt, DRIVER, DeviceExt, claim, device, exact, gpus, id, label_selector, names,
    plain_devices, slice,
};

#[test]
fn devices_in_use_are_never_handed_out() {
    let mut case = Case::new(vec![slice("s", "pool", plain_devices(3))]);
    case.in_use.insert(id("pool", "dev-0"));
    case.in_use.insert(id("pool", "dev-2"));
    let allocation = case.run(&gpus(1, &[])).expect("fits");
    assert_eq!(names(&allocation), [["dev-1"]]);
    let err = case.reason(&gpus(2, &[]));
    assert!(
        err.contains("needs 2 device(s), 1 free of 3 matching (2 in use"),
        "{err}"
    );
}

#[test]
fn the_claims_of_one_pod_never_share_a_device() {
    let case = Case::new(vec![slice("s", "pool", plain_devices(3))]);
    let claims = [
        claim("one", vec![exact("gpu", "gpu", 2, &[])]),
        claim("two", vec![exact("gpu", "gpu", 1, &[])]),
    ];
    let allocation = case.run(&claims).expect("fits");
    assert_eq!(names(&allocation), [vec!["dev-0", "dev-1"], vec!["dev-2"]]);
    assert_eq!(allocation.new_devices().count(), 3);
    let more = [
        claims[0].clone(),
        claim("two", vec![exact("gpu", "gpu", 2, &[])]),
    ];
    assert!(matches!(case.run(&more), Err(AllocateError::NoCombination)));
}

#[test]
fn match_attribute_backtracks_to_devices_with_one_value() {
    let case = Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("a").string("socket", "0"),
            device("b").string("socket", "1"),
            device("c"),
            device("d").string("socket", "1"),
        ],
    )]);
    let pair = claim(
        "c",
        vec![exact("x", "gpu", 1, &[]), exact("y", "gpu", 1, &[])],
    );
    let matched = pair.clone().match_attribute("gpu.example.com/socket", &[]);
    assert_eq!(names(&case.run(&[matched]).expect("fits")), [["b", "d"]]);
    let only_y = pair
        .clone()
        .match_attribute("gpu.example.com/socket", &["y"]);
    assert_eq!(names(&case.run(&[only_y]).expect("fits")), [["a", "b"]]);
    let three =
        claim("c", vec![exact("x", "gpu", 3, &[])]).match_attribute("gpu.example.com/socket", &[]);
    assert!(matches!(
        case.run(&[three]),
        Err(AllocateError::NoCombination)
    ));
}

#[test]
fn distinct_attribute_needs_different_values() {
    let case = Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("a").int("slot", 1),
            device("b").int("slot", 1),
            device("c").int("slot", 2),
        ],
    )]);
    let c = claim("c", vec![exact("x", "gpu", 2, &[])]).distinct_attribute("gpu.example.com/slot");
    assert_eq!(names(&case.run(&[c]).expect("fits")), [["a", "c"]]);
}

#[test]
fn tainted_devices_are_not_allocated() {
    let case = Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("a").taint("NoSchedule"),
            device("b").taint("NoExecute"),
            device("c").taint("None"),
        ],
    )]);
    let allocation = case.run(&gpus(1, &[])).expect("fits");
    assert_eq!(names(&allocation), [["c"]]);
    let err = case.reason(&gpus(2, &[]));
    assert!(err.contains("2 tainted"), "{err}");
}

fn held(device: &str, node_selector: Option<NodeSelector>) -> AllocationResult {
    AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(vec![DeviceRequestAllocationResult {
                request: "gpu".to_owned(),
                driver: DRIVER.to_owned(),
                pool: "pool".to_owned(),
                device: device.to_owned(),
                ..Default::default()
            }]),
            config: None,
        }),
        node_selector,
        ..Default::default()
    }
}

#[test]
fn an_allocated_claim_keeps_its_devices_and_must_select_the_node() {
    let case = Case::new(vec![slice("s", "pool", plain_devices(2))]);
    let shared = claim("shared", vec![exact("gpu", "gpu", 1, &[])]).allocated(held("dev-0", None));
    let claims = [shared, claim("own", vec![exact("gpu", "gpu", 1, &[])])];
    let allocation = case.run(&claims).expect("fits");
    assert!(allocation.claims[0].result.is_none());
    assert_eq!(names(&allocation), [["dev-0"], ["dev-1"]]);
    assert_eq!(
        allocation
            .new_devices()
            .map(|d| d.device.as_str())
            .collect::<Vec<_>>(),
        ["dev-1"]
    );
    let elsewhere =
        claim("shared", vec![]).allocated(held("dev-0", Some(label_selector("rack", "r9"))));
    let err = case.run(&[elsewhere]).expect_err("other node");
    assert!(
        matches!(err, AllocateError::AllocatedElsewhere { .. }),
        "{err}"
    );
}

#[test]
fn the_search_gives_up_at_its_bound() {
    // 7 devices of one group among 4 groups of 6 cannot be found, and proving it
    // takes thousands of steps.
    let devices = (0..24)
        .map(|i| device(&format!("d{i}")).int("group", i % 4))
        .collect();
    let mut case = Case::new(vec![slice("s", "pool", devices)]);
    case.max_steps = 500;
    let c =
        claim("c", vec![exact("x", "gpu", 7, &[])]).match_attribute("gpu.example.com/group", &[]);
    assert_eq!(
        case.run(std::slice::from_ref(&c)),
        Err(AllocateError::SearchBound { steps: 500 })
    );
    case.max_steps = u64::MAX;
    assert!(matches!(case.run(&[c]), Err(AllocateError::NoCombination)));
}
