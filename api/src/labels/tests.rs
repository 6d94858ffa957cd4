//! Selectors as the operator writes them (node groups: parsed strictly) and as the
//! scheduler reads them on other objects (absent or invalid: nothing).

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_owned(),
        operator: op.to_owned(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
    }
}

fn selector(match_labels: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> Selector {
    Selector::parse(&LabelSelector {
        match_labels: (!match_labels.is_empty()).then(|| labels(match_labels)),
        match_expressions: (!exprs.is_empty()).then_some(exprs),
    })
    .unwrap()
}

fn lenient(v: serde_json::Value) -> Selector {
    let s: LabelSelector = serde_json::from_value(v).unwrap();
    Selector::parse_or_nothing(Some(&s))
}

#[test]
fn empty_selector_matches_everything() {
    let s = selector(&[], vec![]);
    assert!(s.is_everything());
    assert!(s.matches(&labels(&[])));
    assert!(s.matches(&labels(&[("a", "b")])));
    assert!(Selector::everything().matches(&BTreeMap::new()));
}

#[test]
fn match_labels_need_key_and_value() {
    let s = selector(&[("role", "numa"), ("zone", "a")], vec![]);
    assert!(s.matches(&labels(&[("role", "numa"), ("zone", "a"), ("x", "y")])));
    assert!(
        !s.matches(&labels(&[("role", "numa")])),
        "all entries ANDed"
    );
    assert!(!s.matches(&labels(&[("role", "numa"), ("zone", "b")])));
    // An empty value is a value: `role: ""` matches only a present, empty label.
    let empty = selector(&[("example.com/flag", "")], vec![]);
    assert!(empty.matches(&labels(&[("example.com/flag", "")])));
    assert!(!empty.matches(&labels(&[])));
}

/// One row per operator: (expression, labels, expected).
#[test]
fn operators() {
    let cases = [
        (expr("k", "In", &["a", "b"]), vec![("k", "a")], true),
        (expr("k", "In", &["a", "b"]), vec![("k", "c")], false),
        (expr("k", "In", &["a"]), vec![], false),
        (expr("k", "NotIn", &["a"]), vec![("k", "b")], true),
        (expr("k", "NotIn", &["a"]), vec![("k", "a")], false),
        (expr("k", "NotIn", &["a"]), vec![], true),
        (expr("k", "Exists", &[]), vec![("k", "")], true),
        (expr("k", "Exists", &[]), vec![("j", "x")], false),
        (expr("k", "DoesNotExist", &[]), vec![], true),
        (expr("k", "DoesNotExist", &[]), vec![("k", "x")], false),
    ];
    for (e, l, want) in cases {
        let s = selector(&[], vec![e.clone()]);
        assert_eq!(s.matches(&labels(&l)), want, "{e:?} on {l:?}");
    }
}

#[test]
fn labels_and_expressions_are_anded() {
    let s = selector(
        &[("pool", "numa")],
        vec![expr("gpu", "DoesNotExist", &[]), expr("zone", "In", &["a"])],
    );
    assert!(s.matches(&labels(&[("pool", "numa"), ("zone", "a")])));
    assert!(!s.matches(&labels(&[("pool", "numa"), ("zone", "a"), ("gpu", "1")])));
    assert!(!s.matches(&labels(&[("pool", "numa")])));
}

#[test]
fn requirements_keep_the_api_order() {
    let s = selector(
        &[("b", "2"), ("a", "1")],
        vec![expr("z", "NotIn", &["y", "x"]), expr("c", "Exists", &[])],
    );
    let got: Vec<(&str, &str, &[String])> = s
        .requirements()
        .iter()
        .map(|r| (r.key.as_str(), r.operator.as_str(), r.operator.values()))
        .collect();
    let (one, two, yx) = (
        ["1".to_owned()],
        ["2".to_owned()],
        ["y".to_owned(), "x".to_owned()],
    );
    assert_eq!(
        got,
        [
            ("a", "In", &one[..]),
            ("b", "In", &two[..]),
            ("z", "NotIn", &yx[..]),
            ("c", "Exists", &[][..]),
        ]
    );
    assert!(Selector::nothing().requirements().is_empty());
}

#[test]
fn invalid_expressions_are_refused() {
    let parse = |e| {
        Selector::parse(&LabelSelector {
            match_expressions: Some(vec![e]),
            ..LabelSelector::default()
        })
    };
    assert!(matches!(
        parse(expr("k", "In", &[])),
        Err(SelectorError::MissingValues { .. })
    ));
    assert!(matches!(
        parse(expr("k", "Exists", &["x"])),
        Err(SelectorError::UnexpectedValues { .. })
    ));
    let err = parse(expr("k", "Gt", &["1"])).unwrap_err();
    assert!(err.to_string().contains("unknown operator 'Gt'"), "{err}");
}

/// Selectors on other objects: (selector, matches web, matches db).
#[test]
fn lenient_table() {
    let web = labels(&[("app", "web"), ("tier", "front")]);
    let db = labels(&[("app", "db")]);
    let cases = [
        (json!({}), true, true),
        (json!({"matchLabels": {"app": "web"}}), true, false),
        (
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}),
            true,
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
            false,
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
            true,
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
            false,
            true,
        ),
        (
            json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}),
            false,
            false,
        ),
        // Unusable: selects nothing.
        (
            json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            false,
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            false,
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            false,
            false,
        ),
    ];
    for (s, on_web, on_db) in cases {
        let parsed = lenient(s.clone());
        assert_eq!(parsed.matches(&web), on_web, "{s} on web");
        assert_eq!(parsed.matches(&db), on_db, "{s} on db");
    }
    assert!(!Selector::parse_or_nothing(None).matches(&web));
}

