//! Table tests of `InterPodAffinity`, mirroring kube-scheduler's documented behaviour.
//!
//! The cluster: `n1`, `n2` in zone `a`, `n3` in zone `b`, `n4` without a zone label.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::filter::NodeInfo;
use crate::test_support::{node, place, pod, pod_in};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn cluster() -> Vec<NodeInfo> {
    vec![
        node("n1", &[(ZONE, "a")]),
        node("n2", &[(ZONE, "a")]),
        node("n3", &[(ZONE, "b")]),
        node("n4", &[]),
    ]
}

fn term(key: &str, selector: Value) -> Value {
    json!({"labelSelector": selector, "topologyKey": key})
}

fn required(kind: &str, terms: Vec<Value>) -> Value {
    json!({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn preferred(kind: &str, weighted: Vec<(i32, Value)>) -> Value {
    let terms: Vec<Value> = weighted
        .into_iter()
        .map(|(w, t)| json!({"weight": w, "podAffinityTerm": t}))
        .collect();
    json!({"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn app(v: &str) -> Value {
    json!({"matchLabels": {"app": v}})
}

/// A named case: pods placed (node index, pod), the incoming pod, the verdict per node.
type Case = (&'static str, Vec<(usize, Pod)>, Pod, [&'static str; 4]);

/// Places `pods` (node index, pod) and runs the filter on every node.
fn run(placed: &[(usize, Pod)], incoming: &Pod, namespaces: &NamespaceLabels) -> Vec<&'static str> {
    let mut nodes = cluster();
    for (i, p) in placed {
        place(&mut nodes[*i], p);
    }
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let input = crate::test_support::input(incoming);
    let f = AffinityFilter::prepare(input.filter.meta(), &refs, namespaces);
    refs.iter()
        .map(|n| match f.check(n) {
            Ok(()) => "ok",
            Err(AffinityReason::Affinity) => "affinity",
            Err(AffinityReason::AntiAffinity) => "anti",
            Err(AffinityReason::ExistingAntiAffinity) => "existing",
        })
        .collect()
}

#[test]
fn required_affinity() {
    let none = NamespaceLabels::new();
    let web = |n: &str| pod(n, &[("app", "web")], json!({}));
    let wants_web = |key: &str| {
        pod(
            "new",
            &[("app", "api")],
            required("podAffinity", vec![term(key, app("web"))]),
        )
    };
    let cases: Vec<Case> = vec![
        (
            "the zone of a matching pod, not the others; a node without the key never",
            vec![(0, web("w1"))],
            wants_web(ZONE),
            ["ok", "ok", "affinity", "affinity"],
        ),
        (
            "hostname: only the node itself",
            vec![(2, web("w1"))],
            wants_web(HOST),
            ["affinity", "affinity", "ok", "affinity"],
        ),
        (
            "no matching pod and the pod does not match itself: nowhere",
            vec![(0, pod("x", &[("app", "db")], json!({})))],
            wants_web(ZONE),
            ["affinity", "affinity", "affinity", "affinity"],
        ),
        (
            "first of a group that matches itself: any node carrying the key",
            vec![],
            pod(
                "new",
                &[("app", "web")],
                required("podAffinity", vec![term(ZONE, app("web"))]),
            ),
            ["ok", "ok", "ok", "affinity"],
        ),
        (
            "a matching pod in another namespace does not count (term defaults to own)",
            vec![(0, pod_in("other", "w1", &[("app", "web")], json!({})))],
            wants_web(ZONE),
            ["affinity", "affinity", "affinity", "affinity"],
        ),
        (
            "two terms: one pod must match both (kube-scheduler counts such pods only)",
            vec![
                (0, pod("w1", &[("app", "web")], json!({}))),
                (
                    2,
                    pod("w2", &[("app", "web"), ("tier", "front")], json!({})),
                ),
            ],
            pod(
                "new",
                &[],
                required(
                    "podAffinity",
                    vec![
                        term(ZONE, app("web")),
                        term(ZONE, json!({"matchLabels": {"tier": "front"}})),
                    ],
                ),
            ),
            ["affinity", "affinity", "ok", "affinity"],
        ),
    ];
    for (name, placed, incoming, want) in cases {
        assert_eq!(run(&placed, &incoming, &none), want, "{name}");
    }
}

#[test]
fn required_anti_affinity_and_symmetry() {
    let none = NamespaceLabels::new();
    let avoid_web = |key: &str| {
        pod(
            "new",
            &[("app", "api")],
            required("podAntiAffinity", vec![term(key, app("web"))]),
        )
    };
    let cases: Vec<Case> = vec![
        (
            "hostname: one replica per node",
            vec![(0, pod("w1", &[("app", "web")], json!({})))],
            avoid_web(HOST),
            ["anti", "ok", "ok", "ok"],
        ),
        (
            "zone: the whole zone; a node without the key is in no zone",
            vec![(1, pod("w1", &[("app", "web")], json!({})))],
            avoid_web(ZONE),
            ["anti", "anti", "ok", "ok"],
        ),
        (
            "symmetry: a placed pod's anti-affinity keeps the incoming pod out of its zone",
            vec![(
                2,
                pod(
                    "w1",
                    &[("app", "web")],
                    required("podAntiAffinity", vec![term(ZONE, app("api"))]),
                ),
            )],
            pod("new", &[("app", "api")], json!({})),
            ["ok", "ok", "existing", "ok"],
        ),
        (
            "symmetry checked first",
            vec![(
                0,
                pod(
                    "w1",
                    &[("app", "web")],
                    required("podAntiAffinity", vec![term(HOST, app("api"))]),
                ),
            )],
            avoid_web(HOST),
            ["existing", "ok", "ok", "ok"],
        ),
        (
            "a placed pod's anti-affinity that does not select the incoming pod",
            vec![(
                0,
                pod(
                    "w1",
                    &[("app", "web")],
                    required("podAntiAffinity", vec![term(ZONE, app("db"))]),
                ),
            )],
            pod("new", &[("app", "api")], json!({})),
            ["ok", "ok", "ok", "ok"],
        ),
        (
            "matchLabelKeys: only pods of the same revision repel",
            vec![
                (0, pod("old", &[("app", "web"), ("rev", "1")], json!({}))),
                (1, pod("same", &[("app", "web"), ("rev", "2")], json!({}))),
            ],
            pod(
                "new",
                &[("app", "web"), ("rev", "2")],
                json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev"], "topologyKey": HOST}
                ]}}}),
            ),
            ["ok", "anti", "ok", "ok"],
        ),
    ];
    for (name, placed, incoming, want) in cases {
        assert_eq!(run(&placed, &incoming, &none), want, "{name}");
    }
}

