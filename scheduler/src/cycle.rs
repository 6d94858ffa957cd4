//! One scheduling decision: filter every node (node-level filters, topology spread,
//! inter-pod affinity, then the NUMA fit of the node's Topology Manager policy/scope),
//! score the feasible ones, pick the best.
//!
//! Data flows in four steps:
//!
//! 1. [`PreFilter::prepare`] — once per decision: the cluster-wide counts the spread
//!    and inter-pod affinity filters need (one pass over every node's pods).
//! 2. Filter (`cycle/filter.rs`, [`score_node_in`]) — per node, in parallel chunks for
//!    large clusters (`cycle/sample.rs`): every filter in kube-scheduler's order (the
//!    first failure is the node's reason), the allocation of the pod's resource claims
//!    inside the zones the NUMA fit chose (`cycle/dra.rs`), then the node-local score
//!    (devices lined up, NUMA alignment and node-level balance).
//! 3. Score (`cycle/score.rs`): cluster-wide scores over the feasible nodes — preferred
//!    inter-pod affinity and `ScheduleAnyway` spread — each normalized to 0..=100
//!    across them and added with kube-scheduler's default weight (2).
//! 4. The best combined score wins.
//!
//! Pure over its inputs (a state snapshot and a topology lookup), so it is unit-tested
//! and benchmarked without an API server. The result does not depend on the chunking
//! (ties are broken by a hash of the node rotated per decision, [`tie`], not by
//! arrival order).

use crate::affinity::{self, AffinityFilter, NamespaceLabels};
use crate::explain::Reasons;
use crate::filter::{NodeInfo, PodFilterInput};
use crate::numa::{NodeTopology, NumaSet, PodRequest, ScoreConfig, TopologyError};
use crate::spread::{self, SpreadFilter};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tas_api::tas::NodesWithoutTopology;

/// What the cache knows of a node's topology.
#[derive(Debug, Clone)]
pub enum TopologyView {
    /// The node publishes no NodeResourceTopology.
    Missing,
    /// The node is in a TAS node group but has not published its NodeResourceTopology
    /// yet (or it was deleted): pods with exclusive resources wait for it.
    Unpublished,
    /// Its NodeResourceTopology could not be read.
    Invalid(Arc<TopologyError>),
    /// The (possibly pessimistic) view to decide on.
    Known(Arc<NodeTopology>),
}

/// The pod being scheduled, parsed once.
pub struct PodInput {
    /// Pod uid.
    pub uid: String,
    /// Node-level filter input (also the pod's labels, affinity terms and spread
    /// constraints).
    pub filter: PodFilterInput,
    /// NUMA request.
    pub request: PodRequest,
    /// The pod's resource claims and what their allocation reads (`None`: no claim).
    pub dra: Option<Arc<dra::DraInput>>,
}

/// Decision settings.
#[derive(Debug, Clone)]
pub struct CycleSettings {
    /// Scoring.
    pub score: ScoreConfig,
    /// Nodes without an NRT.
    pub nodes_without_topology: NodesWithoutTopology,
    /// Worker threads.
    pub parallelism: usize,
    /// How many feasible nodes are enough, and where the next decision starts.
    pub sampling: Sampling,
}

/// A feasible node and its score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Node name.
    pub node: String,
    /// Combined score (higher is better).
    pub score: u32,
    /// Tie-breaker (lower wins).
    pub tie: u64,
    /// The NUMA zones the pod's aligned resources would use there, as the filter's NUMA
    /// fit placed them (`None`: nothing aligned, or no topology).
    pub zones: Option<NumaSet>,
}

/// The outcome of a cycle.
#[derive(Debug)]
pub enum Decision {
    /// Bind to this node.
    Schedule(Candidate),
    /// No node fits; the reasons, aggregated.
    Unschedulable(Reasons),
}

/// The cluster as one decision sees it.
#[derive(Clone, Copy)]
pub struct ClusterView<'a> {
    /// Every node, with its bound and assumed pods.
    pub nodes: &'a [&'a NodeInfo],
    /// Every namespace's labels (for affinity terms' namespace selectors).
    pub namespaces: &'a NamespaceLabels,
}

/// The cluster-wide filters of one decision, prepared once.
pub struct PreFilter<'a> {
    /// `PodTopologySpread` (`DoNotSchedule` constraints).
    pub spread: SpreadFilter<'a>,
    /// `InterPodAffinity` (required terms, both directions).
    pub affinity: AffinityFilter<'a>,
}

impl<'a> PreFilter<'a> {
    /// Counts what the filters need for `pod` over the whole cluster.
    pub fn prepare(pod: &'a PodInput, cluster: &ClusterView<'a>) -> Self {
        Self {
            spread: SpreadFilter::prepare(&pod.filter, cluster.nodes),
            affinity: AffinityFilter::prepare(pod.filter.meta(), cluster.nodes, cluster.namespaces),
        }
    }

