//! A pod's inter-pod affinity terms, parsed once per pod (the incoming pod, and every
//! bound pod when the watch delivers it).
//!
//! A term selects pods by namespace and labels: its namespaces are the listed ones plus
//! those whose labels match `namespaceSelector`; with neither, the owning pod's own
//! namespace; an empty `namespaceSelector` means every namespace. `matchLabelKeys` /
//! `mismatchLabelKeys` are merged into the label selector with the owning pod's values
//! (see [`Selector::require_equal`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};

use super::NamespaceLabels;
use tas_api::labels::Selector;

/// Which namespaces a term covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceScope {
    names: Vec<String>,
    selector: Option<Selector>,
}

impl NamespaceScope {
    /// Whether namespace `ns` (with these labels, when known) is covered.
    pub fn contains(&self, ns: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.names.iter().any(|n| n == ns) {
            return true;
        }
        match &self.selector {
            None => false,
            Some(s) if s.is_everything() => true,
            Some(s) => labels.is_some_and(|l| s.matches(l)),
        }
    }
}

/// One `PodAffinityTerm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Namespaces whose pods the term considers.
    pub namespaces: NamespaceScope,
    /// Labels of the pods it selects.
    pub selector: Selector,
    /// The node label that defines a topology domain.
    pub topology_key: String,
}

impl AffinityTerm {
    /// Parses `term` of a pod in namespace `owner_ns` with labels `owner_labels`.
    pub fn parse(
        term: &PodAffinityTerm,
        owner_ns: &str,
        owner_labels: &BTreeMap<String, String>,
    ) -> Self {
        let mut selector = Selector::parse_or_nothing(term.label_selector.as_ref());
        selector.require_equal(
            term.match_label_keys.as_deref().unwrap_or_default(),
            owner_labels,
        );
        selector.require_different(
            term.mismatch_label_keys.as_deref().unwrap_or_default(),
            owner_labels,
        );
        let names = term.namespaces.clone().unwrap_or_default();
        let ns_selector = term
            .namespace_selector
            .as_ref()
            .map(|s| Selector::parse_or_nothing(Some(s)));
        let names = if names.is_empty() && ns_selector.is_none() {
            vec![owner_ns.to_owned()]
        } else {
            names
        };
        Self {
            namespaces: NamespaceScope {
                names,
                selector: ns_selector,
            },
            selector,
            topology_key: term.topology_key.clone(),
        }
    }

    /// Whether the term selects a pod in `ns` with `labels`, given every namespace's
    /// labels.
    pub fn matches(
        &self,
        ns: &str,
        labels: &BTreeMap<String, String>,
        namespaces: &NamespaceLabels,
    ) -> bool {
        self.selector.matches(labels) && self.namespaces.contains(ns, namespaces.get(ns))
    }
}

/// Every inter-pod affinity term of a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinityTerms {
    /// `podAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required_affinity: Vec<AffinityTerm>,
    /// `podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required_anti_affinity: Vec<AffinityTerm>,
    /// `podAffinity.preferredDuringSchedulingIgnoredDuringExecution` with weights.
    pub preferred_affinity: Vec<(i64, AffinityTerm)>,
    /// `podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution` with weights.
    pub preferred_anti_affinity: Vec<(i64, AffinityTerm)>,
}

impl PodAffinityTerms {
    /// The pod's terms; `None` when it has none.
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let affinity = pod.spec.as_ref()?.affinity.as_ref()?;
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let required = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::parse(t, ns, labels))
                .collect()
        };
        let preferred = |terms: Option<&Vec<WeightedPodAffinityTerm>>| -> Vec<(i64, AffinityTerm)> {
            terms
                .into_iter()
                .flatten()
                .filter(|t| t.weight != 0)
                .map(|t| {
                    let term = AffinityTerm::parse(&t.pod_affinity_term, ns, labels);
                    (i64::from(t.weight), term)
                })
                .collect()
        };
        let a = affinity.pod_affinity.as_ref();
        let anti = affinity.pod_anti_affinity.as_ref();
        let terms = Self {
            required_affinity: required(a.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            required_anti_affinity: required(anti.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_affinity: preferred(a.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_anti_affinity: preferred(anti.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
        };
        (!terms.is_empty()).then_some(terms)
    }

    /// Whether there is no term at all.
    pub fn is_empty(&self) -> bool {
        self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
    }

    /// Whether any preferred term is set (the incoming pod's share of the score).
    pub fn has_preferred(&self) -> bool {
        !self.preferred_affinity.is_empty() || !self.preferred_anti_affinity.is_empty()
    }
}
