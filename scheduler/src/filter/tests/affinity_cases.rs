//! `NodeAffinity`: node selector, required terms with every operator and
//! `matchFields`, and the preferred-terms score.

use serde_json::{Value, json};

use super::super::node_affinity;
use super::super::node_selector::SelectorProblem;
use super::super::score::normalize;
use super::super::{FilterReason, NodeInfo};
use super::{info, input, node, pod};

fn labelled(name: &str, labels: Value) -> NodeInfo {
    info(&node(name, json!({ "metadata": { "labels": labels } })))
}

fn expr(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({ "key": key, "operator": operator, "values": values })
}

/// A pod whose required node affinity has these terms.
fn requiring(terms: Value) -> super::PodFilterInput {
    input(&pod(
        "p",
        json!({ "affinity": { "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": terms }
        } } }),
    ))
}

fn fits(pod: &super::PodFilterInput, node: &NodeInfo) -> bool {
    match node_affinity::filter(pod, node) {
        Ok(()) => true,
        Err(reason) => {
            assert_eq!(reason, FilterReason::AffinityMismatch);
            false
        }
    }
}

#[test]
fn node_selector_needs_every_label_with_its_value() {
    let node = labelled("n1", json!({ "zone": "a", "disk": "ssd", "empty": "" }));
    let cases = [
        (json!({}), true),
        (json!({ "zone": "a" }), true),
        (json!({ "zone": "a", "disk": "ssd" }), true),
        (json!({ "empty": "" }), true),
        (json!({ "zone": "b" }), false),
        (json!({ "zone": "a", "gpu": "yes" }), false),
        (json!({ "missing": "" }), false),
    ];
    for (selector, want) in cases {
        let pod = input(&pod("p", json!({ "nodeSelector": selector })));
        assert_eq!(fits(&pod, &node), want, "{selector}");
    }
}

#[test]
fn match_expression_operators() {
    let node = labelled(
        "n1",
        json!({ "zone": "a", "cores": "64", "neg": "-3", "name": "abc" }),
    );
    let cases = [
        (expr("zone", "In", &["a", "b"]), true),
        (expr("zone", "In", &["b"]), false),
        (expr("missing", "In", &["a"]), false),
        (expr("zone", "NotIn", &["b", "c"]), true),
        (expr("zone", "NotIn", &["a"]), false),
        (expr("missing", "NotIn", &["a"]), true),
        (expr("zone", "Exists", &[]), true),
        (expr("missing", "Exists", &[]), false),
        (expr("missing", "DoesNotExist", &[]), true),
        (expr("zone", "DoesNotExist", &[]), false),
        (expr("cores", "Gt", &["32"]), true),
        (expr("cores", "Gt", &["64"]), false),
        (expr("cores", "Lt", &["65"]), true),
        (expr("cores", "Lt", &["64"]), false),
        (expr("neg", "Lt", &["0"]), true),
        (expr("neg", "Gt", &["-4"]), true),
        // Integer comparison, not lexical: "64" > "100" as strings.
        (expr("cores", "Gt", &["100"]), false),
        // A label that is not an integer, or is missing, fails Gt and Lt.
        (expr("name", "Gt", &["1"]), false),
        (expr("missing", "Lt", &["1"]), false),
        // Unusable requirements make the term unusable, so it never matches.
        (expr("cores", "Gt", &["many"]), false),
        (expr("cores", "Gt", &["1", "2"]), false),
        (expr("zone", "In", &[]), false),
        (expr("zone", "Exists", &["a"]), false),
        (expr("zone", "Like", &["a"]), false),
    ];
    for (requirement, want) in cases {
        let pod = requiring(json!([{ "matchExpressions": [requirement] }]));
        assert_eq!(fits(&pod, &node), want, "{requirement}");
    }
}

#[test]
fn terms_are_ored_and_requirements_anded() {
    let node = labelled("n1", json!({ "zone": "a", "disk": "ssd" }));
    let zone_a = expr("zone", "In", &["a"]);
    let zone_b = expr("zone", "In", &["b"]);
    let ssd = expr("disk", "In", &["ssd"]);
    let cases = [
        (json!([{ "matchExpressions": [zone_a, ssd] }]), true),
        (json!([{ "matchExpressions": [zone_b, ssd] }]), false),
        (
            json!([{ "matchExpressions": [zone_b] }, { "matchExpressions": [ssd] }]),
            true,
        ),
        (
            json!([{ "matchExpressions": [zone_b] }, { "matchExpressions": [zone_b] }]),
            false,
        ),
        // No terms, or only empty ones: nothing matches.
        (json!([]), false),
        (json!([{}]), false),
        (
            json!([{ "matchExpressions": [], "matchFields": [] }]),
            false,
        ),
        // An empty or unusable term does not stop another term from matching.
        (json!([{}, { "matchExpressions": [zone_a] }]), true),
        (
            json!([{ "matchExpressions": [expr("x", "Gt", &["y"])] }, { "matchExpressions": [zone_a] }]),
            true,
        ),
    ];
    for (terms, want) in cases {
        assert_eq!(fits(&requiring(terms.clone()), &node), want, "{terms}");
    }
}

