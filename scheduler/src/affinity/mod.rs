//! `InterPodAffinity`: required and preferred pod affinity and anti-affinity, with
//! kube-scheduler's semantics.
//!
//! Data flows in three steps so the per-node work is a few hash lookups:
//!
//! - [`PodAffinityTerms::from_pod`] — once per pod update (incoming and bound pods):
//!   terms with their namespaces and merged label selectors ([`terms`]).
//! - [`AffinityFilter::prepare`] — once per scheduling cycle: one pass over the pods
//!   of every node (bound and assumed) counting, per topology pair (`topologyKey` →
//!   node's value), the pods that satisfy the incoming pod's affinity terms, that its
//!   anti-affinity terms select, and whose own required anti-affinity selects the
//!   incoming pod (symmetry) ([`filter`]).
//! - [`AffinityFilter::check`] — per node: the node's labels against those counts.
//!
//! Preferred terms (the incoming pod's, and symmetrically the existing pods' required
//! and preferred terms that select it) feed [`AffinityScore`] ([`score`]), normalized to
//! 0..=100 across the feasible nodes.
//!
//! Namespace selectors need namespace labels: the scheduler watches namespaces and
//! passes their labels as [`NamespaceLabels`]; a namespace it does not know has none.

pub mod filter;
pub mod score;
pub mod terms;

use std::collections::{BTreeMap, HashMap};

pub use filter::{AffinityFilter, AffinityReason};
pub use score::AffinityScore;
pub use terms::{AffinityTerm, NamespaceScope, PodAffinityTerms};

/// Every namespace's labels, by name.
pub type NamespaceLabels = HashMap<String, BTreeMap<String, String>>;

/// Counts per topology pair: `topologyKey` → value → count. Lookups borrow, so checking
/// a node allocates nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopologyCounts<T> {
    by_key: HashMap<String, HashMap<String, T>>,
}

impl<T: Copy + Default + std::ops::AddAssign + PartialEq> TopologyCounts<T> {
    /// Adds `delta` to the pair (`key`, the node's value of `key`) when the node has the
    /// label. A pair that returns to zero is dropped, so [`Self::is_empty`] means "no
    /// pair has a count".
    pub fn add(&mut self, key: &str, node_labels: &BTreeMap<String, String>, delta: T) {
        let Some(value) = node_labels.get(key) else {
            return;
        };
        let values = self.by_key.entry(key.to_owned()).or_default();
        let count = values.entry(value.clone()).or_default();
        *count += delta;
        if *count == T::default() {
            values.remove(value);
            if values.is_empty() {
                self.by_key.remove(key);
            }
        }
    }

    /// The count of (`key`, `value`).
    pub fn get(&self, key: &str, value: &str) -> T {
        self.by_key
            .get(key)
            .and_then(|m| m.get(value))
            .copied()
            .unwrap_or_default()
    }

    /// Whether no pair has a count.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The count of the node's value of `key` (default when the node lacks the label).
    pub fn of_node(&self, key: &str, node_labels: &BTreeMap<String, String>) -> T {
        node_labels
            .get(key)
            .map_or_else(T::default, |value| self.get(key, value))
    }

    /// Every pair of the node's labels that has a count, summed.
    pub fn sum_over_labels(&self, node_labels: &BTreeMap<String, String>) -> T {
        let mut total = T::default();
        for (key, values) in &self.by_key {
            if let Some(v) = node_labels.get(key).and_then(|value| values.get(value)) {
                total += *v;
            }
        }
        total
    }

    /// Whether any pair of the node's labels has a count above `above`.
    pub fn any_over_labels(&self, node_labels: &BTreeMap<String, String>, above: T) -> bool
    where
        T: PartialOrd,
    {
        self.by_key.iter().any(|(key, values)| {
            node_labels
                .get(key)
                .and_then(|value| values.get(value))
                .is_some_and(|v| *v > above)
        })
    }
}

#[cfg(test)]
mod tests;
