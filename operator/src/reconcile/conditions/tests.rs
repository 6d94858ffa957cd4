use super::*;
use k8s_openapi::jiff::Timestamp;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn workload(name: &str, desired: i32, ready: i32) -> Workload {
    Workload {
        name: name.to_owned(),
        exists: true,
        desired,
        ready,
        updated: desired,
        available: ready,
        current: desired,
        observed: true,
    }
}

fn healthy() -> Facts {
    Facts {
        paused: false,
        daemon_sets: vec![workload("tas-updater-a", 3, 3)],
        scheduler: workload("tas-scheduler", 1, 1),
        problem: None,
        stale_nodes: vec![],
        desired_nodes: 3,
        stale_topology: vec![],
        missed_heartbeats: 3,
        agent_problems: vec![],
        scheduler_serving_secret: None,
    }
}

#[test]
fn an_unready_scheduler_with_a_secret_certificate_names_the_secret_to_check() {
    let mut f = healthy();
    f.scheduler.ready = 0;
    f.scheduler_serving_secret = Some(("tas".into(), "tas-scheduler-metrics-tls".into()));
    let a = find_decided(decide(&f), AVAILABLE);
    assert_eq!((a.status, a.reason.as_str()), (false, SCHEDULER_NOT_READY));
    assert!(
        a.message.starts_with("scheduler Deployment tas-scheduler 0/1 replicas ready; it mounts the serving certificate Secret tas/tas-scheduler-metrics-tls"),
        "{}",
        a.message
    );
    f.scheduler_serving_secret = None;
    let a = find_decided(decide(&f), AVAILABLE);
    assert_eq!(
        a.message,
        "scheduler Deployment tas-scheduler 0/1 replicas ready"
    );
}

fn find<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
    conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn a_healthy_stack_is_available_not_progressing_not_degraded() {
    let d = decide(&healthy());
    assert_eq!(
        d.iter()
            .map(|c| (c.type_, c.status, c.reason.as_str()))
            .collect::<Vec<_>>(),
        [
            (AVAILABLE, true, AS_EXPECTED),
            (PROGRESSING, false, AS_EXPECTED),
            (DEGRADED, false, AS_EXPECTED),
            (READY, true, AS_EXPECTED),
        ]
    );
}

#[test]
fn ready_is_false_with_the_reason_of_the_first_condition_that_fails() {
    let mut f = healthy();
    f.daemon_sets[0].ready = 1;
    let r = find_decided(decide(&f), READY);
    assert_eq!((r.status, r.reason.as_str()), (false, UPDATER_NOT_READY));
    assert!(
        r.message
            .starts_with("Available=False: node agents not ready"),
        "{}",
        r.message
    );

    let mut f = healthy();
    f.scheduler.updated = 0;
    let r = find_decided(decide(&f), READY);
    assert_eq!((r.status, r.reason.as_str()), (false, ROLLING));
    assert!(
        r.message.starts_with("Progressing=True: rolling out"),
        "{}",
        r.message
    );

    let mut f = healthy();
    f.stale_topology = vec![("n1".into(), std::time::Duration::from_secs(600))];
    let r = find_decided(decide(&f), READY);
    assert_eq!((r.status, r.reason.as_str()), (false, STALE_TOPOLOGY));

    // Paused is settled, not unready.
    let mut f = healthy();
    f.paused = true;
    assert!(find_decided(decide(&f), READY).status);
}

fn find_decided(decided: Vec<Decided>, type_: &str) -> Decided {
    decided.into_iter().find(|d| d.type_ == type_).unwrap()
}

#[test]
fn agents_not_ready_make_it_unavailable_with_counts() {
    let mut f = healthy();
    f.daemon_sets[0].ready = 1;
    let a = available(&f);
    assert!(!a.status);
    assert_eq!(a.reason, UPDATER_NOT_READY);
    assert!(
        a.message.contains("tas-updater-a 1/3 ready"),
        "{}",
        a.message
    );

    f.agent_problems = vec![(
        "n2".into(),
        "container updater waiting, ErrImageNeverPull".into(),
    )];
    assert!(
        available(&f).message.ends_with(
            "tas-updater-a 1/3 ready; on node n2: container updater waiting, ErrImageNeverPull"
        ),
        "{}",
        available(&f).message
    );

    // The agent's own report counts while its DaemonSet still counts it ready (a
    // stopped kubelet updates no readiness).
    let mut g = healthy();
    g.agent_problems = vec![("n1".into(), "the agent reports: socket missing".into())];
    let a = available(&g);
    assert_eq!((a.status, a.reason.as_str()), (false, UPDATER_NOT_READY));
    assert_eq!(
        a.message,
        "node agents not ready: on node n1: the agent reports: socket missing"
    );

    f.daemon_sets[0].exists = false;
    assert!(available(&f).message.contains("tas-updater-a not created"));
}

#[test]
fn a_group_without_nodes_does_not_block_availability() {
    let mut f = healthy();
    f.daemon_sets.push(workload("tas-updater-empty", 0, 0));
    assert!(available(&f).status);
}

#[test]
fn node_groups_selecting_no_node_make_it_unavailable_and_say_so() {
    let mut f = healthy();
    f.daemon_sets[0] = workload("tas-updater-a", 0, 0);
    f.desired_nodes = 0;
    let a = available(&f);
    assert!(!a.status);
    assert_eq!(a.reason, NO_NODES_SELECTED);
    assert!(a.message.contains("select no node"), "{}", a.message);
}

