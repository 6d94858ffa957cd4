//! The `InterPodAffinity` filter: [`AffinityFilter::prepare`] counts once per cycle,
//! [`AffinityFilter::check`] judges one node.
//!
//! The three rules, checked in kube-scheduler's order:
//!
//! 1. **Existing pods' anti-affinity** (symmetry): a pod already placed whose required
//!    anti-affinity term selects the incoming pod forbids the whole topology domain of
//!    its node (the node's value of the term's key). A node in such a domain fails.
//! 2. **Required affinity**: the node must carry every term's topology key, and for
//!    every term, the node's domain must hold a pod that satisfies *all* the terms
//!    (kube-scheduler counts a pod only when it matches every term). Exception: when no
//!    pod anywhere satisfies them and the incoming pod satisfies its own terms, it may
//!    go to any node carrying the keys — the first pod of a group with affinity to
//!    itself would otherwise wait forever. Unresolvable by preemption.
//! 3. **Required anti-affinity**: for every term, the node's domain must hold no pod the
//!    term selects. A node without the key is not in any domain and passes.
//!
//! Pods on a node count whether bound or assumed, terminating or not (they still hold
//! their domain until they are gone).

use super::{NamespaceLabels, TopologyCounts};
use crate::filter::NodeInfo;
use crate::pod_meta::PodMeta;
use std::collections::BTreeMap;

/// Why a node fails the filter, worded like kube-scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AffinityReason {
    /// A placed pod's required anti-affinity selects the incoming pod.
    ExistingAntiAffinity,
    /// The incoming pod's required affinity is not satisfied.
    Affinity,
    /// The incoming pod's required anti-affinity selects a pod of the domain.
    AntiAffinity,
}

impl AffinityReason {
    /// The reason string aggregated across nodes.
    pub fn message(self) -> &'static str {
        match self {
            Self::ExistingAntiAffinity => {
                "node(s) didn't satisfy existing pods anti-affinity rules"
            }
            Self::Affinity => "node(s) didn't match pod affinity rules",
            Self::AntiAffinity => "node(s) didn't match pod anti-affinity rules",
        }
    }

    /// Whether evicting pods cannot help (a missing affinity partner).
    pub fn is_unresolvable(self) -> bool {
        self == Self::Affinity
    }
}

/// Per-cycle counts for one incoming pod; see the module documentation.
#[derive(Debug, Clone)]
pub struct AffinityFilter<'a> {
    pod: &'a PodMeta,
    namespaces: &'a NamespaceLabels,
    /// Pods satisfying all required affinity terms, per pair of each term's key.
    affinity: TopologyCounts<i64>,
    /// Pods selected by a required anti-affinity term, per pair of that term's key.
    anti_affinity: TopologyCounts<i64>,
    /// Placed pods whose required anti-affinity selects the incoming pod.
    existing_anti_affinity: TopologyCounts<i64>,
    /// The incoming pod satisfies all its own required affinity terms.
    self_match: bool,
}

impl<'a> AffinityFilter<'a> {
    /// Counts over every pod of `nodes` for the incoming `pod`.
    pub fn prepare(pod: &'a PodMeta, nodes: &[&NodeInfo], namespaces: &'a NamespaceLabels) -> Self {
        let mut out = Self {
            pod,
            namespaces,
            affinity: TopologyCounts::default(),
            anti_affinity: TopologyCounts::default(),
            existing_anti_affinity: TopologyCounts::default(),
            self_match: false,
        };
        let own_terms = out.required_affinity().len() + out.required_anti_affinity().len();
        out.self_match = out
            .required_affinity()
            .iter()
            .all(|t| t.matches(&pod.namespace, &pod.labels, namespaces));
        for node in nodes {
            if own_terms == 0 && !node.has_pods_with_required_anti_affinity() {
                continue;
            }
            for usage in node.pods() {
                out.account(&usage.meta, node.labels(), 1);
            }
        }
        out
    }

    /// Whether the filter can reject anything at all.
    pub fn is_active(&self) -> bool {
        !self.required_affinity().is_empty()
            || !self.required_anti_affinity().is_empty()
            || !self.existing_anti_affinity.is_empty()
    }

    /// Takes `victim`, placed on a node with `node_labels`, out of the counts (for
    /// preemption: the filter as if it were gone).
    pub fn remove(&mut self, victim: &PodMeta, node_labels: &BTreeMap<String, String>) {
        self.account(victim, node_labels, -1);
    }

    /// Judges one node.
    pub fn check(&self, node: &NodeInfo) -> Result<(), AffinityReason> {
        let labels = node.labels();
        if !self.existing_anti_affinity.is_empty()
            && self.existing_anti_affinity.any_over_labels(labels, 0)
        {
            return Err(AffinityReason::ExistingAntiAffinity);
        }
        let required = self.required_affinity();
        if !required.is_empty() {
            let mut partners_everywhere = true;
            for t in required {
                let Some(value) = labels.get(&t.topology_key) else {
                    return Err(AffinityReason::Affinity);
                };
                if self.affinity.get(&t.topology_key, value) <= 0 {
                    partners_everywhere = false;
                }
            }
            let first_of_group = self.affinity.is_empty() && self.self_match;
            if !partners_everywhere && !first_of_group {
                return Err(AffinityReason::Affinity);
            }
        }
        let selected = self
            .required_anti_affinity()
            .iter()
            .any(|t| self.anti_affinity.of_node(&t.topology_key, labels) > 0);
        if selected {
            return Err(AffinityReason::AntiAffinity);
        }
        Ok(())
    }

    fn required_affinity(&self) -> &'a [super::AffinityTerm] {
        self.pod
            .affinity
            .as_ref()
            .map_or(&[], |a| &a.required_affinity[..])
    }

    fn required_anti_affinity(&self) -> &'a [super::AffinityTerm] {
        self.pod
            .affinity
            .as_ref()
            .map_or(&[], |a| &a.required_anti_affinity[..])
    }

    fn account(&mut self, other: &PodMeta, node_labels: &BTreeMap<String, String>, sign: i64) {
        if other.uid == self.pod.uid {
            return;
        }
        let ns = self.namespaces;
        let selects = |t: &super::AffinityTerm| t.matches(&other.namespace, &other.labels, ns);
        let required = self.required_affinity();
        if !required.is_empty() && required.iter().all(selects) {
            for t in required {
                self.affinity.add(&t.topology_key, node_labels, sign);
            }
        }
        for t in self.required_anti_affinity() {
            if selects(t) {
                self.anti_affinity.add(&t.topology_key, node_labels, sign);
            }
        }
        let Some(theirs) = &other.affinity else {
            return;
        };
        for t in &theirs.required_anti_affinity {
            if t.matches(&self.pod.namespace, &self.pod.labels, ns) {
                self.existing_anti_affinity
                    .add(&t.topology_key, node_labels, sign);
            }
        }
    }
}
