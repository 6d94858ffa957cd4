//! `NodeUnschedulable` and `TaintToleration`: the toleration matrix, the cordon rule
//! and the `PreferNoSchedule` score.

use serde_json::{Value, json};

use super::super::score::normalize;
use super::super::taint_toleration::{self, NodeTaint, PodToleration};
use super::super::{FilterReason, node_unschedulable};
use super::{info, input, node, pod};

fn taint(key: &str, value: &str, effect: &str) -> Value {
    json!({ "key": key, "value": value, "effect": effect })
}

fn tainted(taints: Vec<Value>) -> super::NodeInfo {
    info(&node("n1", json!({ "spec": { "taints": taints } })))
}

fn tolerating(tolerations: Value) -> super::PodFilterInput {
    input(&pod("p", json!({ "tolerations": tolerations })))
}

#[test]
fn toleration_matrix_follows_kubernetes_matching() {
    // (toleration, taint, tolerated)
    let cases = [
        (
            json!({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}),
            taint("foo", "bar", "NoSchedule"),
            true,
        ),
        (
            json!({"key": "foo", "value": "bar", "effect": "NoSchedule"}),
            taint("foo", "bar", "NoSchedule"),
            true,
        ),
        (
            json!({"key": "foo", "operator": "Equal", "value": "baz", "effect": "NoSchedule"}),
            taint("foo", "bar", "NoSchedule"),
            false,
        ),
        (
            json!({"key": "other", "operator": "Exists"}),
            taint("foo", "bar", "NoSchedule"),
            false,
        ),
        (
            json!({"key": "foo", "operator": "Exists"}),
            taint("foo", "bar", "NoExecute"),
            true,
        ),
        (
            json!({"key": "foo", "operator": "Exists", "effect": "NoExecute"}),
            taint("foo", "bar", "NoSchedule"),
            false,
        ),
        (
            json!({"key": "foo", "operator": "Exists", "effect": ""}),
            taint("foo", "bar", "PreferNoSchedule"),
            true,
        ),
        (
            json!({"operator": "Exists"}),
            taint("anything", "at-all", "NoExecute"),
            true,
        ),
        (
            json!({"operator": "Exists", "effect": "NoSchedule"}),
            taint("anything", "", "NoExecute"),
            false,
        ),
        (
            json!({"key": "foo", "operator": "Equal"}),
            taint("foo", "", "NoSchedule"),
            true,
        ),
        (
            json!({"key": "foo"}),
            taint("foo", "bar", "NoSchedule"),
            false,
        ),
        (
            json!({"key": "foo", "operator": "Gt", "value": "1"}),
            taint("foo", "2", "NoSchedule"),
            false,
        ),
    ];
    for (toleration, taint, want) in cases {
        let t: PodToleration =
            PodToleration::new(&serde_json::from_value(toleration.clone()).unwrap());
        let n = NodeTaint::new(&serde_json::from_value(taint.clone()).unwrap());
        assert_eq!(t.tolerates(&n), want, "{toleration} vs {taint}");
    }
}

#[test]
fn filter_rejects_untolerated_no_schedule_and_no_execute_only() {
    // (node taints, the taint reported to a pod without tolerations)
    let cases = [
        (vec![], None),
        (
            vec![taint("dedicated", "gpu", "NoSchedule")],
            Some(("dedicated", "gpu")),
        ),
        (vec![taint("evict", "", "NoExecute")], Some(("evict", ""))),
        (vec![taint("soft", "x", "PreferNoSchedule")], None),
        // The first untolerated taint in the node's order is the one reported.
        (
            vec![
                taint("a", "1", "PreferNoSchedule"),
                taint("b", "2", "NoSchedule"),
                taint("c", "3", "NoExecute"),
            ],
            Some(("b", "2")),
        ),
        (
            vec![taint("c", "3", "NoExecute"), taint("b", "2", "NoSchedule")],
            Some(("c", "3")),
        ),
    ];
    let intolerant = tolerating(json!([]));
    for (taints, reported) in cases {
        let got = taint_toleration::filter(&intolerant, &tainted(taints.clone()));
        let want = match reported {
            None => Ok(()),
            Some((key, value)) => Err(FilterReason::UntoleratedTaint {
                key: key.to_owned(),
                value: value.to_owned(),
            }),
        };
        assert_eq!(got, want, "{taints:?}");
    }
}