    /// Runs both filters on a node, in kube-scheduler's order.
    pub fn check(&self, node: &NodeInfo) -> Result<(), &'static str> {
        if self.spread.is_active() {
            self.spread
                .check(node)
                .map_err(spread::SpreadReason::message)?;
        }
        if self.affinity.is_active() {
            self.affinity
                .check(node)
                .map_err(affinity::AffinityReason::message)?;
        }
        Ok(())
    }
}

/// Reason text for a node without topology when such nodes are skipped.
pub const NO_TOPOLOGY: &str = "node(s) had no NodeResourceTopology";
/// Reason text for a node in a TAS node group without a topology (yet), for a pod
/// with exclusive resources.
pub const UNPUBLISHED_TOPOLOGY: &str =
    "node(s) in a TAS node group had not published their NodeResourceTopology yet";
/// Reason text for a node whose topology object is unreadable.
pub const INVALID_TOPOLOGY: &str = "node(s) had an invalid NodeResourceTopology";

/// Decide where `pod` goes, without namespace labels (a namespace selector of an
/// affinity term then selects no namespace by label).
pub fn decide<F>(pod: &PodInput, nodes: &[&NodeInfo], topology: F, s: &CycleSettings) -> Decision
where
    F: Fn(&str) -> TopologyView + Sync,
{
    static NO_NAMESPACES: LazyLock<NamespaceLabels> = LazyLock::new(NamespaceLabels::new);
    let cluster = ClusterView {
        nodes,
        namespaces: &NO_NAMESPACES,
    };
    decide_in(pod, &cluster, topology, s)
}

/// Decide where `pod` goes in `cluster`.
pub fn decide_in<F>(
    pod: &PodInput,
    cluster: &ClusterView<'_>,
    topology: F,
    s: &CycleSettings,
) -> Decision
where
    F: Fn(&str) -> TopologyView + Sync,
{
    decide_timed(pod, cluster, topology, s).0
}

/// How long each step of a decision took, and how many nodes passed the filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CycleTimings {
    /// Step 1: the cluster-wide counts ([`PreFilter::prepare`]).
    pub prefilter: Duration,
    /// Step 2: every filter and the node-local score on every node.
    pub filter: Duration,
    /// Steps 3 and 4: the cluster-wide scores and the choice.
    pub score: Duration,
    /// Nodes that passed every filter (among those evaluated, see [`Sampling`]).
    pub feasible: usize,
    /// Nodes the filters ran on.
    pub evaluated: usize,
}

/// [`decide_in`], with the time of each step.
pub fn decide_timed<F>(
    pod: &PodInput,
    cluster: &ClusterView<'_>,
    topology: F,
    s: &CycleSettings,
) -> (Decision, CycleTimings)
where
    F: Fn(&str) -> TopologyView + Sync,
{
    let started = Instant::now();
    let pre = PreFilter::prepare(pod, cluster);
    let prepared = Instant::now();
    let found = sample::filter_nodes(pod, cluster.nodes, &pre, &topology, s);
    let filtered = Instant::now();
    let count = found.feasible.len();
    let evaluated = found.evaluated;
    let decision = if count == 0 {
        Decision::Unschedulable(found.render_reasons(pod))
    } else {
        let mut feasible = found.feasible;
        if count > 1 {
            add_cluster_scores(pod, cluster, &mut feasible);
        }
        // Only the winner's name is copied.
        let (node, best) = feasible
            .into_iter()
            .reduce(|a, b| if b.1.beats(&a.1) { b } else { a })
            .expect("count > 0");
        Decision::Schedule(best.candidate(node))
    };
    let timings = CycleTimings {
        prefilter: prepared - started,
        filter: filtered - prepared,
        score: filtered.elapsed(),
        feasible: count,
        evaluated,
    };
    (decision, timings)
}

/// Every filter on one node — node-level, then the cluster-wide ones of `pre`, then the
/// NUMA fit — and the node-local score.
pub fn score_node_in(
    pod: &PodInput,
    node: &NodeInfo,
    pre: &PreFilter<'_>,
    view: TopologyView,
    s: &CycleSettings,
) -> Result<Candidate, String> {
    check_node(pod, node, Some(pre), || view, s, 0)
        .map(|sc| sc.candidate(node))
        .map_err(|r| r.render(&pod.request))
}

/// Filter and score one node by itself (node-level filters and the NUMA fit, without
/// the cluster-wide filters): its score, or why it does not fit.
pub fn score_node(
    pod: &PodInput,
    node: &NodeInfo,
    view: TopologyView,
    s: &CycleSettings,
) -> Result<Candidate, String> {
    check_node(pod, node, None, || view, s, 0)
        .map(|sc| sc.candidate(node))
        .map_err(|r| r.render(&pod.request))
}

pub mod dra;
mod filter;
mod sample;
mod score;
mod tie;
use filter::{Reject, check_node};
pub use filter::{dra_choice, numa_fit, numa_sensitive};
pub use sample::Sampling;
use score::{Scored, add_cluster_scores};

#[cfg(test)]
mod tests;
