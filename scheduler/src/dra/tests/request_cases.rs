//! Requests: counts, All, firstAvailable, class and claim selectors, configs, and
//! what TAS refuses.

use k8s_openapi::api::resource::v1::{CapacityRequirements, DeviceToleration};

use crate::dra::{AllocateError, Unsupported};

use super::builders::{
    Case, ClaimExt, DeviceExt, all, claim, class, classes, device, exact, first_available, gpus,
    names, plain_devices, slice,
};

/// Selects the devices of model `small`.
const SMALL: &str = r#"device.attributes["gpu.example.com"].model == "small""#;

fn models() -> Case {
    Case::new(vec![slice(
        "s",
        "pool",
        vec![
            device("a").string("model", "small"),
            device("b").string("model", "big"),
            device("c").string("model", "small"),
        ],
    )])
}

#[test]
fn an_exact_count_takes_that_many_matching_devices() {
    let case = models();
    let small = gpus(2, &[SMALL]);
    let allocation = case.run(&small).expect("fits");
    assert_eq!(names(&allocation), [["a", "c"]]);
    let result = allocation.claims[0]
        .result
        .as_ref()
        .and_then(|r| r.devices.as_ref())
        .expect("devices");
    let results = result.results.as_ref().expect("results");
    assert!(
        results
            .iter()
            .all(|r| r.request == "gpu" && r.pool == "pool")
    );
    let three = gpus(3, &[SMALL]);
    assert!(
        case.reason(&three)
            .contains("needs 3 device(s), 2 free of 2 matching")
    );
}

