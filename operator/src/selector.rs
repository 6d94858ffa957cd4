//! Evaluating a Kubernetes `LabelSelector` against a set of labels.
//!
//! The operator needs node-group membership (which nodes each group's selector picks)
//! to report per-group status and to refuse overlapping groups. The API server evaluates
//! the same selectors as DaemonSet node affinity (see `desired/node_affinity.rs`), so the
//! semantics here are those of `metav1.LabelSelector`:
//!
//! - every `matchLabels` entry and every `matchExpressions` requirement must hold (AND);
//! - `In`: the label exists and its value is one of the values;
//! - `NotIn`: the label is missing, or its value is none of the values;
//! - `Exists` / `DoesNotExist`: only the key matters;
//! - an empty selector matches everything.
//!
//! A selector is parsed once ([`Selector::parse`]) and then matched against many label
//! sets; parsing rejects what the API server would reject (unknown operators, `In`
//! without values, `Exists` with values).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::{BTreeMap, BTreeSet};

/// Why a label selector is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `In` / `NotIn` with an empty value list.
    #[error("matchExpressions key '{key}': operator {operator} needs at least one value")]
    MissingValues {
        /// The requirement's key.
        key: String,
        /// `In` or `NotIn`.
        operator: String,
    },
    /// `Exists` / `DoesNotExist` with values.
    #[error("matchExpressions key '{key}': operator {operator} takes no values")]
    UnexpectedValues {
        /// The requirement's key.
        key: String,
        /// `Exists` or `DoesNotExist`.
        operator: String,
    },
    /// Anything but the four label-selector operators.
    #[error(
        "matchExpressions key '{key}': unknown operator '{operator}' (a label selector accepts In, NotIn, Exists, DoesNotExist)"
    )]
    UnknownOperator {
        /// The requirement's key.
        key: String,
        /// The operator as written.
        operator: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Operator {
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match &self.operator {
            Operator::In(values) => value.is_some_and(|v| values.contains(v)),
            Operator::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A parsed label selector: a conjunction of requirements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Parses `selector`, checking each expression's operator and values.
    pub fn parse(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let labels = selector.match_labels.iter().flatten().map(|(key, value)| {
            Ok(Requirement {
                key: key.clone(),
                operator: Operator::In(BTreeSet::from([value.clone()])),
            })
        });
        let expressions = selector.match_expressions.iter().flatten().map(|e| {
            let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
            let operator = match (e.operator.as_str(), values.is_empty()) {
                ("In", false) => Operator::In(values),
                ("NotIn", false) => Operator::NotIn(values),
                ("Exists", true) => Operator::Exists,
                ("DoesNotExist", true) => Operator::DoesNotExist,
                ("In" | "NotIn", true) => {
                    return Err(SelectorError::MissingValues {
                        key: e.key.clone(),
                        operator: e.operator.clone(),
                    });
                }
                ("Exists" | "DoesNotExist", false) => {
                    return Err(SelectorError::UnexpectedValues {
                        key: e.key.clone(),
                        operator: e.operator.clone(),
                    });
                }
                _ => {
                    return Err(SelectorError::UnknownOperator {
                        key: e.key.clone(),
                        operator: e.operator.clone(),
                    });
                }
            };
            Ok(Requirement {
                key: e.key.clone(),
                operator,
            })
        });
        Ok(Self {
            requirements: labels.chain(expressions).collect::<Result<_, _>>()?,
        })
    }

    /// Whether `labels` satisfy every requirement (always true for an empty selector).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use proptest::prelude::*;

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

    #[test]
    fn empty_selector_matches_everything() {
        let s = selector(&[], vec![]);
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("a", "b")])));
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
        let empty = selector(&[("node-role.kubernetes.io/numa", "")], vec![]);
        assert!(empty.matches(&labels(&[("node-role.kubernetes.io/numa", "")])));
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
}