#[test]
fn namespaces_and_namespace_selectors() {
    let mut namespaces = NamespaceLabels::new();
    namespaces.insert(
        "team-a".into(),
        BTreeMap::from([("team".into(), "a".into())]),
    );
    namespaces.insert(
        "team-b".into(),
        BTreeMap::from([("team".into(), "b".into())]),
    );
    let placed = vec![
        (0, pod_in("team-a", "w1", &[("app", "web")], json!({}))),
        (2, pod_in("team-b", "w2", &[("app", "web")], json!({}))),
    ];
    let with = |extra: Value| {
        let mut t = term(HOST, app("web"));
        if let (Some(t), Some(e)) = (t.as_object_mut(), extra.as_object()) {
            t.extend(e.clone());
        }
        pod("new", &[], required("podAntiAffinity", vec![t]))
    };
    let cases = [
        (
            "own namespace (default) only",
            json!({}),
            ["ok", "ok", "ok", "ok"],
        ),
        (
            "listed namespaces",
            json!({"namespaces": ["team-b"]}),
            ["ok", "ok", "anti", "ok"],
        ),
        (
            "namespace selector",
            json!({"namespaceSelector": {"matchLabels": {"team": "a"}}}),
            ["anti", "ok", "ok", "ok"],
        ),
        (
            "empty namespace selector: every namespace",
            json!({"namespaceSelector": {}}),
            ["anti", "ok", "anti", "ok"],
        ),
        (
            "list and selector are ORed",
            json!({"namespaces": ["team-b"], "namespaceSelector": {"matchLabels": {"team": "a"}}}),
            ["anti", "ok", "anti", "ok"],
        ),
    ];
    for (name, extra, want) in cases {
        assert_eq!(run(&placed, &with(extra), &namespaces), want, "{name}");
    }
    // An existing pod's namespace selector is matched against the incoming pod's
    // namespace labels.
    let guard = pod_in(
        "team-b",
        "guard",
        &[],
        required(
            "podAntiAffinity",
            vec![
                json!({"labelSelector": {}, "topologyKey": ZONE, "namespaceSelector": {"matchLabels": {"team": "a"}}}),
            ],
        ),
    );
    let from_a = pod_in("team-a", "new", &[], json!({}));
    let from_b = pod_in("team-b", "new", &[], json!({}));
    assert_eq!(
        run(&[(2, guard.clone())], &from_a, &namespaces),
        ["ok", "ok", "existing", "ok"]
    );
    assert_eq!(
        run(&[(2, guard)], &from_b, &namespaces),
        ["ok", "ok", "ok", "ok"]
    );
}

