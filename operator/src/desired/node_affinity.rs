//! A node group's label selector as the node affinity of its DaemonSet's pods.
//!
//! A DaemonSet places pods with node affinity, which speaks `NodeSelectorRequirement`
//! rather than `LabelSelector`. The label-selector operators (In, NotIn, Exists,
//! DoesNotExist) exist with the same meaning in both, so the translation is one to one:
//! each `matchLabels` entry becomes `key In [value]`, each expression is copied. All
//! requirements go into one term, because requirements of a term are ANDed, like a
//! selector's; separate terms would be ORed.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
};
use tas_api::labels::Selector;

/// Node affinity requiring every node to match `selector`; `None` for an empty selector,
/// which selects every node.
pub(crate) fn node_affinity(selector: &Selector) -> Option<Affinity> {
    let requirements = requirements(selector);
    if requirements.is_empty() {
        return None;
    }
    Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(requirements),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    })
}

/// The requirements equivalent to a parsed label selector, `matchLabels` first (in key
/// order), then the expressions as written.
pub(crate) fn requirements(selector: &Selector) -> Vec<NodeSelectorRequirement> {
    selector
        .requirements()
        .iter()
        .map(|r| {
            let values = r.operator.values();
            NodeSelectorRequirement {
                key: r.key.clone(),
                operator: r.operator.as_str().to_owned(),
                values: (!values.is_empty()).then(|| values.to_vec()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: op.to_owned(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn parsed(selector: &LabelSelector) -> Selector {
        Selector::parse(selector).expect("a valid selector")
    }

    #[test]
    fn empty_selector_means_no_affinity() {
        assert_eq!(node_affinity(&parsed(&LabelSelector::default())), None);
        let empty_lists = LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(Vec::new()),
        };
        assert_eq!(node_affinity(&parsed(&empty_lists)), None);
    }

    /// Values are copied as written, not sorted or deduplicated.
    #[test]
    fn expressions_are_copied() {
        let sel = LabelSelector {
            match_expressions: Some(vec![
                expr("zone", "NotIn", &["b", "a"]),
                expr("gpu", "DoesNotExist", &[]),
            ]),
            ..LabelSelector::default()
        };
        assert_eq!(
            requirements(&parsed(&sel)),
            [
                NodeSelectorRequirement {
                    key: "zone".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["b".into(), "a".into()]),
                },
                NodeSelectorRequirement {
                    key: "gpu".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]
        );
    }

    proptest! {
        /// Every label and every expression becomes exactly one requirement with the same
        /// key, and all of them end up ANDed in a single term.
        #[test]
        fn one_requirement_per_selector_entry(
            labels in proptest::collection::btree_map("[a-z]{1,8}", "[a-z0-9]{0,8}", 0..5),
            exprs in proptest::collection::vec(
                ("[a-z]{1,8}", prop_oneof![Just("In"), Just("NotIn"), Just("Exists"), Just("DoesNotExist")]),
                0..5,
            ),
        ) {
            let sel = LabelSelector {
                match_labels: Some(labels.clone()),
                match_expressions: Some(exprs.iter().map(|(k, op)| {
                    let values: &[&str] = if op.starts_with('I') || op.starts_with('N') { &["v"] } else { &[] };
                    expr(k, op, values)
                }).collect()),
            };
            let reqs = requirements(&parsed(&sel));
            prop_assert_eq!(reqs.len(), labels.len() + exprs.len());
            for (r, (k, v)) in reqs.iter().zip(&labels) {
                prop_assert_eq!(&r.key, k);
                prop_assert_eq!(r.operator.as_str(), "In");
                prop_assert_eq!(r.values.as_deref(), Some(std::slice::from_ref(v)));
            }
            for (r, (k, op)) in reqs[labels.len()..].iter().zip(&exprs) {
                prop_assert_eq!(&r.key, k);
                prop_assert_eq!(r.operator.as_str(), *op);
            }
            let terms = node_affinity(&parsed(&sel)).map(|a| {
                a.node_affinity.unwrap().required_during_scheduling_ignored_during_execution.unwrap().node_selector_terms.len()
            });
            prop_assert_eq!(terms, (!reqs.is_empty()).then_some(1));
        }
    }
}
