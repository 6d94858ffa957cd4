//! Choosing victims: per node, the smallest set of lower-priority pods whose eviction
//! makes the pod pass every filter there, the NUMA fit included; across nodes, the
//! best such set.
//!
//! Per node:
//!
//! 1. Candidates are the node's pods (bound or assumed) with a priority below the
//!    preemptor's that are not already terminating. A node failing a filter eviction
//!    cannot fix (cordon, taint, node affinity, node name, a missing spread key or
//!    affinity partner) is skipped, as is a node where evicting *every* candidate would
//!    still not be enough.
//! 2. A set of victims "works" when, with the victims taken out, the node passes the
//!    node-level filters, the spread and inter-pod affinity filters (their counts
//!    updated), the NUMA fit under [`super::numa_rule`] and, for a pod with resource
//!    claims, their allocation on the zones of that fit, the devices of claims only
//!    victims use counted free ([`super::dra_rule`]).
//! 3. With at most [`EXACT_SEARCH_LIMIT`] candidates every subset is tried, smallest
//!    first, and the best working set by [`Plan::rank`] wins: fewest PodDisruptionBudget
//!    violations, then fewest victims, then the lowest highest priority, then the
//!    lowest priority sum. Supersets of a working set are never better (violations only
//!    grow with the set) and are skipped. With more candidates, kube-scheduler's greedy
//!    "reprieve" is used instead: start from all candidates evicted and give back, one
//!    at a time, first the pods whose eviction would violate a budget and then the
//!    others, highest priority first, every pod without which the set still works. The
//!    result is minimal (no victim can be spared) but not always minimum.
//!
//! Across nodes the plans are ranked the same way (then by a stable hash of pod and
//! node); the caller gets the best few, so that it can fall back to the next one when
//! the Eviction API refuses a victim.

use std::sync::Arc;

use super::dra_rule::{self, Holders};
use super::numa_rule;
use super::pdb::Budgets;
use crate::cycle::{ClusterView, CycleSettings, PodInput, PreFilter, TopologyView};
use crate::filter::{self, NodeInfo};
use crate::numa::Resources;
use crate::pod_meta::PodMeta;
use tas_api::hash::fnv1a64_pair;

/// Candidates up to which every subset is tried (2^10 fit checks at most per node).
pub const EXACT_SEARCH_LIMIT: usize = 10;
/// Nodes with a working plan after which the search stops (kube-scheduler samples too).
const MAX_PLANS_SEARCHED: usize = 100;

/// A node and the pods to evict from it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Node name.
    pub node: String,
    /// The victims, lowest priority first.
    pub victims: Vec<Arc<PodMeta>>,
    /// How many victims would violate a PodDisruptionBudget.
    pub pdb_violations: usize,
    tie: u64,
}

impl Plan {
    /// Lower is better: PDB violations, victims, highest victim priority, priority sum,
    /// tie-breaker.
    pub fn rank(&self) -> (usize, usize, i32, i64, u64) {
        let metas: Vec<&PodMeta> = self.victims.iter().map(|v| &**v).collect();
        let (max, sum) = priorities(&metas);
        (self.pdb_violations, self.victims.len(), max, sum, self.tie)
    }
}

fn priorities(victims: &[&PodMeta]) -> (i32, i64) {
    let max = victims.iter().map(|v| v.priority).max().unwrap_or(i32::MIN);
    let sum = victims.iter().map(|v| i64::from(v.priority)).sum();
    (max, sum)
}

/// The best `limit` plans over the cluster, best first; empty when preemption cannot
/// help. `reserved(node, uid)` gives the cache's reservation of a pod on a node.
pub fn plans<F, R>(
    pod: &PodInput,
    cluster: &ClusterView<'_>,
    topology: F,
    reserved: R,
    budgets: &Budgets,
    s: &CycleSettings,
    limit: usize,
) -> Vec<Plan>
where
    F: Fn(&str) -> TopologyView,
    R: Fn(&str, &str) -> Option<Resources>,
{
    let none = Holders::default();
    let context = Context {
        budgets,
        holders: &none,
        s,
    };
    plans_with(pod, cluster, topology, reserved, &context, limit)
}

/// What a victim search reads besides the pod and the nodes.
pub struct Context<'a> {
    /// PodDisruptionBudgets.
    pub budgets: &'a Budgets,
    /// The claims whose devices evictions may free ([`dra_rule`]).
    pub holders: &'a Holders,
    /// The cycle's settings.
    pub s: &'a CycleSettings,
}

/// [`plans`], with the claims of the cluster: a pod with resource claims needs its
/// devices too, counting those its victims' claims free.
pub fn plans_with<F, R>(
    pod: &PodInput,
    cluster: &ClusterView<'_>,
    topology: F,
    reserved: R,
    context: &Context<'_>,
    limit: usize,
) -> Vec<Plan>
where
    F: Fn(&str) -> TopologyView,
    R: Fn(&str, &str) -> Option<Resources>,
{
    let Context {
        budgets,
        holders,
        s,
    } = *context;
    let pre = PreFilter::prepare(pod, cluster);
    let mut found = Vec::new();
    for node in cluster.nodes {
        let view = topology(node.name());
        let reserved_here = |uid: &str| reserved(node.name(), uid);
        let search = NodeSearch {
            pod,
            node,
            pre: &pre,
            view: &view,
            reserved: &reserved_here,
            holders,
            s,
        };
        if let Some(plan) = search.best(budgets) {
            found.push(plan);
            if found.len() >= MAX_PLANS_SEARCHED {
                break;
            }
        }
    }
    found.sort_by_key(Plan::rank);
    found.truncate(limit);
    found
}

