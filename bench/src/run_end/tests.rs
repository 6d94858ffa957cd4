//! The run-end rule on hand-made watch events.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

use super::*;
use crate::workload::{ClusterShape, DEVICE, guaranteed_pod, pod_with};

const IDLE: Duration = Duration::from_secs(60);

fn rule(early: bool) -> EndRule {
    EndRule {
        early,
        settle: SETTLE,
        idle_timeout: IDLE,
    }
}

/// Two nodes of 1 zone × 4 CPUs / 16 GiB, room for 110 pods.
fn nodes() -> Vec<(String, Amounts)> {
    let shape = ClusterShape {
        nodes: 2,
        zones: 1,
        zone_cpus: 4,
        zone_memory_gib: 16,
        max_pods: 110,
        devices_per_zone: 0,
        hugepages_gib_per_zone: 0,
    };
    let allocatable = shape.allocatable();
    shape
        .node_names()
        .into_iter()
        .map(|n| (n, allocatable.clone()))
        .collect()
}

fn node(i: usize) -> String {
    format!("bench-node-{i:04}")
}

fn pending(name: &str, cpus: u32) -> Pod {
    guaranteed_pod(name, "s", "r1", &cpus.to_string(), &format!("{cpus}Gi"))
}

fn bound(mut pod: Pod, node: &str) -> Pod {
    pod.spec.as_mut().unwrap().node_name = Some(node.to_string());
    pod
}

fn marked(mut pod: Pod) -> Pod {
    pod.status = Some(
        serde_json::from_value(serde_json::json!({
            "phase": "Pending",
            "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 Insufficient cpu."
            }]
        }))
        .unwrap(),
    );
    pod
}

#[test]
fn a_run_with_every_pod_bound_ends_at_once() {
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 2, t0);
    assert_eq!(
        p.observe(0, &bound(pending("a", 1), &node(0)), t0),
        Observed::Bound(node(0))
    );
    // The same bind seen again (a status update) is not a second bind.
    assert_eq!(
        p.observe(0, &bound(pending("a", 1), &node(0)), t0),
        Observed::Other
    );
    assert_eq!(p.verdict(&rule(true), t0), None, "creation not finished");
    p.observe(1, &bound(pending("b", 1), &node(1)), t0);
    assert_eq!(p.bound(), 2);
    assert_eq!(p.verdict(&rule(false), t0), Some(RunEnd::AllBound));
}

#[test]
fn pods_that_fit_no_node_at_node_level_end_the_run_without_waiting() {
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 3, t0);
    // 3 + 3 CPUs bound: 1 CPU free per node, a 2-CPU pod fits neither.
    p.observe(0, &bound(pending("a", 3), &node(0)), t0);
    p.observe(1, &bound(pending("b", 3), &node(1)), t0);
    p.observe(2, &pending("c", 2), t0);
    assert_eq!(p.verdict(&rule(true), t0), None, "creation not finished");
    p.creation_done(3, t0);
    // Not even marked Unschedulable yet: the proof does not need the scheduler's word.
    assert_eq!(p.verdict(&rule(true), t0), Some(RunEnd::Unplaceable));
}

#[test]
fn a_pod_that_still_fits_somewhere_keeps_the_run_going_until_the_idle_timeout() {
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 2, t0);
    p.observe(0, &bound(pending("a", 3), &node(0)), t0);
    p.observe(1, &pending("b", 2), t0);
    p.creation_done(2, t0);
    assert_eq!(p.verdict(&rule(true), t0 + Duration::from_secs(59)), None);
    assert_eq!(
        p.verdict(&rule(true), t0 + IDLE),
        Some(RunEnd::Idle),
        "the old rule stays the fallback"
    );
    assert_eq!(p.early(), None);
}

#[test]
fn every_pod_left_marked_unschedulable_settles_after_the_window_without_a_bind() {
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 3, t0);
    p.observe(0, &bound(pending("a", 3), &node(0)), t0);
    p.observe(1, &pending("b", 1), t0);
    p.observe(2, &pending("c", 1), t0);
    p.creation_done(3, t0);
    let t1 = t0 + Duration::from_secs(2);
    p.observe(1, &marked(pending("b", 1)), t1);
    let later = t1 + SETTLE + Duration::from_secs(5);
    assert_eq!(p.verdict(&rule(true), later), None, "c is not marked yet");

    let t2 = t0 + Duration::from_secs(4);
    p.observe(2, &marked(pending("c", 1)), t2);
    // A newly marked pod is a change: the window counts from it.
    assert_eq!(
        p.verdict(&rule(true), t2 + SETTLE - Duration::from_millis(1)),
        None
    );
    // A bind of a marked pod is one too.
    let t3 = t2 + Duration::from_secs(10);
    p.observe(1, &bound(marked(pending("b", 1)), &node(1)), t3);
    assert_eq!(p.verdict(&rule(true), t2 + SETTLE), None);
    assert_eq!(p.verdict(&rule(true), t3 + SETTLE), Some(RunEnd::Settled));
}

#[test]
fn with_early_ends_off_the_early_instant_is_only_noted() {
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 2, t0);
    p.observe(0, &marked(pending("a", 1)), t0);
    p.observe(1, &marked(pending("b", 1)), t0);
    p.creation_done(2, t0);
    let settled = t0 + SETTLE;
    assert_eq!(p.verdict(&rule(false), settled), None);
    assert_eq!(p.early(), Some((settled, RunEnd::Settled)));
    // The first instant stays.
    assert_eq!(
        p.verdict(&rule(false), settled + Duration::from_secs(1)),
        None
    );
    assert_eq!(p.early(), Some((settled, RunEnd::Settled)));
    assert_eq!(p.verdict(&rule(false), t0 + IDLE), Some(RunEnd::Idle));
}

