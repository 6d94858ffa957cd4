//! Table tests of `PodTopologySpread`, mirroring kube-scheduler's documented behaviour.
//!
//! The cluster: `n1`, `n2` in zone `a`, `n3` in zone `b`, `n4` in zone `c` (labelled
//! `pool: other`, the rest `pool: main`), `n5` without a zone label.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::filter::NodeInfo;
use crate::test_support::{input, node, node_with, place, pod, pod_in};

const ZONE: &str = "topology.kubernetes.io/zone";

fn cluster(n4_spec: Value) -> Vec<NodeInfo> {
    vec![
        node("n1", &[(ZONE, "a"), ("pool", "main")]),
        node("n2", &[(ZONE, "a"), ("pool", "main")]),
        node("n3", &[(ZONE, "b"), ("pool", "main")]),
        node_with("n4", &[(ZONE, "c"), ("pool", "other")], n4_spec),
        node("n5", &[("pool", "main")]),
    ]
}

fn constraint(extra: Value) -> Value {
    let mut c = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}}});
    if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    c
}

fn incoming(labels: &[(&str, &str)], constraint: Value, extra: Value) -> Pod {
    let mut spec = json!({"topologySpreadConstraints": [constraint]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    pod("new", labels, spec)
}

fn web(name: &str) -> Pod {
    pod(name, &[("app", "web")], json!({}))
}

fn run(mut nodes: Vec<NodeInfo>, placed: &[(usize, Pod)], incoming: &Pod) -> Vec<&'static str> {
    for (i, p) in placed {
        place(&mut nodes[*i], p);
    }
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let input = input(incoming);
    let f = SpreadFilter::prepare(&input.filter, &refs);
    refs.iter()
        .map(|n| match f.check(n) {
            Ok(()) => "ok",
            Err(SpreadReason::Skew) => "skew",
            Err(SpreadReason::MissingLabel) => "label",
        })
        .collect()
}

#[test]
fn max_skew_against_the_global_minimum() {
    // a: 2, b: 1, c: 1 → minimum 1.
    let placed = vec![
        (0, web("w1")),
        (1, web("w2")),
        (2, web("w3")),
        (3, web("w4")),
    ];
    let me = [("app", "web")];
    let cases = [
        (
            "self-matching pod: a would reach 3, 2 above the minimum",
            incoming(&me, constraint(json!({})), json!({})),
            ["skew", "skew", "ok", "ok", "label"],
        ),
        (
            "a pod outside its own selector adds nothing",
            incoming(&[], constraint(json!({})), json!({})),
            ["ok", "ok", "ok", "ok", "label"],
        ),
        (
            "maxSkew 2",
            incoming(&me, constraint(json!({"maxSkew": 2})), json!({})),
            ["ok", "ok", "ok", "ok", "label"],
        ),
        (
            "minDomains above the domain count: the minimum is 0",
            incoming(
                &me,
                constraint(json!({"minDomains": 4, "maxSkew": 2})),
                json!({}),
            ),
            ["skew", "skew", "ok", "ok", "label"],
        ),
        (
            "minDomains met: the real minimum",
            incoming(
                &me,
                constraint(json!({"minDomains": 3, "maxSkew": 2})),
                json!({}),
            ),
            ["ok", "ok", "ok", "ok", "label"],
        ),
        (
            "ScheduleAnyway never filters",
            incoming(
                &me,
                constraint(json!({"whenUnsatisfiable": "ScheduleAnyway"})),
                json!({}),
            ),
            ["ok", "ok", "ok", "ok", "ok"],
        ),
    ];
    for (name, pod, want) in cases {
        assert_eq!(run(cluster(json!({})), &placed, &pod), want, "{name}");
    }
}

#[test]
fn node_inclusion_policies() {
    // a: 1, b: 1, c (n4): 0.
    let placed = vec![(0, web("w1")), (2, web("w2"))];
    let me = [("app", "web")];
    let main_only = json!({"nodeSelector": {"pool": "main"}});
    let cases = [
        (
            "nodeAffinityPolicy Honor (default): c is not a domain of this pod, minimum 1",
            incoming(&me, constraint(json!({})), main_only.clone()),
            cluster(json!({})),
            ["ok", "ok", "ok", "ok", "label"],
        ),
        (
            "nodeAffinityPolicy Ignore: c counts with 0",
            incoming(
                &me,
                constraint(json!({"nodeAffinityPolicy": "Ignore"})),
                main_only,
            ),
            cluster(json!({})),
            ["skew", "skew", "skew", "ok", "label"],
        ),
        (
            "nodeTaintsPolicy Ignore (default): the tainted c counts with 0",
            incoming(&me, constraint(json!({})), json!({})),
            cluster(
                json!({"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}),
            ),
            ["skew", "skew", "skew", "ok", "label"],
        ),
        (
            "nodeTaintsPolicy Honor: an untolerated taint takes c out",
            incoming(
                &me,
                constraint(json!({"nodeTaintsPolicy": "Honor"})),
                json!({}),
            ),
            cluster(
                json!({"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}),
            ),
            ["ok", "ok", "ok", "ok", "label"],
        ),
        (
            "nodeTaintsPolicy Honor with a toleration: c is back",
            incoming(
                &me,
                constraint(json!({"nodeTaintsPolicy": "Honor"})),
                json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
            ),
            cluster(
                json!({"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}),
            ),
            ["skew", "skew", "skew", "ok", "label"],
        ),
    ];
    for (name, pod, nodes, want) in cases {
        assert_eq!(run(nodes, &placed, &pod), want, "{name}");
    }
}

#[test]
fn which_pods_count() {
    let me = [("app", "web"), ("rev", "2")];
    let terminating: Pod = {
        let mut p = web("gone");
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        p
    };
    // Zone a holds only pods that must not count; b and c one each.
    let placed = vec![
        (0, terminating),
        (1, pod_in("other", "w-other", &[("app", "web")], json!({}))),
        (0, pod("old", &[("app", "web"), ("rev", "1")], json!({}))),
        (2, pod("b", &[("app", "web"), ("rev", "2")], json!({}))),
        (3, pod("c", &[("app", "web"), ("rev", "2")], json!({}))),
    ];
    // With matchLabelKeys [rev], the rev-1 pod in a does not count: a 0, b 1, c 1.
    let keyed = incoming(
        &me,
        constraint(json!({"matchLabelKeys": ["rev"]})),
        json!({}),
    );
    assert_eq!(
        run(cluster(json!({})), &placed, &keyed),
        ["ok", "ok", "skew", "skew", "label"]
    );
    // Without, a counts 1 (the rev-1 pod): every zone at 1.
    let plain = incoming(&me, constraint(json!({})), json!({}));
    assert_eq!(
        run(cluster(json!({})), &placed, &plain),
        ["ok", "ok", "ok", "ok", "label"]
    );
}

#[test]
fn removing_a_victim_lowers_its_domain() {
    let mut nodes = cluster(json!({}));
    for (i, name) in [(0, "w1"), (1, "w2"), (2, "w3"), (3, "w4")] {
        place(&mut nodes[i], &web(name));
    }
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let input = input(&incoming(
        &[("app", "web")],
        constraint(json!({})),
        json!({}),
    ));
    let mut f = SpreadFilter::prepare(&input.filter, &refs);
    assert_eq!(f.check(refs[0]), Err(SpreadReason::Skew));
    let victim = refs[0].pod("uid-w1").unwrap().meta.clone();
    f.remove(&victim, refs[0]);
    assert_eq!(f.check(refs[0]), Ok(()));
}

#[test]
fn schedule_anyway_prefers_emptier_domains() {
    let mut nodes = cluster(json!({}));
    for (i, name) in [(0, "w1"), (1, "w2"), (2, "w3")] {
        place(&mut nodes[i], &web(name));
    }
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let soft = incoming(
        &[("app", "web")],
        constraint(json!({"whenUnsatisfiable": "ScheduleAnyway"})),
        json!({}),
    );
    let input = input(&soft);
    let s = SpreadScore::prepare(&input.filter, &refs, &refs).expect("soft constraint");
    let raw: Vec<Option<i64>> = refs.iter().map(|n| s.raw(n)).collect();
    // a: 2 pods, b: 1, c: 0, three domains (weight ln 5 ≈ 1.61); n5 lacks the key.
    assert_eq!(raw, [Some(3), Some(3), Some(2), Some(0), None]);
    assert_eq!(score::normalize(&raw), [0, 0, 33, 100, 0]);
    assert!(SpreadScore::prepare(&input.filter, &refs, &refs[3..4]).is_some());
    let hard = super::super::test_support::input(&incoming(&[], constraint(json!({})), json!({})));
    assert!(SpreadScore::prepare(&hard.filter, &refs, &refs).is_none());
}