/// The victim search on one node.
struct NodeSearch<'a> {
    pod: &'a PodInput,
    node: &'a NodeInfo,
    pre: &'a PreFilter<'a>,
    view: &'a TopologyView,
    reserved: &'a dyn Fn(&str) -> Option<Resources>,
    holders: &'a Holders,
    s: &'a CycleSettings,
}

impl NodeSearch<'_> {
    fn best(&self, budgets: &Budgets) -> Option<Plan> {
        let priority = self.pod.filter.meta().priority;
        let mut candidates: Vec<&Arc<PodMeta>> = self
            .node
            .pods()
            .map(|u| &u.meta)
            .filter(|m| m.priority < priority && !m.terminating && m.uid != self.pod.uid)
            .collect();
        if candidates.is_empty() || self.unresolvable() {
            return None;
        }
        candidates.sort_by(|a, b| {
            (a.priority, &a.namespace, &a.name).cmp(&(b.priority, &b.namespace, &b.name))
        });
        let all: Vec<&PodMeta> = candidates.iter().map(|m| &***m).collect();
        if !self.works(&all) {
            return None;
        }
        let chosen = if all.len() <= EXACT_SEARCH_LIMIT {
            self.exact(&all, budgets)
        } else {
            self.reprieve(&all, budgets)
        };
        let victims: Vec<Arc<PodMeta>> =
            chosen.iter().map(|&i| Arc::clone(candidates[i])).collect();
        let metas: Vec<&PodMeta> = chosen.iter().map(|&i| all[i]).collect();
        Some(Plan {
            node: self.node.name().to_owned(),
            pdb_violations: budgets.violations(&metas),
            victims,
            tie: fnv1a64_pair(self.pod.uid.as_bytes(), self.node.name().as_bytes()),
        })
    }

    /// Whether the node fails a filter that evicting pods cannot fix.
    fn unresolvable(&self) -> bool {
        if let Err(r) = filter::filter_node(&self.pod.filter, self.node)
            && r.is_unresolvable()
        {
            return true;
        }
        let spread = self.pre.spread.is_active()
            && self
                .pre
                .spread
                .check(self.node)
                .is_err_and(|r| r.is_unresolvable());
        let affinity = self.pre.affinity.is_active()
            && self
                .pre
                .affinity
                .check(self.node)
                .is_err_and(|r| r.is_unresolvable());
        spread || affinity
    }

    /// Whether the pod passes every filter on the node once `victims` are gone.
    fn works(&self, victims: &[&PodMeta]) -> bool {
        let mut node = self.node.clone();
        for v in victims {
            node.remove_pod(&v.uid);
        }
        if filter::filter_node(&self.pod.filter, &node).is_err() {
            return false;
        }
        if self.pre.spread.is_active() {
            let mut spread = self.pre.spread.clone();
            for v in victims {
                spread.remove(v, self.node);
            }
            if spread.check(&node).is_err() {
                return false;
            }
        }
        if self.pre.affinity.is_active() {
            let mut affinity = self.pre.affinity.clone();
            for v in victims {
                affinity.remove(v, self.node.labels());
            }
            if affinity.check(&node).is_err() {
                return false;
            }
        }
        let devices = |zones| match &self.pod.dra {
            Some(dra) => dra_rule::fits_without(dra, self.holders, &node, zones, victims),
            None => true,
        };
        numa_rule::fits_without(
            self.pod,
            &node,
            self.view,
            victims,
            self.reserved,
            self.s,
            devices,
        )
    }

    /// Every subset, smallest first; indices of the best working one.
    fn exact(&self, all: &[&PodMeta], budgets: &Budgets) -> Vec<usize> {
        let n = all.len();
        let mut masks: Vec<u32> = (1..1u32 << n).collect();
        masks.sort_by_key(|m| (m.count_ones(), *m));
        let pick = |mask: u32| -> Vec<usize> { (0..n).filter(|i| mask & 1 << i != 0).collect() };
        let mut working: Vec<u32> = Vec::new();
        let mut best: Option<((usize, usize, i32, i64), u32)> = None;
        for mask in masks {
            if let Some(((0, size, ..), _)) = best
                && mask.count_ones() as usize > size
            {
                break;
            }
            if working.iter().any(|w| mask & w == *w) {
                continue;
            }
            let set: Vec<&PodMeta> = pick(mask).into_iter().map(|i| all[i]).collect();
            if !self.works(&set) {
                continue;
            }
            working.push(mask);
            let (max, sum) = priorities(&set);
            let rank = (budgets.violations(&set), set.len(), max, sum);
            if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                best = Some((rank, mask));
            }
        }
        // `all` works, so some subset does.
        best.map_or_else(|| (0..n).collect(), |(_, mask)| pick(mask))
    }

    /// kube-scheduler's reprieve; indices of the remaining victims.
    fn reprieve(&self, all: &[&PodMeta], budgets: &Budgets) -> Vec<usize> {
        let mut order: Vec<usize> = (0..all.len()).collect();
        // Budget-protected first, then by priority, highest first.
        order.sort_by_key(|&i| (!budgets.covers(all[i]), std::cmp::Reverse(all[i].priority)));
        let mut evicted: Vec<usize> = (0..all.len()).collect();
        for i in order {
            let without: Vec<usize> = evicted.iter().copied().filter(|&j| j != i).collect();
            let set: Vec<&PodMeta> = without.iter().map(|&j| all[j]).collect();
            if self.works(&set) {
                evicted = without;
            }
        }
        evicted
    }
}