#[test]
fn removing_a_pod_lifts_its_anti_affinity_and_its_partnership() {
    let none = NamespaceLabels::new();
    let mut nodes = cluster();
    let web = pod("w1", &[("app", "web")], json!({}));
    place(&mut nodes[0], &web);
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let avoid = crate::test_support::input(&pod(
        "new",
        &[],
        required("podAntiAffinity", vec![term(HOST, app("web"))]),
    ));
    let mut f = AffinityFilter::prepare(avoid.filter.meta(), &refs, &none);
    assert_eq!(f.check(refs[0]), Err(AffinityReason::AntiAffinity));
    let meta = refs[0].pod("uid-w1").unwrap().meta.clone();
    f.remove(&meta, refs[0].labels());
    assert_eq!(f.check(refs[0]), Ok(()));

    let near = crate::test_support::input(&pod(
        "new",
        &[],
        required("podAffinity", vec![term(ZONE, app("web"))]),
    ));
    let mut f = AffinityFilter::prepare(near.filter.meta(), &refs, &none);
    assert_eq!(f.check(refs[1]), Ok(()));
    f.remove(&meta, refs[0].labels());
    assert_eq!(f.check(refs[1]), Err(AffinityReason::Affinity));
}

fn scores(placed: &[(usize, Pod)], incoming: &Pod) -> Vec<i64> {
    let mut nodes = cluster();
    for (i, p) in placed {
        place(&mut nodes[*i], p);
    }
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let input = crate::test_support::input(incoming);
    let none = NamespaceLabels::new();
    let Some(s) = AffinityScore::prepare(input.filter.meta(), &refs, &none) else {
        return vec![0; refs.len()];
    };
    let mut raw: Vec<i64> = refs.iter().map(|n| s.raw(n)).collect();
    score::normalize(&mut raw);
    raw
}

#[test]
fn preferred_terms_score_by_weight_in_both_directions() {
    let web = pod("w1", &[("app", "web")], json!({}));
    let db = pod("d1", &[("app", "db")], json!({}));
    // Prefer web's zone (weight 10), avoid db's host (weight 5): n1 +10, n2 +10−5, n3 0.
    let incoming = pod(
        "new",
        &[],
        json!({"affinity": {
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term(ZONE, app("web"))}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "podAffinityTerm": term(HOST, app("db"))}]}
        }}),
    );
    // Raw 10, 5, 0, 0 → 100, 50, 0, 0.
    assert_eq!(
        scores(&[(0, web.clone()), (1, db)], &incoming),
        [100, 50, 0, 0]
    );

    // Symmetry: a placed pod that prefers (or requires) the incoming pod nearby.
    let fan = pod(
        "fan",
        &[],
        preferred("podAffinity", vec![(20, term(ZONE, app("api")))]),
    );
    let api = pod("new", &[("app", "api")], json!({}));
    assert_eq!(scores(&[(2, fan)], &api), [0, 0, 100, 0]);
    let needs = pod(
        "needs",
        &[],
        required("podAffinity", vec![term(HOST, app("api"))]),
    );
    assert_eq!(scores(&[(1, needs)], &api), [0, 100, 0, 0]);
    let hater = pod(
        "hater",
        &[],
        preferred("podAntiAffinity", vec![(7, term(ZONE, app("api")))]),
    );
    assert_eq!(scores(&[(0, hater)], &api), [0, 0, 100, 100]);

    // Nothing to score: no preferred term, no placed pod with affinity.
    assert_eq!(scores(&[(0, web)], &api), [0, 0, 0, 0]);
}

#[test]
fn normalize_maps_min_to_0_and_max_to_100() {
    let mut s = [-10, 0, 10];
    score::normalize(&mut s);
    assert_eq!(s, [0, 50, 100]);
    let mut same = [4, 4];
    score::normalize(&mut same);
    assert_eq!(same, [0, 0]);
}
