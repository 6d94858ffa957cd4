use std::time::{Duration, UNIX_EPOCH};

use super::*;

/// An answer of `/debug/decisions?namespace=ns&pod=p`, newest first: the bind to n1
/// (zone 1), an earlier failed bind to n0.
const DECISIONS: &str = r#"{
  "schedulerName": "tas", "leader": true, "capacity": 512, "recorded": 3,
  "decisions": [
    {"id": 3, "time": "2026-11-29T10:00:02Z", "namespace": "ns", "pod": "p", "uid": "u",
     "outcome": "bound", "node": "n1", "zones": [1], "phases": [], "nodesEvaluated": 9,
     "feasibleNodes": 3},
    {"id": 2, "time": "2026-11-29T10:00:01Z", "namespace": "ns", "pod": "p", "uid": "u",
     "outcome": "bindFailed", "node": "n0", "zones": [0], "phases": [],
     "nodesEvaluated": 9, "feasibleNodes": 4}
  ]
}"#;

#[test]
fn the_zones_of_the_attempt_that_bound_the_pod_to_its_node() {
    assert_eq!(
        zones_in_decisions(DECISIONS, "n1"),
        SchedulerZones::Chosen {
            zones: vec![1],
            time: Some("2026-11-29T10:00:02Z".into())
        }
    );
    // A failed bind is not the placement the kubelet judged.
    assert_eq!(
        zones_in_decisions(DECISIONS, "n0"),
        SchedulerZones::NotInRing
    );
    let empty = r#"{"schedulerName": "tas", "leader": true, "capacity": 512,
        "recorded": 9000, "decisions": []}"#;
    assert_eq!(zones_in_decisions(empty, "n1"), SchedulerZones::NotInRing);
    assert!(matches!(
        zones_in_decisions("<html>", "n1"),
        SchedulerZones::Unreachable(why) if why.contains("not JSON")
    ));
    assert!(matches!(
        zones_in_decisions("{}", "n1"),
        SchedulerZones::Unreachable(why) if why.contains("decisions")
    ));
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// The NRT of a 2-zone node of 4 CPUs and 8 GiB per zone as the bench agent writes
/// it, with `used` CPUs taken from zone 0 by a pod the referee admitted.
fn published(secs: u64, used: u32) -> PublishedNrt {
    let gib = (8u64 << 30).to_string();
    let zone = |cpus: u32| {
        vec![
            ("cpu".to_owned(), cpus.to_string()),
            ("memory".to_owned(), gib.clone()),
        ]
    };
    PublishedNrt {
        at: at(secs),
        zones: vec![
            ("node-0".into(), zone(4 - used)),
            ("node-1".into(), zone(4)),
        ],
    }
}

fn rejection() -> Rejection {
    Rejection {
        namespace: "ns".into(),
        pod: "p".into(),
        node: "n1".into(),
        reason: "TopologyAffinityError".into(),
        message: "Resources cannot be allocated with Topology locality".into(),
        bound_at: at(1_795_946_403),
        admitted_before: vec![
            ("a".into(), BTreeSet::from([0])),
            ("b".into(), BTreeSet::new()),
        ],
        scheduler: SchedulerZones::Chosen {
            zones: vec![1],
            time: Some("2026-11-29T10:00:02Z".into()),
        },
        last_nrt: None,
    }
}

/// The NRT a rejection shows is the last one written before the scheduler decided,
/// not one written between the decision and the bind; without a decision time, the
/// last before the bind.
#[test]
fn the_nrt_shown_is_the_last_written_before_the_decision() {
    // 2026-11-29T10:00:02Z is 1_795_946_402.
    let history = Published::from([(
        "n1".to_owned(),
        vec![
            published(1_795_946_400, 1),
            published(1_795_946_401, 2),
            published(1_795_946_402, 3),
            published(1_795_946_403, 4),
        ],
    )]);
    let mut r = rejection();
    r.attach_nrt(&history);
    assert_eq!(r.last_nrt.as_ref().map(|p| p.at), Some(at(1_795_946_402)));

    r.scheduler = SchedulerZones::NotInRing;
    r.attach_nrt(&history);
    assert_eq!(r.last_nrt.as_ref().map(|p| p.at), Some(at(1_795_946_403)));

    let mut early = rejection();
    early.bound_at = at(1_795_946_000);
    early.scheduler = SchedulerZones::NotAsked;
    early.attach_nrt(&history);
    assert_eq!(early.last_nrt, None, "nothing written before the bind");
}

/// One line says everything needed to diagnose the rejection: pod, node, reason and
/// message, TAS's zones, the pods admitted before it with their zones, and the NRT.
#[test]
fn a_rejection_renders_with_everything_needed_to_diagnose_it() {
    let history = Published::from([("n1".to_owned(), vec![published(1_795_946_401, 3)])]);
    let mut r = rejection();
    r.attach_nrt(&history);
    let line = render_one(SchedulerKind::Tas, 2, &r);
    for part in [
        "tas run 2: `ns/p` on `n1`: **TopologyAffinityError** (Resources cannot be allocated",
        "TAS chose: zone(s) 1 (decided 2026-11-29T10:00:02Z)",
        "Admitted on the node before it: `a` (zone 0), `b` (no exclusive CPUs)",
        "NRT before the decision: node-0: cpu 1, memory 8.0 GiB; node-1: cpu 4, memory 8.0 GiB (written 2000 ms before the bind)",
    ] {
        assert!(line.contains(part), "{part:?} not in {line}");
    }
    r.scheduler = SchedulerZones::NotInRing;
    r.last_nrt = None;
    let line = render_one(SchedulerKind::Tas, 1, &r);
    assert!(line.contains("no longer in its ring"), "{line}");
    assert!(line.contains("the reset one (every zone free"), "{line}");
}

/// The report lists every rejection of a real scheduler and only counts the ceiling's.
#[test]
fn the_list_leaves_the_ceiling_out_and_is_empty_without_rejections() {
    let r = rejection();
    let listed = render([
        (SchedulerKind::Tas, 1, std::slice::from_ref(&r)),
        (SchedulerKind::Tas, 2, &[][..]),
        (SchedulerKind::BindOnly, 1, &[r.clone(), r.clone()][..]),
    ]);
    assert_eq!(
        listed.matches("\n- ").count() + usize::from(listed.starts_with("- ")),
        1,
        "{listed}"
    );
    assert!(listed.contains("tas run 1: `ns/p` on `n1`"), "{listed}");
    assert!(
        listed.contains("2 rejections of the bind-only ceiling not listed"),
        "{listed}"
    );
    assert_eq!(render([(SchedulerKind::Tas, 1, &[][..])]), "");
}
