//! The `PodTopologySpread` filter over the pod's `DoNotSchedule` constraints; see the
//! module documentation of [`super`] for the rule.

use std::collections::HashMap;

use super::{SpreadConstraint, has_all_keys};
use crate::filter::{NodeInfo, PodFilterInput};
use crate::pod_meta::PodMeta;

/// Why a node fails the filter, worded like kube-scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpreadReason {
    /// The node lacks a constraint's topology key (unresolvable).
    MissingLabel,
    /// Placing the pod there would exceed a `maxSkew`.
    Skew,
}

impl SpreadReason {
    /// The reason string aggregated across nodes.
    pub fn message(self) -> &'static str {
        match self {
            Self::MissingLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
            }
            Self::Skew => "node(s) didn't match pod topology spread constraints",
        }
    }

    /// Whether evicting pods cannot help.
    pub fn is_unresolvable(self) -> bool {
        self == Self::MissingLabel
    }
}

/// Per-cycle domain counts of the hard constraints.
#[derive(Debug, Clone)]
pub struct SpreadFilter<'a> {
    pod: &'a PodFilterInput,
    hard: Vec<&'a SpreadConstraint>,
    /// Per hard constraint: domain value → matching pods.
    counts: Vec<HashMap<String, i64>>,
    /// Per hard constraint: the global minimum the skew is measured against.
    minimum: Vec<i64>,
}

impl<'a> SpreadFilter<'a> {
    /// Counts over every node of the cluster.
    pub fn prepare(pod: &'a PodFilterInput, nodes: &[&NodeInfo]) -> Self {
        let hard: Vec<&SpreadConstraint> = pod.spread().iter().filter(|c| c.hard).collect();
        let mut counts = vec![HashMap::new(); hard.len()];
        if !hard.is_empty() {
            let ns = &pod.meta().namespace;
            for node in nodes {
                if !has_all_keys(node, hard.iter().copied()) {
                    continue;
                }
                for (c, domains) in hard.iter().zip(counts.iter_mut()) {
                    if c.includes(pod, node) {
                        let value = node.labels()[&c.topology_key].clone();
                        *domains.entry(value).or_insert(0) += c.count_on(ns, node);
                    }
                }
            }
        }
        let mut out = Self {
            pod,
            hard,
            counts,
            minimum: Vec::new(),
        };
        out.update_minimum();
        out
    }

    /// Whether the pod has hard constraints.
    pub fn is_active(&self) -> bool {
        !self.hard.is_empty()
    }

    /// Takes `victim` on `node` out of the counts (for preemption).
    pub fn remove(&mut self, victim: &PodMeta, node: &NodeInfo) {
        if !has_all_keys(node, self.hard.iter().copied()) {
            return;
        }
        let ns = &self.pod.meta().namespace;
        for (c, domains) in self.hard.iter().zip(self.counts.iter_mut()) {
            if c.includes(self.pod, node)
                && c.counts(ns, victim)
                && let Some(n) = domains.get_mut(&node.labels()[&c.topology_key])
            {
                *n -= 1;
            }
        }
        self.update_minimum();
    }

    /// Judges one node.
    pub fn check(&self, node: &NodeInfo) -> Result<(), SpreadReason> {
        let own_labels = &self.pod.meta().labels;
        for (i, c) in self.hard.iter().enumerate() {
            let Some(value) = node.labels().get(&c.topology_key) else {
                return Err(SpreadReason::MissingLabel);
            };
            let here = self.counts[i].get(value).copied().unwrap_or(0);
            let own = i64::from(c.selector.matches(own_labels));
            if here + own - self.minimum[i] > c.max_skew {
                return Err(SpreadReason::Skew);
            }
        }
        Ok(())
    }

    fn update_minimum(&mut self) {
        self.minimum = self
            .hard
            .iter()
            .zip(&self.counts)
            .map(|(c, domains)| {
                if domains.len() < c.min_domains {
                    0
                } else {
                    domains.values().copied().min().unwrap_or(0)
                }
            })
            .collect();
    }
}