#[test]
fn no_ready_scheduler_replica_makes_it_unavailable() {
    let mut f = healthy();
    f.scheduler.ready = 0;
    let a = available(&f);
    assert_eq!((a.status, a.reason.as_str()), (false, SCHEDULER_NOT_READY));
    assert!(a.message.contains("0/1 replicas ready"), "{}", a.message);
    // One of two is enough to schedule.
    f.scheduler = workload("tas-scheduler", 2, 1);
    assert!(available(&f).status);
}

#[test]
fn rollouts_are_progressing_and_paused_wins() {
    let mut f = healthy();
    f.daemon_sets[0].updated = 1;
    let p = progressing(&f);
    assert_eq!((p.status, p.reason.as_str()), (true, ROLLING));
    assert!(
        p.message.contains("tas-updater-a 1/3 updated"),
        "{}",
        p.message
    );

    let mut stale_generation = healthy();
    stale_generation.scheduler.observed = false;
    assert!(progressing(&stale_generation).status);

    let mut old_pods_left = healthy();
    old_pods_left.scheduler.current = 2;
    assert!(progressing(&old_pods_left).status);

    f.paused = true;
    let p = progressing(&f);
    assert_eq!((p.status, p.reason.as_str()), (false, PAUSED));
    assert!(p.message.contains("spec.paused"), "{}", p.message);
}

#[test]
fn a_problem_is_degraded_stale_nodes_are_only_mentioned() {
    let mut f = healthy();
    f.stale_nodes = (0..7).map(|i| format!("n{i}")).collect();
    f.desired_nodes = 9;
    let d = degraded(&f);
    assert!(!d.status);
    assert!(
        d.message.starts_with(
            "7 of 9 node(s) have no fresh NodeResourceTopology yet (n0, n1, n2, n3, n4 and 2 more)"
        ),
        "{}",
        d.message
    );

    f.problem = Some(Problem {
        reason: "NodeGroupsOverlap".into(),
        message: "n1 is in two groups".into(),
    });
    let d = degraded(&f);
    assert_eq!(
        (d.status, d.reason.as_str(), d.message.as_str()),
        (true, "NodeGroupsOverlap", "n1 is in two groups")
    );
}

#[test]
fn last_transition_time_moves_only_when_the_status_flips() {
    let first = merge(&[], decide(&healthy()), Some(1), &at(100));
    assert!(first.iter().all(|c| c.last_transition_time == at(100)));
    assert!(first.iter().all(|c| c.observed_generation == Some(1)));

    // Same statuses, new reason/message/generation: times stay.
    let mut rolling = healthy();
    rolling.daemon_sets[0].ready = 2;
    rolling.daemon_sets[0].updated = 2;
    let second = merge(&first, decide(&rolling), Some(2), &at(200));
    let avail = find(&second, AVAILABLE);
    assert_eq!(
        (avail.status.as_str(), &avail.last_transition_time),
        ("False", &at(200)),
        "Available flipped"
    );
    let prog = find(&second, PROGRESSING);
    assert_eq!(
        (prog.status.as_str(), &prog.last_transition_time),
        ("True", &at(200))
    );
    let deg = find(&second, DEGRADED);
    assert_eq!(deg.last_transition_time, at(100), "Degraded stayed False");
    assert_eq!(deg.observed_generation, Some(2));

    // A reason change without a status change keeps the time.
    let mut paused = rolling.clone();
    paused.paused = true;
    let third = merge(&second, decide(&paused), Some(3), &at(300));
    let prog = find(&third, PROGRESSING);
    assert_eq!(
        (prog.reason.as_str(), &prog.last_transition_time),
        (PAUSED, &at(300)),
        "True → False is a flip"
    );
    assert_eq!(find(&third, AVAILABLE).last_transition_time, at(200));

    let fourth = merge(&third, decide(&paused), Some(3), &at(400));
    assert_eq!(fourth, third, "nothing changed: identical conditions");
}

#[test]
fn changes_report_status_or_reason_changes_only() {
    let before = merge(&[], decide(&healthy()), Some(1), &at(1));
    let mut f = healthy();
    f.daemon_sets[0].ready = 2; // Available flips; Progressing stays False/AsExpected
    let after = merge(&before, decide(&f), Some(1), &at(2));
    let changed: Vec<&str> = changes(&before, &after)
        .iter()
        .map(|c| c.after.type_.as_str())
        .collect();
    assert_eq!(changed, [AVAILABLE]);
    assert_eq!(
        changes(&[], &after).len(),
        3,
        "every new condition counts, but Ready, which sums them up"
    );
    assert!(changes(&after, &after).is_empty());
}

#[test]
fn names_are_capped() {
    let names: Vec<String> = (0..3).map(|i| format!("n{i}")).collect();
    assert_eq!(name_some(&names, 5), "n0, n1, n2");
    assert_eq!(name_some(&names, 2), "n0, n1 and 1 more");
}

#[test]
fn stale_topology_is_degraded_naming_the_nodes() {
    let mut f = healthy();
    f.stale_nodes = vec!["n1".into(), "n2".into()];
    f.stale_topology = vec![("n1".into(), std::time::Duration::from_secs(3900))];
    let d = degraded(&f);
    assert!(d.status);
    assert_eq!(d.reason, STALE_TOPOLOGY);
    assert!(d.message.contains("n1 (1h5m ago)"), "{}", d.message);
    assert!(d.message.contains("3 heartbeat periods"), "{}", d.message);
    assert!(
        !d.message.contains("n2"),
        "a node without an object is not stale"
    );
    // A reconcile problem still comes first.
    f.problem = Some(Problem {
        reason: "ApplyFailed".into(),
        message: "x".into(),
    });
    assert_eq!(degraded(&f).reason, "ApplyFailed");
}