#[test]
fn match_fields_select_on_the_node_name() {
    let n1 = labelled("node-1", json!({ "zone": "a" }));
    let n2 = labelled("node-2", json!({ "zone": "a" }));
    let field =
        |op, values: &[&str]| json!([{ "matchFields": [expr("metadata.name", op, values)] }]);
    let cases = [
        (field("In", &["node-1"]), true, false),
        (field("NotIn", &["node-1"]), false, true),
        // Field requirements take exactly one value and only In / NotIn.
        (field("In", &["node-1", "node-2"]), false, false),
        (field("Exists", &[]), false, false),
        // Fields and labels of one term are ANDed.
        (
            json!([{ "matchFields": [expr("metadata.name", "In", &["node-1"])],
                     "matchExpressions": [expr("zone", "In", &["b"])] }]),
            false,
            false,
        ),
        (
            json!([{ "matchFields": [expr("metadata.name", "In", &["node-1"])] },
                   { "matchFields": [expr("metadata.name", "In", &["node-2"])] }]),
            true,
            true,
        ),
    ];
    for (terms, on_n1, on_n2) in cases {
        let pod = requiring(terms.clone());
        assert_eq!(
            (fits(&pod, &n1), fits(&pod, &n2)),
            (on_n1, on_n2),
            "{terms}"
        );
    }
}

#[test]
fn node_selector_and_required_affinity_must_both_hold() {
    let node = labelled("n1", json!({ "zone": "a", "disk": "ssd" }));
    let spec = |selector: Value, zones: &[&str]| {
        input(&pod(
            "p",
            json!({
                "nodeSelector": selector,
                "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{ "matchExpressions": [expr("zone", "In", zones)] }]
                } } }
            }),
        ))
    };
    assert!(fits(&spec(json!({ "disk": "ssd" }), &["a"]), &node));
    assert!(!fits(&spec(json!({ "disk": "hdd" }), &["a"]), &node));
    assert!(!fits(&spec(json!({ "disk": "ssd" }), &["b"]), &node));
    // Affinity without a required part constrains nothing.
    let preferred_only = input(&pod("p", json!({ "affinity": { "nodeAffinity": {} } })));
    assert!(fits(&preferred_only, &node));
}

/// A pod with these `(weight, matchExpressions)` preferred terms.
fn preferring(terms: &[(i32, Value)]) -> super::PodFilterInput {
    let terms: Vec<Value> = terms
        .iter()
        .map(|(weight, exprs)| json!({ "weight": weight, "preference": { "matchExpressions": exprs } }))
        .collect();
    input(&pod(
        "p",
        json!({ "affinity": { "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": terms
        } } }),
    ))
}

#[test]
fn preferred_score_sums_matching_weights() {
    let nodes = [
        labelled("n1", json!({ "zone": "a", "disk": "ssd" })),
        labelled("n2", json!({ "zone": "a" })),
        labelled("n3", json!({})),
    ];
    let preferring_pod = preferring(&[
        (20, json!([expr("zone", "In", &["a"])])),
        (60, json!([expr("disk", "In", &["ssd"])])),
        (0, json!([expr("zone", "Exists", &[])])),
        (50, json!([])),
    ]);
    assert!(preferring_pod.node_affinity().has_preferences());
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| node_affinity::score(&preferring_pod, n).expect("usable terms"))
        .collect();
    assert_eq!(scores, [80, 20, 0]);
    normalize(&mut scores, false);
    assert_eq!(scores, [100, 25, 0]);

    let none = input(&pod("p", json!({})));
    assert!(!none.node_affinity().has_preferences());
    assert_eq!(node_affinity::score(&none, &nodes[0]), Ok(0));
}

#[test]
fn unusable_preferred_term_fails_the_score() {
    let node = labelled("n1", json!({ "cores": "8" }));
    let pod = preferring(&[
        (10, json!([expr("cores", "Exists", &[])])),
        (10, json!([expr("cores", "Gt", &["eight"])])),
    ]);
    assert!(pod.node_affinity().has_preferences());
    let err = node_affinity::score(&pod, &node).unwrap_err();
    assert_eq!((err.term, err.key.as_str()), (1, "cores"));
    assert_eq!(
        err.problem,
        SelectorProblem::NotAnInteger("eight".to_owned())
    );
    // Zero-weight terms are skipped before they are parsed.
    let pod = preferring(&[(0, json!([expr("cores", "Gt", &["eight"])]))]);
    assert_eq!(node_affinity::score(&pod, &node), Ok(0));
    // The filter is unaffected.
    assert!(fits(&pod, &node));
}
