//! The DRA referee's answers on small cases whose outcome is known: allocations on a
//! node-local slice, refusals, class and claim CEL selectors, `firstAvailable`,
//! `matchAttribute`, devices in use, and what kube-scheduler's allocator does with a
//! CEL runtime error and an incomplete pool. Skipped with a note when
//! `TAS_DRA_REFEREE_BIN` is unset, as outside `make test`.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};
use tas_nodesim::dra_referee::{Case, DraReferee, DraRefereeError, Verdict};

const DRIVER: &str = "gpu.example.com";
const NODE: &str = "worker-1";

/// The referee, or `None` (with a note) when it is not configured.
fn referee() -> Option<DraReferee> {
    match DraReferee::start() {
        Ok(referee) => Some(referee),
        Err(DraRefereeError::NotConfigured) => {
            eprintln!("skipped: {}", DraRefereeError::NotConfigured);
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

fn node() -> Node {
    from(json!({"metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}))
}

/// A one-slice pool local to the node with these devices (`{"name": ..., "attributes": ...}`).
fn gpus(devices: Value) -> ResourceSlice {
    from(json!({
        "metadata": {"name": format!("{NODE}-gpus")},
        "spec": {"driver": DRIVER, "nodeName": NODE,
                 "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices}
    }))
}

/// `n` GPUs without attributes: gpu-0 ...
fn plain_gpus(n: usize) -> ResourceSlice {
    gpus(
        (0..n)
            .map(|i| json!({"name": format!("gpu-{i}")}))
            .collect(),
    )
}

fn class(name: &str, selector: &str) -> DeviceClass {
    from(json!({
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": selector}}]}
    }))
}

/// The class of every device of the driver.
fn gpu_class() -> DeviceClass {
    class("gpu", &format!("device.driver == '{DRIVER}'"))
}

/// A claim with these `spec.devices` (requests, constraints).
fn claim(name: &str, devices: Value) -> ResourceClaim {
    from(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"devices": devices}
    }))
}

/// A claim for `count` devices of class gpu, request name `gpu`.
fn gpu_claim(name: &str, count: u32) -> ResourceClaim {
    claim(
        name,
        json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}),
    )
}

/// Another pod's claim, allocated the given devices of the node's pool.
fn holding(name: &str, devices: &[&str]) -> ResourceClaim {
    let mut c = gpu_claim(name, devices.len() as u32);
    let results: Vec<Value> = devices
        .iter()
        .map(|d| json!({"request": "gpu", "driver": DRIVER, "pool": NODE, "device": d}))
        .collect();
    c.status = Some(from(
        json!({"allocation": {"devices": {"results": results}}}),
    ));
    c
}

fn case(slices: Vec<ResourceSlice>, classes: Vec<DeviceClass>, claims: Vec<ResourceClaim>) -> Case {
    Case {
        node: node(),
        slices,
        classes,
        claims,
        allocated: Vec::new(),
    }
}

/// `request=device` per result of each allocation, or the verdict when not allocated.
fn devices(verdict: &Verdict) -> Vec<Vec<String>> {
    let Verdict::Allocated(allocations) = verdict else {
        panic!("expected an allocation, got {verdict:?}");
    };
    allocations
        .iter()
        .map(|a: &AllocationResult| {
            a.devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .inspect(|r| {
                    assert_eq!((r.driver.as_str(), r.pool.as_str()), (DRIVER, NODE));
                })
                .map(|r| format!("{}={}", r.request, r.device))
                .collect()
        })
        .collect()
}

#[test]
fn one_of_two_node_local_gpus_is_allocated_and_three_are_not() {
    let Some(mut referee) = referee() else { return };
    let one = case(
        vec![plain_gpus(2)],
        vec![gpu_class()],
        vec![gpu_claim("a", 1)],
    );
    let verdict = referee.allocate(&one).unwrap();
    assert_eq!(devices(&verdict), [["gpu=gpu-0"]]);
    // A node-local device ties the claim to the node by name.
    let Verdict::Allocated(allocations) = &verdict else {
        unreachable!()
    };
    let selector = serde_json::to_value(&allocations[0].node_selector).unwrap();
    assert_eq!(
        selector["nodeSelectorTerms"][0]["matchFields"][0],
        json!({"key": "metadata.name", "operator": "In", "values": [NODE]})
    );

    let three = case(
        vec![plain_gpus(2)],
        vec![gpu_class()],
        vec![gpu_claim("a", 3)],
    );
    assert_eq!(referee.allocate(&three).unwrap(), Verdict::Unschedulable);

    // Two claims of one pod never share a device.
    let two_pods_worth = case(
        vec![plain_gpus(2)],
        vec![gpu_class()],
        vec![gpu_claim("a", 1), gpu_claim("b", 1)],
    );
    assert_eq!(
        devices(&referee.allocate(&two_pods_worth).unwrap()),
        [["gpu=gpu-0"], ["gpu=gpu-1"]]
    );
    let too_many = case(
        vec![plain_gpus(2)],
        vec![gpu_class()],
        vec![gpu_claim("a", 1), gpu_claim("b", 1), gpu_claim("c", 1)],
    );
    assert_eq!(referee.allocate(&too_many).unwrap(), Verdict::Unschedulable);
    referee.shutdown().unwrap();
}

#[test]
fn a_device_allocated_to_another_claim_is_not_reused() {
    let Some(mut referee) = referee() else { return };
    let mut c = case(
        vec![plain_gpus(2)],
        vec![gpu_class()],
        vec![gpu_claim("a", 1)],
    );
    c.allocated = vec![holding("other", &["gpu-0"])];
    assert_eq!(devices(&referee.allocate(&c).unwrap()), [["gpu=gpu-1"]]);

    c.allocated = vec![holding("other", &["gpu-0"]), holding("third", &["gpu-1"])];
    assert_eq!(referee.allocate(&c).unwrap(), Verdict::Unschedulable);
}

#[test]
fn class_and_claim_cel_selectors_pick_by_attribute() {
    let Some(mut referee) = referee() else { return };
    let slice = gpus(json!([
        {"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "memory": {"int": 40}}},
        {"name": "gpu-1", "attributes": {"model": {"string": "h100"}, "memory": {"int": 80}}},
    ]));
    let h100 = class(
        "gpu",
        &format!("device.attributes['{DRIVER}'].model == 'h100'"),
    );
    let c = case(vec![slice.clone()], vec![h100], vec![gpu_claim("a", 1)]);
    assert_eq!(devices(&referee.allocate(&c).unwrap()), [["gpu=gpu-1"]]);

    // The claim's own selector narrows the class's.
    let big = claim(
        "a",
        json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
            "selectors": [{"cel": {"expression": format!("device.attributes['{DRIVER}'].memory >= 64")}}]}}]}),
    );
    let c = case(vec![slice], vec![gpu_class()], vec![big]);
    assert_eq!(devices(&referee.allocate(&c).unwrap()), [["gpu=gpu-1"]]);
}

