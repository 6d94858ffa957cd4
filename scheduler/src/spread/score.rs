//! The `PodTopologySpread` score over the pod's `ScheduleAnyway` constraints.
//!
//! Domains are the values of each key among the *feasible* nodes that carry every soft
//! constraint's key (a feasible node lacking one is "ignored": it scores 0). Pods are
//! counted on every eligible node of the cluster, but only into those domains. Each
//! constraint weighs `ln(domains + 2)` (for `kubernetes.io/hostname`: the number of
//! non-ignored feasible nodes), so spreading over many domains matters more. A node's
//! raw score is `Σ count(node's domain) · weight + (maxSkew − 1)`, rounded; fewer is
//! better, so [`normalize`] maps it to `100 · (max + min − raw) / max` (all 100 when
//! every raw score is 0).

use std::collections::HashMap;

use super::{SpreadConstraint, has_all_keys};
use crate::filter::score::MAX_NODE_SCORE;
use crate::filter::{NodeInfo, PodFilterInput};

/// The node label every node carries with its own name.
const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// Per-cycle domain counts of the soft constraints.
#[derive(Debug, Clone)]
pub struct SpreadScore<'a> {
    soft: Vec<&'a SpreadConstraint>,
    counts: Vec<HashMap<String, i64>>,
    weights: Vec<f64>,
}

impl<'a> SpreadScore<'a> {
    /// Counts for the `feasible` nodes' domains over every node of the cluster; `None`
    /// when the pod has no soft constraint.
    pub fn prepare(
        pod: &'a PodFilterInput,
        all: &[&NodeInfo],
        feasible: &[&NodeInfo],
    ) -> Option<Self> {
        let soft: Vec<&SpreadConstraint> = pod.spread().iter().filter(|c| !c.hard).collect();
        if soft.is_empty() {
            return None;
        }
        let mut counts = vec![HashMap::<String, i64>::new(); soft.len()];
        let mut scored = 0usize;
        for node in feasible {
            if has_all_keys(node, soft.iter().copied()) {
                scored += 1;
                for (c, domains) in soft.iter().zip(counts.iter_mut()) {
                    domains.insert(node.labels()[&c.topology_key].clone(), 0);
                }
            }
        }
        let weights = soft
            .iter()
            .zip(&counts)
            .map(|(c, domains)| {
                let size = if c.topology_key == HOSTNAME_KEY {
                    scored
                } else {
                    domains.len()
                };
                (size as f64 + 2.0).ln()
            })
            .collect();
        let ns = &pod.meta().namespace;
        for node in all {
            if !has_all_keys(node, soft.iter().copied()) {
                continue;
            }
            for (c, domains) in soft.iter().zip(counts.iter_mut()) {
                if !c.includes(pod, node) {
                    continue;
                }
                if let Some(n) = domains.get_mut(&node.labels()[&c.topology_key]) {
                    *n += c.count_on(ns, node);
                }
            }
        }
        Some(Self {
            soft,
            counts,
            weights,
        })
    }

    /// The node's raw score; `None` for an ignored node.
    pub fn raw(&self, node: &NodeInfo) -> Option<i64> {
        if !has_all_keys(node, self.soft.iter().copied()) {
            return None;
        }
        let mut total = 0.0;
        for (i, c) in self.soft.iter().enumerate() {
            let value = &node.labels()[&c.topology_key];
            let count = self.counts[i].get(value).copied().unwrap_or(0);
            total += count as f64 * self.weights[i] + (c.max_skew - 1) as f64;
        }
        Some(total.round() as i64)
    }
}

/// Normalized scores 0..=100 (fewer matching pods → higher); ignored nodes get 0.
pub fn normalize(raw: &[Option<i64>]) -> Vec<i64> {
    let known = raw.iter().flatten().copied();
    let min = known.clone().min().unwrap_or(0);
    let max = known.max().unwrap_or(0);
    raw.iter()
        .map(|r| match r {
            None => 0,
            Some(_) if max == 0 => MAX_NODE_SCORE,
            Some(s) => MAX_NODE_SCORE * (max + min - s) / max,
        })
        .collect()
}
