//! `NodeInfo` bookkeeping: idempotent adds, removals, updates, node refreshes, and a
//! property test that the running totals always equal a fresh sum.

use proptest::prelude::*;
use serde_json::json;

use super::super::node_ports::HostPortSet;
use super::super::{AddPodError, NodeInfo, PodUsage, ResourceTotals};
use super::{info, input, node_with_allocatable, pod, pod_requesting, roomy};

fn gpu_pod(
    uid: &str,
    cpu: &str,
    gpus: i64,
    host_port: Option<i32>,
) -> k8s_openapi::api::core::v1::Pod {
    let ports: Vec<_> = host_port
        .into_iter()
        .map(|p| json!({ "containerPort": 80, "hostPort": p }))
        .collect();
    pod(
        uid,
        json!({ "containers": [{ "name": "app", "ports": ports, "resources": {
            "requests": { "cpu": cpu, "example.com/gpu": gpus.to_string() }
        } }] }),
    )
}

#[test]
fn adding_the_same_pod_twice_counts_it_once() {
    let mut node = info(&roomy("n1"));
    let assumed = gpu_pod("u1", "2", 1, Some(8080));
    node.add_pod(&assumed).unwrap();
    let once = node.clone();
    // The binding is observed after the pod was assumed: same uid, nodeName now set.
    let mut bound = assumed.clone();
    bound.spec.as_mut().unwrap().node_name = Some("n1".to_owned());
    node.add_pod(&bound).unwrap();
    node.add_pod(&assumed).unwrap();
    assert_eq!(node, once);
    assert_eq!(node.pod_count(), 1);
    assert_eq!(node.requested().milli_cpu, 2000);
    assert_eq!(node.requested().scalar("example.com/gpu"), 1);
}

#[test]
fn updating_a_pod_replaces_its_contribution() {
    let mut node = info(&roomy("n1"));
    node.add_pod(&gpu_pod("u1", "2", 1, Some(8080))).unwrap();
    node.add_pod(&gpu_pod("u1", "3", 0, Some(9090))).unwrap();
    assert_eq!(node.pod_count(), 1);
    assert_eq!(node.requested().milli_cpu, 3000);
    assert_eq!(node.requested().scalar("example.com/gpu"), 0);
    let wants = |port| {
        input(&pod(
            "p",
            json!({ "containers": [{ "name": "a", "ports": [{ "containerPort": 1, "hostPort": port }] }] }),
        ))
    };
    assert_eq!(
        super::super::node_ports::filter(&wants(8080), &node),
        Ok(())
    );
    assert!(super::super::node_ports::filter(&wants(9090), &node).is_err());
}

#[test]
fn removing_releases_everything_once() {
    let mut node = info(&roomy("n1"));
    node.add_pod(&gpu_pod("u1", "2", 1, Some(8080))).unwrap();
    node.add_pod(&gpu_pod("u2", "1", 1, Some(8080))).unwrap();
    assert!(node.remove_pod("u1"));
    assert!(!node.remove_pod("u1"));
    // u2 still holds the port it shares with u1.
    assert!(!node.used_ports().is_empty());
    assert_eq!(node.requested().milli_cpu, 1000);
    assert!(node.remove_pod("u2"));
    assert_eq!(node.requested(), &ResourceTotals::default());
    assert_eq!(node.used_ports(), &HostPortSet::default());
    assert_eq!(node.pod_count(), 0);
    assert!(!node.contains_pod("u2"));
}

#[test]
fn unusable_pods_are_rejected_without_changes() {
    let mut node = info(&roomy("n1"));
    node.add_pod(&pod_requesting("u1", json!({ "cpu": "1" })))
        .unwrap();
    let before = node.clone();
    let mut no_uid = pod_requesting("x", json!({ "cpu": "1" }));
    no_uid.metadata.uid = None;
    assert_eq!(node.add_pod(&no_uid), Err(AddPodError::MissingUid));
    let bad = pod_requesting("u1", json!({ "cpu": "lots" }));
    assert!(matches!(node.add_pod(&bad), Err(AddPodError::Request(_))));
    let negative = pod_requesting("u1", json!({ "memory": "-1" }));
    assert!(matches!(
        node.add_pod(&negative),
        Err(AddPodError::Request(_))
    ));
    assert_eq!(node, before);
}

#[test]
fn node_updates_keep_the_pods() {
    let mut node = info(&node_with_allocatable(
        "n1",
        json!({ "cpu": "2", "pods": "10" }),
    ));
    node.add_pod(&pod_requesting("u1", json!({ "cpu": "2" })))
        .unwrap();
    let pod = input(&pod_requesting("p", json!({ "cpu": "1" })));
    assert!(super::super::filter_node(&pod, &node).is_err());
    node.set_node(&node_with_allocatable(
        "n1",
        json!({ "cpu": "4", "pods": "10" }),
    ))
    .unwrap();
    assert_eq!(node.pod_count(), 1);
    assert_eq!(super::super::filter_node(&pod, &node), Ok(()));
    // A node update that does not parse changes nothing.
    let before = node.clone();
    let bad = node_with_allocatable("n1", json!({ "cpu": "four" }));
    assert!(node.set_node(&bad).is_err());
    assert!(NodeInfo::new(&bad).is_err());
    assert_eq!(node, before);
}

#[test]
fn usage_from_a_filter_input_assumes_without_reparsing() {
    let mut node = info(&roomy("n1"));
    let pod = gpu_pod("u1", "2", 1, None);
    node.add_usage("u1", input(&pod).usage().clone());
    let by_pod = {
        let mut n = info(&roomy("n1"));
        n.add_pod(&pod).unwrap();
        n
    };
    assert_eq!(node, by_pod);
    assert_eq!(PodUsage::from_pod(&pod).as_ref(), Ok(input(&pod).usage()));
}

/// One step of a random add/remove sequence over a pool of pods.
#[derive(Debug, Clone)]
enum Step {
    Add {
        uid: u8,
        cpu: u16,
        gpus: u8,
        port: Option<u8>,
    },
    Remove {
        uid: u8,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..6, 0u16..4000, 0u8..3, proptest::option::of(0u8..4)).prop_map(
            |(uid, cpu, gpus, port)| Step::Add {
                uid,
                cpu,
                gpus,
                port
            }
        ),
        (0u8..6).prop_map(|uid| Step::Remove { uid }),
    ]
}

proptest! {
    #[test]
    fn totals_always_equal_a_fresh_sum(steps in proptest::collection::vec(step(), 0..40)) {
        let mut node = info(&roomy("n1"));
        let mut live = std::collections::BTreeMap::new();
        for s in steps {
            match s {
                Step::Add { uid, cpu, gpus, port } => {
                    let pod = gpu_pod(&format!("u{uid}"), &format!("{cpu}m"), gpus.into(), port.map(|p| 8000 + i32::from(p)));
                    node.add_pod(&pod).unwrap();
                    live.insert(uid, pod);
                }
                Step::Remove { uid } => {
                    prop_assert_eq!(node.remove_pod(&format!("u{uid}")), live.remove(&uid).is_some());
                }
            }
            let mut fresh = info(&roomy("n1"));
            for pod in live.values() {
                fresh.add_pod(pod).unwrap();
            }
            prop_assert_eq!(&node, &fresh);
        }
        for uid in live.keys() {
            node.remove_pod(&format!("u{uid}"));
        }
        prop_assert_eq!(node, info(&roomy("n1")));
    }
}
