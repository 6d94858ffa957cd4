//! `PodTopologySpread`: `topologySpreadConstraints` with kube-scheduler's semantics.
//!
//! A constraint spreads the pods its `labelSelector` selects (in the incoming pod's
//! namespace, terminating pods left out) over the *domains* of its `topologyKey`: the
//! values of that node label among the *eligible* nodes — those carrying every
//! constraint's key and passing the constraint's node inclusion policies:
//! `nodeAffinityPolicy` (default `Honor`: only nodes matching the pod's node selector
//! and required node affinity) and `nodeTaintsPolicy` (default `Ignore`; `Honor`: only
//! nodes whose `NoSchedule`/`NoExecute` taints the pod tolerates). `matchLabelKeys` are
//! merged into the selector with the pod's own values.
//!
//! - `DoNotSchedule` constraints filter ([`SpreadFilter`]): placing the pod on a node
//!   must keep `count(node's domain) + self − global minimum ≤ maxSkew`, where `self`
//!   is 1 when the pod matches its own selector and the global minimum is the smallest
//!   count over the eligible domains — or 0 while there are fewer domains than
//!   `minDomains`. A node without the key fails for good.
//! - `ScheduleAnyway` constraints score ([`SpreadScore`]): fewer matching pods in the
//!   node's domains is better.
//!
//! Cluster-wide default constraints (kube-scheduler's `defaultConstraints`) are not
//! applied: a pod is spread only by its own constraints.
//!
//! Counting happens once per cycle over every node's pods (assumed pods included);
//! per node, the checks are map lookups.

pub mod filter;
pub mod score;

use k8s_openapi::api::core::v1::Pod;

pub use filter::{SpreadFilter, SpreadReason};
pub use score::SpreadScore;

use crate::filter::{NodeInfo, PodFilterInput, taint_toleration};
use crate::pod_meta::PodMeta;
use tas_api::labels::Selector;

/// One parsed `topologySpreadConstraints` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    /// `maxSkew`.
    pub max_skew: i64,
    /// `topologyKey`.
    pub topology_key: String,
    /// `whenUnsatisfiable: DoNotSchedule` (else `ScheduleAnyway`).
    pub hard: bool,
    /// `minDomains` (1 when unset).
    pub min_domains: usize,
    /// `labelSelector` with `matchLabelKeys` merged in.
    pub selector: Selector,
    /// `nodeAffinityPolicy: Honor` (the default).
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default `Ignore`).
    pub honor_taints: bool,
}

impl SpreadConstraint {
    /// The pod's constraints, in spec order.
    pub fn from_pod(pod: &Pod) -> Vec<Self> {
        let empty = Default::default();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        pod.spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .into_iter()
            .flatten()
            .map(|c| {
                let mut selector = Selector::parse_or_nothing(c.label_selector.as_ref());
                selector.require_equal(c.match_label_keys.as_deref().unwrap_or_default(), labels);
                Self {
                    max_skew: i64::from(c.max_skew),
                    topology_key: c.topology_key.clone(),
                    hard: c.when_unsatisfiable != "ScheduleAnyway",
                    min_domains: c
                        .min_domains
                        .and_then(|m| usize::try_from(m).ok())
                        .unwrap_or(1),
                    selector,
                    honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                    honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
                }
            })
            .collect()
    }

    /// Whether `node` counts for this constraint under its inclusion policies.
    pub fn includes(&self, pod: &PodFilterInput, node: &NodeInfo) -> bool {
        (!self.honor_node_affinity || pod.node_affinity().matches(node.labels(), node.name()))
            && (!self.honor_taints || taint_toleration::filter(pod, node).is_ok())
    }

    /// Whether `other` counts towards this constraint for a pod in namespace `ns`.
    pub fn counts(&self, ns: &str, other: &PodMeta) -> bool {
        !other.terminating && other.namespace == ns && self.selector.matches(&other.labels)
    }

    /// How many pods of `node` count.
    pub fn count_on(&self, ns: &str, node: &NodeInfo) -> i64 {
        let n = node.pods().filter(|u| self.counts(ns, &u.meta)).count();
        i64::try_from(n).unwrap_or(i64::MAX)
    }
}

/// Whether `node` carries the topology key of every constraint.
fn has_all_keys<'c>(
    node: &NodeInfo,
    mut constraints: impl Iterator<Item = &'c SpreadConstraint>,
) -> bool {
    constraints.all(|c| node.labels().contains_key(&c.topology_key))
}

#[cfg(test)]
mod tests;