#[test]
fn class_and_request_selectors_must_both_hold() {
    let mut case = models();
    case.classes = classes(vec![class(
        "gpu",
        &[r#"device.attributes["gpu.example.com"].model == "big""#],
    )]);
    let allocation = case.run(&gpus(1, &[])).expect("fits");
    assert_eq!(names(&allocation), [["b"]]);
    let both = gpus(1, &[SMALL]);
    assert!(case.reason(&both).contains("0 free of 0 matching"));
}

#[test]
fn all_takes_every_matching_device_and_fails_if_one_is_in_use() {
    let mut case = Case::new(vec![slice("s", "pool", plain_devices(3))]);
    let allocation = case
        .run(&[claim("c", vec![all("gpu", "gpu")])])
        .expect("fits");
    assert_eq!(names(&allocation), [["dev-0", "dev-1", "dev-2"]]);
    case.in_use.insert(super::builders::id("pool", "dev-1"));
    let err = case.reason(&[claim("c", vec![all("gpu", "gpu")])]);
    assert!(
        err.contains("asks for all devices, but not all of them are free"),
        "{err}"
    );
    let empty = Case::new(vec![]);
    assert!(
        empty.run(&[claim("c", vec![all("gpu", "gpu")])]).is_err(),
        "All needs one device"
    );
}

#[test]
fn first_available_tries_subrequests_in_order_and_names_the_one_taken() {
    let case = models();
    let mut classes = classes(vec![
        class(
            "big",
            &[r#"device.attributes["gpu.example.com"].model == "big""#],
        ),
        class("small", &[SMALL]),
    ]);
    let request = first_available(
        "gpu",
        &[
            ("two-big", "big", 2),
            ("two-small", "small", 2),
            ("one-big", "big", 1),
        ],
    );
    let run = |classes| {
        Case {
            classes,
            ..models()
        }
        .run(&[claim("c", vec![request.clone()])])
    };
    let allocation = run(classes.clone()).expect("fits");
    assert_eq!(names(&allocation), [["a", "c"]]);
    assert_eq!(allocation.claims[0].devices[0].request, "gpu/two-small");
    classes.insert("small".to_owned(), class("small", &["false"]));
    let allocation = run(classes).expect("fits");
    assert_eq!(allocation.claims[0].devices[0].request, "gpu/one-big");
    drop(case);
}

#[test]
fn configs_come_from_the_class_then_the_claim_for_allocated_requests() {
    let case = models();
    let claims = [claim(
        "c",
        vec![
            first_available("gpu", &[("one", "gpu", 1)]),
            exact("nic", "gpu", 1, &[]),
        ],
    )
    .config(&[], "all")
    .config(&["nic"], "nic-only")
    .config(&["gpu/other"], "not-taken")];
    let allocation = case.run(&claims).expect("fits");
    let devices = allocation.claims[0]
        .result
        .as_ref()
        .and_then(|r| r.devices.clone())
        .expect("devices");
    let configs: Vec<(String, Option<Vec<String>>, String)> = devices
        .config
        .expect("configs")
        .into_iter()
        .map(|c| {
            (
                c.source,
                c.requests,
                c.opaque.expect("opaque").parameters.0["p"].to_string(),
            )
        })
        .collect();
    let list = |names: &[&str]| Some(names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
    assert_eq!(
        configs,
        [
            (
                "FromClass".to_owned(),
                list(&["gpu/one", "nic"]),
                "\"gpu\"".to_owned()
            ),
            ("FromClaim".to_owned(), None, "\"all\"".to_owned()),
            (
                "FromClaim".to_owned(),
                list(&["nic"]),
                "\"nic-only\"".to_owned()
            ),
        ]
    );
}

#[test]
fn unsupported_features_are_refused_with_a_reason() {
    let case = models();
    let with = |edit: fn(&mut k8s_openapi::api::resource::v1::ExactDeviceRequest)| {
        let mut request = exact("gpu", "gpu", 1, &[]);
        if let Some(exactly) = request.exactly.as_mut() {
            edit(exactly);
        }
        case.run(&[claim("c", vec![request])])
    };
    let feature = |outcome: Result<_, AllocateError>| match outcome {
        Err(AllocateError::Unsupported { feature, .. }) => feature,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        feature(with(|r| r.admin_access = Some(true))),
        Unsupported::AdminAccess
    );
    assert_eq!(
        feature(with(|r| {
            r.capacity = Some(CapacityRequirements {
                requests: Some([("memory".to_owned(), Default::default())].into()),
            })
        })),
        Unsupported::ConsumableCapacity
    );
    assert_eq!(
        feature(with(
            |r| r.tolerations = Some(vec![DeviceToleration::default()])
        )),
        Unsupported::Tolerations
    );
    let message = with(|r| r.admin_access = Some(true))
        .expect_err("refused")
        .to_string();
    assert_eq!(
        message,
        "claim ns/c, request gpu: adminAccess is not supported by TAS yet"
    );
    assert!(with(|r| r.admin_access = Some(false)).is_ok());
}

#[test]
fn a_missing_class_or_a_selector_that_does_not_compile_makes_the_claim_unusable() {
    let mut case = models();
    let err = case
        .run(&[claim("c", vec![exact("gpu", "nope", 1, &[])])])
        .expect_err("no class");
    assert!(err.is_permanent());
    assert_eq!(
        err.to_string(),
        r#"claim ns/c, request gpu: device class "nope" not found"#
    );
    let err = case.reason(&gpus(1, &["true", "device.driver =="]));
    assert!(
        err.starts_with("claim ns/c, request gpu: selector #1: CEL compile error: syntax error"),
        "{err}"
    );
    case.classes = classes(vec![class("gpu", &["device.nope"])]);
    let err = case.reason(&gpus(1, &[]));
    assert_eq!(
        err,
        r#"class gpu: selector #1: CEL compile error: device has no field "nope""#
    );
}

#[test]
fn a_runtime_error_fails_the_node_naming_selector_device_and_error() {
    let case = models();
    let claims = gpus(1, &[r#"device.attributes["gpu.example.com"].cores > 1"#]);
    let err = case.run(&claims).expect_err("runtime error");
    assert!(!err.is_permanent());
    let message = err.to_string();
    assert!(
        message.starts_with("claim ns/c, request gpu: selector #0 on device gpu.example.com/pool/a: CEL runtime error:"),
        "{message}"
    );
    assert!(message.contains("cores"), "{message}");
}