#[test]
fn match_label_keys_merge_is_idempotent_and_skips_missing_keys() {
    let pod = labels(&[("app", "web"), ("rev", "2")]);
    let mut s = lenient(json!({"matchLabels": {"app": "web"}}));
    s.require_equal(&["rev".into(), "absent".into()], &pod);
    let once = s.clone();
    s.require_equal(&["rev".into()], &pod);
    assert_eq!(s, once, "merging a key twice adds it once");
    assert_eq!(s.requirements().len(), 2);
    assert!(s.matches(&labels(&[("app", "web"), ("rev", "2")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("rev", "1")])));

    let mut m = lenient(json!({}));
    m.require_different(&["rev".into()], &pod);
    assert!(m.matches(&labels(&[("rev", "1")])));
    assert!(m.matches(&labels(&[])));
    assert!(!m.matches(&labels(&[("rev", "2")])));

    // Nothing stays nothing.
    let mut none = Selector::nothing();
    none.require_equal(&["rev".into()], &pod);
    assert_eq!(none, Selector::nothing());
}

proptest! {
    /// `In [v]` and `matchLabels {k: v}` are the same requirement; `NotIn` is its
    /// complement; `Exists` and `DoesNotExist` are complements.
    #[test]
    fn complements(
        node in proptest::collection::btree_map("[a-c]", "[x-z]", 0..4),
        key in "[a-c]",
        value in "[x-z]",
    ) {
        let by_label = selector(&[(&key, &value)], vec![]);
        let by_in = selector(&[], vec![expr(&key, "In", &[&value])]);
        let not_in = selector(&[], vec![expr(&key, "NotIn", &[&value])]);
        prop_assert_eq!(by_label.matches(&node), by_in.matches(&node));
        prop_assert_eq!(by_in.matches(&node), !not_in.matches(&node));
        let exists = selector(&[], vec![expr(&key, "Exists", &[])]);
        let absent = selector(&[], vec![expr(&key, "DoesNotExist", &[])]);
        prop_assert_eq!(exists.matches(&node), !absent.matches(&node));
        prop_assert_eq!(exists.matches(&node), node.contains_key(&key));
    }
}
