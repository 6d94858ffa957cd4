//! The `InterPodAffinity` score: preferred terms, in both directions.
//!
//! For every pod already placed, on a node with labels `L`, each of these adds its
//! weight to the topology pair (term key, `L[key]`), or subtracts it:
//!
//! - the incoming pod's preferred affinity terms that select it: `+weight`;
//! - the incoming pod's preferred anti-affinity terms that select it: `−weight`;
//! - its own required affinity terms that select the incoming pod: `+1`
//!   (kube-scheduler's default `hardPodAffinityWeight`);
//! - its own preferred affinity / anti-affinity terms that select the incoming pod:
//!   `±weight`.
//!
//! A node's raw score is the sum over its labels of those pairs; [`normalize`] maps the
//! feasible nodes' raw scores linearly onto 0..=100 (lowest → 0, highest → 100; all
//! equal → all 0).

use super::{NamespaceLabels, TopologyCounts};
use crate::filter::NodeInfo;
use crate::filter::score::MAX_NODE_SCORE;
use crate::pod_meta::PodMeta;

/// kube-scheduler's default weight of existing pods' required affinity in the score.
pub const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// Per-cycle pair scores for one incoming pod.
#[derive(Debug, Clone, Default)]
pub struct AffinityScore {
    pairs: TopologyCounts<i64>,
}

impl AffinityScore {
    /// Sums over every pod of `nodes`; `None` when nothing can make nodes differ (no
    /// preferred term of the pod, no placed pod with affinity terms).
    pub fn prepare(
        pod: &PodMeta,
        nodes: &[&NodeInfo],
        namespaces: &NamespaceLabels,
    ) -> Option<Self> {
        let own = pod.affinity.as_ref().filter(|a| a.has_preferred());
        let mut pairs = TopologyCounts::default();
        let incoming_ns = namespaces.get(&pod.namespace);
        for node in nodes {
            if own.is_none() && !node.has_pods_with_affinity() {
                continue;
            }
            let labels = node.labels();
            for usage in node.pods() {
                let other = &usage.meta;
                if other.uid == pod.uid {
                    continue;
                }
                if let Some(own) = own {
                    for (w, t) in &own.preferred_affinity {
                        if t.matches(&other.namespace, &other.labels, namespaces) {
                            pairs.add(&t.topology_key, labels, *w);
                        }
                    }
                    for (w, t) in &own.preferred_anti_affinity {
                        if t.matches(&other.namespace, &other.labels, namespaces) {
                            pairs.add(&t.topology_key, labels, -*w);
                        }
                    }
                }
                let Some(theirs) = &other.affinity else {
                    continue;
                };
                let selects_incoming = |t: &super::AffinityTerm| {
                    t.selector.matches(&pod.labels)
                        && t.namespaces.contains(&pod.namespace, incoming_ns)
                };
                for t in &theirs.required_affinity {
                    if selects_incoming(t) {
                        pairs.add(&t.topology_key, labels, HARD_POD_AFFINITY_WEIGHT);
                    }
                }
                for (w, t) in &theirs.preferred_affinity {
                    if selects_incoming(t) {
                        pairs.add(&t.topology_key, labels, *w);
                    }
                }
                for (w, t) in &theirs.preferred_anti_affinity {
                    if selects_incoming(t) {
                        pairs.add(&t.topology_key, labels, -*w);
                    }
                }
            }
        }
        (!pairs.is_empty()).then_some(Self { pairs })
    }

    /// The node's raw score.
    pub fn raw(&self, node: &NodeInfo) -> i64 {
        self.pairs.sum_over_labels(node.labels())
    }
}

/// Maps raw scores linearly onto 0..=100, in place; see the module documentation.
pub fn normalize(scores: &mut [i64]) {
    let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
        return;
    };
    let span = i128::from(max) - i128::from(min);
    for s in scores.iter_mut() {
        *s = if span > 0 {
            let scaled = i128::from(MAX_NODE_SCORE) * (i128::from(*s) - i128::from(min)) / span;
            i64::try_from(scaled).unwrap_or(MAX_NODE_SCORE)
        } else {
            0
        };
    }
}
