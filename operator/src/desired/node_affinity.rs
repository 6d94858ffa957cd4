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
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Node affinity requiring every node to match `selector`; `None` for an empty selector,
/// which selects every node. `Err` says, for a human, why the selector is invalid.
pub(crate) fn node_affinity(selector: &LabelSelector) -> Result<Option<Affinity>, String> {
    let requirements = requirements(selector)?;
    if requirements.is_empty() {
        return Ok(None);
    }
    Ok(Some(Affinity {
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
    }))
}

/// The requirements equivalent to a label selector, `matchLabels` first (in key order).
pub(crate) fn requirements(
    selector: &LabelSelector,
) -> Result<Vec<NodeSelectorRequirement>, String> {
    let labels = selector.match_labels.iter().flatten().map(|(k, v)| {
        Ok(NodeSelectorRequirement {
            key: k.clone(),
            operator: "In".to_owned(),
            values: Some(vec![v.clone()]),
        })
    });
    let expressions = selector.match_expressions.iter().flatten().map(|e| {
        let values = e.values.clone().unwrap_or_default();
        match (e.operator.as_str(), values.is_empty()) {
            ("In" | "NotIn", false) | ("Exists" | "DoesNotExist", true) => {
                Ok(NodeSelectorRequirement {
                    key: e.key.clone(),
                    operator: e.operator.clone(),
                    values: (!values.is_empty()).then_some(values),
                })
            }
            ("In" | "NotIn", true) => Err(format!(
                "matchExpressions key '{}': operator {} needs at least one value",
                e.key, e.operator
            )),
            ("Exists" | "DoesNotExist", false) => Err(format!(
                "matchExpressions key '{}': operator {} takes no values",
                e.key, e.operator
            )),
            (op, _) => Err(format!(
                "matchExpressions key '{}': unknown operator '{op}' (a label selector accepts In, NotIn, Exists, DoesNotExist)",
                e.key
            )),
        }
    });
    labels.chain(expressions).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: op.to_owned(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn empty_selector_means_no_affinity() {
        assert_eq!(node_affinity(&LabelSelector::default()), Ok(None));
        let empty_lists = LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(Vec::new()),
        };
        assert_eq!(node_affinity(&empty_lists), Ok(None));
    }

    #[test]
    fn comparison_operators_are_not_label_selector_operators() {
        let sel = LabelSelector {
            match_expressions: Some(vec![expr("cpu-count", "Gt", &["8"])]),
            ..LabelSelector::default()
        };
        let err = node_affinity(&sel).unwrap_err();
        assert!(err.contains("unknown operator 'Gt'"), "{err}");
    }

    #[test]
    fn value_arity_is_checked() {
        for (e, want) in [
            (expr("a", "In", &[]), "needs at least one value"),
            (expr("a", "Exists", &["x"]), "takes no values"),
        ] {
            let sel = LabelSelector {
                match_expressions: Some(vec![e]),
                ..LabelSelector::default()
            };
            let err = requirements(&sel).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
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
            let reqs = requirements(&sel).unwrap();
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
            let terms = node_affinity(&sel).unwrap().map(|a| {
                a.node_affinity.unwrap().required_during_scheduling_ignored_during_execution.unwrap().node_selector_terms.len()
            });
            prop_assert_eq!(terms, (!reqs.is_empty()).then_some(1));
        }
    }
}