#[test]
fn tolerating_some_taints_reports_the_next_one() {
    let node = tainted(vec![
        taint("b", "2", "NoSchedule"),
        taint("c", "3", "NoExecute"),
    ]);
    let pod = tolerating(json!([{ "key": "b", "operator": "Exists" }]));
    let reason = taint_toleration::filter(&pod, &node).unwrap_err();
    assert_eq!(reason.to_string(), "node(s) had untolerated taint {c: 3}");
    let pod =
        tolerating(json!([{ "key": "b", "operator": "Exists" }, { "key": "c", "value": "3" }]));
    assert_eq!(taint_toleration::filter(&pod, &node), Ok(()));
}

#[test]
fn cordoned_node_needs_the_unschedulable_toleration() {
    let cordoned = info(&node("n1", json!({ "spec": { "unschedulable": true } })));
    let open = info(&node("n1", json!({ "spec": { "unschedulable": false } })));
    let key = node_unschedulable::UNSCHEDULABLE_TAINT_KEY;
    let cases = [
        (json!([]), false),
        (
            json!([{ "key": key, "operator": "Exists", "effect": "NoSchedule" }]),
            true,
        ),
        (json!([{ "key": key, "operator": "Exists" }]), true),
        (
            json!([{ "key": key, "operator": "Equal", "value": "" }]),
            true,
        ),
        (json!([{ "operator": "Exists" }]), true),
        (
            json!([{ "key": key, "operator": "Exists", "effect": "NoExecute" }]),
            false,
        ),
        (
            json!([{ "key": key, "operator": "Equal", "value": "true" }]),
            false,
        ),
    ];
    for (tolerations, fits) in cases {
        let pod = tolerating(tolerations.clone());
        assert_eq!(
            node_unschedulable::filter(&pod, &open),
            Ok(()),
            "{tolerations}"
        );
        let want = if fits {
            Ok(())
        } else {
            Err(FilterReason::Unschedulable)
        };
        assert_eq!(
            node_unschedulable::filter(&pod, &cordoned),
            want,
            "{tolerations}"
        );
    }
}

#[test]
fn score_counts_untolerated_prefer_no_schedule_taints() {
    let nodes = [
        tainted(vec![]),
        tainted(vec![taint("a", "1", "PreferNoSchedule")]),
        tainted(vec![
            taint("a", "1", "PreferNoSchedule"),
            taint("b", "1", "PreferNoSchedule"),
        ]),
        // NoSchedule taints are the filter's business, not the score's.
        tainted(vec![taint("c", "1", "NoSchedule")]),
    ];
    let pod =
        tolerating(json!([{ "key": "b", "operator": "Exists", "effect": "PreferNoSchedule" }]));
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| taint_toleration::score(&pod, n))
        .collect();
    assert_eq!(scores, [0, 1, 1, 0]);
    normalize(&mut scores, true);
    assert_eq!(scores, [100, 0, 0, 100]);

    let untolerant = tolerating(json!([]));
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| taint_toleration::score(&untolerant, n))
        .collect();
    assert_eq!(scores, [0, 1, 2, 0]);
    normalize(&mut scores, true);
    assert_eq!(scores, [100, 50, 0, 100]);
}

#[test]
fn normalize_matches_the_default_normalization() {
    let cases: [(Vec<i64>, bool, Vec<i64>); 5] = [
        (vec![], false, vec![]),
        (vec![0, 0], false, vec![0, 0]),
        (vec![0, 0], true, vec![100, 100]),
        (vec![1, 2, 3], false, vec![33, 66, 100]),
        (vec![1, 2, 3], true, vec![67, 34, 0]),
    ];
    for (mut scores, reverse, want) in cases {
        normalize(&mut scores, reverse);
        assert_eq!(scores, want);
    }
}