#[test]
fn a_created_pod_the_watch_has_not_shown_yet_keeps_the_run_going() {
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 3, t0);
    p.observe(0, &bound(pending("a", 4), &node(0)), t0);
    p.observe(1, &bound(pending("b", 4), &node(1)), t0);
    p.creation_done(3, t0);
    assert_eq!(p.verdict(&rule(true), t0), None, "pod 2 not seen yet");
    p.observe(2, &pending("c", 1), t0);
    assert_eq!(p.verdict(&rule(true), t0), Some(RunEnd::Unplaceable));

    // Pods whose creation failed are never seen: the creator's count says so.
    let mut p = Progress::new(nodes(), 3, t0);
    p.observe(0, &bound(pending("a", 4), &node(0)), t0);
    p.observe(1, &bound(pending("b", 4), &node(1)), t0);
    p.creation_done(2, t0);
    assert_eq!(p.verdict(&rule(true), t0), Some(RunEnd::Unplaceable));
}

#[test]
fn a_deleted_or_finished_pod_gives_its_room_back() {
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 4, t0);
    p.observe(0, &bound(pending("a", 4), &node(0)), t0);
    p.observe(1, &bound(pending("b", 4), &node(1)), t0);
    p.observe(2, &pending("c", 2), t0);
    p.observe(3, &pending("d", 2), t0);
    p.creation_done(4, t0);
    assert_eq!(p.verdict(&rule(true), t0), Some(RunEnd::Unplaceable));
    p.deleted(0);
    p.deleted(0);
    assert_eq!(p.verdict(&rule(true), t0), None, "node 0 has 4 CPUs again");

    let mut p = Progress::new(nodes(), 3, t0);
    p.observe(0, &bound(pending("a", 4), &node(0)), t0);
    p.observe(1, &bound(pending("b", 4), &node(1)), t0);
    p.observe(2, &pending("c", 2), t0);
    p.creation_done(3, t0);
    let mut done = bound(pending("a", 4), &node(0));
    done.status = Some(serde_json::from_value(serde_json::json!({"phase": "Succeeded"})).unwrap());
    p.observe(0, &done, t0);
    assert_eq!(p.verdict(&rule(true), t0), None);
}

#[test]
fn every_resource_and_the_pod_count_are_judged() {
    let t0 = Instant::now();
    // A device the nodes do not have: fits nowhere.
    let nic = pod_with(
        "nic",
        "s",
        "r1",
        serde_json::json!({ "cpu": "1", DEVICE: "1" }),
        serde_json::json!({ "cpu": "1", DEVICE: "1" }),
    );
    let mut p = Progress::new(nodes(), 1, t0);
    p.observe(0, &nic, t0);
    p.creation_done(1, t0);
    assert_eq!(p.verdict(&rule(true), t0), Some(RunEnd::Unplaceable));

    // Memory alone can be what is missing.
    let mut p = Progress::new(nodes(), 3, t0);
    let big = |name| guaranteed_pod(name, "s", "r1", "1", "15Gi");
    p.observe(0, &bound(big("a"), &node(0)), t0);
    p.observe(1, &bound(big("b"), &node(1)), t0);
    p.observe(2, &big("c"), t0);
    p.creation_done(3, t0);
    assert_eq!(p.verdict(&rule(true), t0), Some(RunEnd::Unplaceable));

    let allocatable = Amounts::from([("cpu".into(), 4000), (PODS.into(), 1)]);
    let one = node_requests(&guaranteed_pod("x", "s", "r1", "1", "1Gi"));
    assert_eq!(one[PODS], 1);
    assert!(fits(
        &allocatable,
        &Amounts::new(),
        &Amounts::from([("cpu".into(), 4000), (PODS.into(), 1)])
    ));
    assert!(!fits(
        &allocatable,
        &Amounts::from([(PODS.into(), 1)]),
        &Amounts::from([(PODS.into(), 1)])
    ));
}

#[test]
fn requests_are_what_node_level_fit_counts() {
    // A Burstable pod takes its requests, not its limits; a BestEffort pod one pod slot.
    let burstable = pod_with(
        "b",
        "s",
        "r1",
        serde_json::json!({ "cpu": "500m", "memory": "1Gi" }),
        serde_json::json!({ "cpu": "1", "memory": "2Gi" }),
    );
    assert_eq!(
        node_requests(&burstable),
        Amounts::from([
            ("cpu".into(), 500),
            ("memory".into(), 1 << 30),
            (PODS.into(), 1)
        ])
    );
    let best_effort = guaranteed_pod("e", "s", "r1", "", "");
    assert_eq!(
        node_requests(&best_effort),
        Amounts::from([(PODS.into(), 1)])
    );
}

#[test]
fn only_unschedulable_from_the_scheduler_counts_as_marked() {
    assert!(is_marked_unschedulable(&marked(pending("a", 1))));
    assert!(!is_marked_unschedulable(&pending("a", 1)));
    let mut error = marked(pending("a", 1));
    error.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].reason =
        Some("SchedulerError".into());
    assert!(!is_marked_unschedulable(&error));
    // A mark on a pod bound later does not count against the run.
    let t0 = Instant::now();
    let mut p = Progress::new(nodes(), 1, t0);
    p.observe(0, &marked(pending("a", 1)), t0);
    p.observe(0, &bound(marked(pending("a", 1)), &node(0)), t0);
    assert_eq!(p.verdict(&rule(true), t0), Some(RunEnd::AllBound));
}