#[test]
fn first_available_falls_back_to_the_next_subrequest() {
    let Some(mut referee) = referee() else { return };
    let slice = gpus(json!([
        {"name": "gpu-0", "attributes": {"model": {"string": "a100"}}},
        {"name": "gpu-1", "attributes": {"model": {"string": "h100"}}},
    ]));
    let classes = vec![
        class(
            "h100",
            &format!("device.attributes['{DRIVER}'].model == 'h100'"),
        ),
        class(
            "a100",
            &format!("device.attributes['{DRIVER}'].model == 'a100'"),
        ),
    ];
    let prefer = |h100s: u32| {
        claim(
            "a",
            json!({"requests": [{"name": "gpu", "firstAvailable": [
                {"name": "two-h100", "deviceClassName": "h100", "count": h100s},
                {"name": "one-a100", "deviceClassName": "a100", "count": 1},
            ]}]}),
        )
    };
    // One H100 exists: the first choice fits when it asks for one.
    let c = case(vec![slice.clone()], classes.clone(), vec![prefer(1)]);
    assert_eq!(
        devices(&referee.allocate(&c).unwrap()),
        [["gpu/two-h100=gpu-1"]]
    );
    // Two do not: the second choice, named `<request>/<subrequest>` in the result.
    let c = case(vec![slice], classes, vec![prefer(2)]);
    assert_eq!(
        devices(&referee.allocate(&c).unwrap()),
        [["gpu/one-a100=gpu-0"]]
    );
}

