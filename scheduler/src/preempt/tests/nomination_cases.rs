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
