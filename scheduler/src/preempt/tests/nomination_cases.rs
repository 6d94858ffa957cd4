//! Nominations: the gate between preemption rounds, the room held, the notes.

use super::*;

#[test]
fn a_nomination_waits_for_its_victims_then_for_the_topology() {
    let t0 = Instant::now();
    let max = Duration::from_secs(120);
    let mut n = Nomination {
        node: "n1".into(),
        usage: crate::filter::PodUsage::default(),
        victims: vec!["uid-a".into()],
        since: t0,
        victims_gone_at: None,
    };
    let present = |uid: &str| uid == "uid-a";
    let gone = |_: &str| false;
    let t1 = t0 + Duration::from_secs(1);
    assert!(
        matches!(n.gate(present, None, t1, max), Gate::Wait(m) if m.contains("1 preempted pod(s) to leave node n1"))
    );
    // Gone; the NRT changed before they left (it still showed them): wait.
    let t2 = t0 + Duration::from_secs(2);
    assert!(
        matches!(n.gate(gone, Some(t1), t2, max), Gate::Wait(m) if m.contains("NodeResourceTopology of node n1"))
    );
    assert_eq!(n.victims_gone_at, Some(t2));
    // The NRT changed after: a new round may start if the pod still does not fit.
    let t3 = t0 + Duration::from_secs(3);
    assert_eq!(n.gate(gone, Some(t3), t3, max), Gate::Open);
    // Whatever happens, an old nomination no longer blocks.
    let mut stuck = n.clone();
    stuck.victims_gone_at = None;
    assert_eq!(stuck.gate(present, None, t0 + max, max), Gate::Open);
}

#[test]
fn nominations_hold_room_for_lower_or_equal_priorities_only() {
    let mut all = Nominations::default();
    let usage = |p: &Pod| crate::filter::PodUsage::from_pod(p).unwrap();
    for (uid, prio) in [("hi", 100), ("lo", 1)] {
        all.insert(
            uid,
            Nomination {
                node: "n1".into(),
                usage: usage(&gpod(uid, 2, prio)),
                victims: Vec::new(),
                since: Instant::now(),
                victims_gone_at: None,
            },
        );
    }
    let held = |uid: &str, prio: i32| -> Vec<String> {
        let mut v: Vec<String> = all
            .holding(uid, prio)
            .get("n1")
            .map(|p| p.iter().map(|(u, _)| (*u).to_owned()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    assert_eq!(held("x", 50), ["hi"]);
    assert_eq!(held("x", 1), ["hi", "lo"]);
    assert_eq!(held("hi", 1), ["lo"], "a pod never yields to itself");
    assert!(held("x", 101).is_empty());
    assert!(all.contains("lo"));
    all.remove("lo");
    assert!(!all.contains("lo"));
}

#[test]
fn outcome_notes() {
    assert_eq!(Outcome::Skipped.note(), None);
    assert!(
        Outcome::NotHelpful
            .note()
            .unwrap()
            .contains("no node has lower-priority pods")
    );
    assert_eq!(
        Outcome::Waiting("waiting for x".into()).note().as_deref(),
        Some("Preemption: waiting for x.")
    );
}

#[test]
fn no_victim_search_runs_when_no_lower_priority_pod_exists_where_the_pod_may_go() {
    use k8s_openapi::api::core::v1::Node;
    let shared = crate::test_support::shared();
    let node = |name: &str, pool: &str| -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"pool": pool}},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
        }))
        .expect("node")
    };
    let on = |mut p: Pod, node: &str| {
        p.spec.as_mut().expect("spec").node_name = Some(node.to_owned());
        p
    };
    {
        let mut state = shared.state.write();
        state.upsert_node(&node("main-1", "main"));
        state.upsert_node(&node("other-1", "other"));
        // Only equal priority where the preemptor may go; lower priority elsewhere.
        state.upsert_bound_pod(&on(gpod("peer", 8, 100), "main-1"));
        state.upsert_bound_pod(&on(gpod("low-elsewhere", 8, 0), "other-1"));
    }
    let mut preemptor = gpod("urgent", 12, 100);
    preemptor.spec.as_mut().expect("spec").node_selector =
        Some([("pool".to_owned(), "main".to_owned())].into());
    let outcome = attempt(&shared, &input(&preemptor), &settings());
    assert!(matches!(outcome, Outcome::NotHelpful), "{outcome:?}");
    assert_eq!(shared.metrics.preemption_searches.get(), 0, "skipped");

    // A lower-priority pod where it may go: the search runs.
    shared
        .state
        .write()
        .upsert_bound_pod(&on(gpod("low", 4, 0), "main-1"));
    attempt(&shared, &input(&preemptor), &settings());
    assert_eq!(shared.metrics.preemption_searches.get(), 1);
}