#[test]
fn match_attribute_keeps_the_devices_on_one_numa_node() {
    let Some(mut referee) = referee() else { return };
    let slice = gpus(
        (0..4)
            .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"numa": {"int": i / 2}}}))
            .collect(),
    );
    let pair = |constrained: bool| {
        let constraints = if constrained {
            json!([{"matchAttribute": format!("{DRIVER}/numa")}])
        } else {
            json!([])
        };
        claim(
            "a",
            json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}],
                   "constraints": constraints}),
        )
    };
    // gpu-0 (NUMA 0) is in use: the first two free ones span NUMA 0 and 1, the
    // constraint moves the pair to NUMA 1.
    let mut c = case(vec![slice], vec![gpu_class()], vec![pair(false)]);
    c.allocated = vec![holding("other", &["gpu-0"])];
    assert_eq!(
        devices(&referee.allocate(&c).unwrap()),
        [["gpu=gpu-1", "gpu=gpu-2"]]
    );
    c.claims = vec![pair(true)];
    assert_eq!(
        devices(&referee.allocate(&c).unwrap()),
        [["gpu=gpu-2", "gpu=gpu-3"]]
    );
    c.allocated.push(holding("third", &["gpu-3"]));
    assert_eq!(referee.allocate(&c).unwrap(), Verdict::Unschedulable);
}

/// kube-scheduler's allocator does not treat a CEL runtime error as "no match": it stops
/// and returns the error (the DynamicResources plugin's Filter turns it into an error
/// status, and the pod is retried, rather than calling the node unschedulable). It only
/// does so when the search evaluates the expression on a device that raises it: devices
/// are tried in slice order, so a selector on an attribute only gpu-0 has succeeds for
/// one device and fails as soon as gpu-1 must be looked at.
#[test]
fn a_cel_runtime_error_fails_the_allocation_when_the_search_reaches_it() {
    let Some(mut referee) = referee() else { return };
    let slice = gpus(json!([
        {"name": "gpu-0", "attributes": {"model": {"string": "a100"}}},
        {"name": "gpu-1"},
    ]));
    let a100 = class(
        "gpu",
        &format!("device.attributes['{DRIVER}'].model == 'a100'"),
    );
    let one = case(
        vec![slice.clone()],
        vec![a100.clone()],
        vec![gpu_claim("a", 1)],
    );
    assert_eq!(devices(&referee.allocate(&one).unwrap()), [["gpu=gpu-0"]]);

    let two = case(vec![slice], vec![a100], vec![gpu_claim("a", 2)]);
    match referee.allocate(&two).unwrap() {
        Verdict::Failed(message) => assert!(
            message.contains("class gpu: selector #0: CEL runtime error: no such key: model"),
            "{message}"
        ),
        other => panic!("expected the CEL runtime error, got {other:?}"),
    }
}

/// A pool whose slices are not all published yet (`resourceSliceCount` 2, one slice
/// seen) is allocated from as if complete, except by `allocationMode: All`, which the
/// allocator refuses with an error rather than as unschedulable.
#[test]
fn an_incomplete_pool_serves_exact_counts_but_not_all() {
    let Some(mut referee) = referee() else { return };
    let mut slice = plain_gpus(2);
    slice.spec.pool.resource_slice_count = 2;
    let c = case(
        vec![slice.clone()],
        vec![gpu_class()],
        vec![gpu_claim("a", 1)],
    );
    assert_eq!(devices(&referee.allocate(&c).unwrap()), [["gpu=gpu-0"]]);

    let all = claim(
        "a",
        json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}),
    );
    let c = case(vec![slice], vec![gpu_class()], vec![all]);
    match referee.allocate(&c).unwrap() {
        Verdict::Failed(message) => assert!(
            message.contains("asks for all devices, but resource pool gpu.example.com/worker-1 is currently being updated"),
            "{message}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// One process answers a long series, each answer its own request's.
#[test]
fn one_process_answers_many_cases_in_turn() {
    let Some(mut referee) = referee() else { return };
    for i in 0..300u32 {
        let count = i % 4; // 0 is the API server's default: one device
        let c = case(
            vec![plain_gpus(2)],
            vec![gpu_class()],
            vec![gpu_claim("a", count)],
        );
        let verdict = referee.allocate(&c).unwrap();
        match count {
            0 | 1 => assert_eq!(devices(&verdict), [["gpu=gpu-0"]], "case {i}"),
            2 => assert_eq!(devices(&verdict), [["gpu=gpu-0", "gpu=gpu-1"]], "case {i}"),
            _ => assert_eq!(verdict, Verdict::Unschedulable, "case {i}"),
        }
    }
    referee.shutdown().unwrap();
}
