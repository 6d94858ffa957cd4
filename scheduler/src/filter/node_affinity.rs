//! `NodeAffinity`: `spec.nodeSelector` and `spec.affinity.nodeAffinity`.
//!
//! The filter requires both of:
//!
//! - every `nodeSelector` label, with an equal value (an empty map matches all);
//! - when `requiredDuringSchedulingIgnoredDuringExecution` is set, at least one of its
//!   terms (see [`super::node_selector`]). Empty terms and terms Kubernetes' parser
//!   rejects never match, so a required selector with no usable term matches no node;
//!   an unset one matches every node.
//!
//! [`score`] is the raw preferred-affinity score: the sum of the weights of the
//! `preferredDuringSchedulingIgnoredDuringExecution` terms the node satisfies
//! (zero-weight and empty terms ignored), to be scaled by
//! [`super::score::normalize`]. As in kube-scheduler, an unusable preferred term is
//! an error of the whole score, not a term that silently never matches.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::node::NodeInfo;
use super::node_selector::{SelectorError, Term};
use super::pod::PodFilterInput;
use super::reason::FilterReason;

/// A pod's node selector and node affinity, parsed once per pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAffinityInput {
    /// `spec.nodeSelector` as `(key, value)` pairs.
    node_selector: Vec<(String, String)>,
    /// Usable required terms; `None` when no required affinity is set.
    required: Option<Vec<Term>>,
    /// Preferred terms with their weights, or the first unusable one.
    preferred: Result<Vec<(i64, Term)>, SelectorError>,
}

impl NodeAffinityInput {
    /// Parses the pod's node selector and node affinity.
    pub fn from_pod(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        let node_selector = spec
            .and_then(|s| s.node_selector.as_ref())
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let affinity = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref());
        let required = affinity
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|selector| {
                selector
                    .node_selector_terms
                    .iter()
                    .enumerate()
                    // Unusable terms never match; dropping them keeps the OR intact.
                    .filter_map(|(i, term)| Term::parse(i, term).ok().flatten())
                    .collect()
            });
        let preferred = affinity
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_deref()
            })
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter(|(_, term)| term.weight != 0)
            .filter_map(|(i, term)| {
                Term::parse(i, &term.preference)
                    .transpose()
                    .map(|parsed| parsed.map(|t| (i64::from(term.weight), t)))
            })
            .collect();
        Self {
            node_selector,
            required,
            preferred,
        }
    }

    /// Whether a node with these labels and this name passes the filter.
    pub fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        let selected = self
            .node_selector
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value));
        selected
            && self
                .required
                .as_ref()
                .is_none_or(|terms| terms.iter().any(|t| t.matches(labels, node_name)))
    }

    /// The sum of the weights of the preferred terms the node satisfies.
    pub fn preferred_score(
        &self,
        labels: &BTreeMap<String, String>,
        node_name: &str,
    ) -> Result<i64, &SelectorError> {
        let terms = self.preferred.as_ref()?;
        Ok(terms
            .iter()
            .filter(|(_, t)| t.matches(labels, node_name))
            .map(|(weight, _)| weight)
            .sum())
    }

    /// Whether the pod has preferred terms worth scoring (kube-scheduler skips the
    /// score otherwise). An unusable term counts, so its error is reported.
    pub fn has_preferences(&self) -> bool {
        self.preferred
            .as_ref()
            .map_or(true, |terms| !terms.is_empty())
    }
}

/// Fails when the node does not satisfy the pod's node selector and required node
/// affinity.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    if pod.node_affinity().matches(node.labels(), node.name()) {
        Ok(())
    } else {
        Err(FilterReason::AffinityMismatch)
    }
}

/// kube-scheduler's raw `NodeAffinity` score of the node: the summed weights of the
/// preferred terms it satisfies. An unusable preferred term fails every node.
pub fn score<'a>(pod: &'a PodFilterInput, node: &NodeInfo) -> Result<i64, &'a SelectorError> {
    pod.node_affinity()
        .preferred_score(node.labels(), node.name())
}
