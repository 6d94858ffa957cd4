//! One scheduling decision: filter every node (node-level filters, topology spread,
//! inter-pod affinity, then the NUMA fit of the node's Topology Manager policy/scope),
//! score the feasible ones, pick the best.
//!
//! Data flows in four steps:
//!
//! 1. [`PreFilter::prepare`] — once per decision: the cluster-wide counts the spread
//!    and inter-pod affinity filters need (one pass over every node's pods).
//! 2. [`score_node_in`] — per node, in parallel chunks for large clusters: every filter
//!    in kube-scheduler's order (the first failure is the node's reason), then the
//!    node-local score (NUMA alignment and node-level balance).
//! 3. Cluster-wide scores over the feasible nodes — preferred inter-pod affinity and
//!    `ScheduleAnyway` spread — each normalized to 0..=100 across them and added with
//!    kube-scheduler's default weight (2).
//! 4. The best combined score wins.
//!
//! Pure over its inputs (a state snapshot and a topology lookup), so it is unit-tested
//! and benchmarked without an API server. The result does not depend on the chunking
//! (ties are broken by a hash of pod and node, not by arrival order).

use crate::affinity::{self, AffinityFilter, AffinityScore, NamespaceLabels};
use crate::explain::Reasons;
use crate::filter::{self, NodeInfo, PodFilterInput};
use crate::numa::{self, NodeTopology, PodRequest, ScoreConfig, TopologyError};
use crate::spread::{self, SpreadFilter, SpreadScore};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tas_api::hash::fnv1a64_pair;
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
    /// Pod uid (tie-breaking).
    pub uid: String,
    /// Node-level filter input (also the pod's labels, affinity terms and spread
    /// constraints).
    pub filter: PodFilterInput,
    /// NUMA request.
    pub request: PodRequest,
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
/// kube-scheduler's default weight of the `InterPodAffinity` and `PodTopologySpread`
/// scores.
const CLUSTER_SCORE_WEIGHT: u32 = 2;

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
        Decision::Unschedulable(found.render_reasons())
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

/// Adds the normalized preferred inter-pod affinity and soft spread scores.
fn add_cluster_scores(
    pod: &PodInput,
    cluster: &ClusterView<'_>,
    feasible: &mut [(&NodeInfo, Scored)],
) {
    let meta = pod.filter.meta();
    let affinity = AffinityScore::prepare(meta, cluster.nodes, cluster.namespaces);
    if affinity.is_none() && pod.filter.spread().iter().all(|c| c.hard) {
        return;
    }
    let mut extra = vec![0i64; feasible.len()];
    if let Some(a) = affinity {
        let mut raw: Vec<i64> = feasible.iter().map(|(n, _)| a.raw(n)).collect();
        affinity::score::normalize(&mut raw);
        extra.iter_mut().zip(raw).for_each(|(e, r)| *e += r);
    }
    let nodes: Vec<&NodeInfo> = feasible.iter().map(|(n, _)| *n).collect();
    if let Some(sp) = SpreadScore::prepare(&pod.filter, cluster.nodes, &nodes) {
        let raw: Vec<Option<i64>> = nodes.iter().map(|n| sp.raw(n)).collect();
        let normalized = spread::score::normalize(&raw);
        extra.iter_mut().zip(normalized).for_each(|(e, r)| *e += r);
    }
    for ((_, c), e) in feasible.iter_mut().zip(extra) {
        let e = u32::try_from(e.max(0)).unwrap_or(u32::MAX);
        c.score = c.score.saturating_add(CLUSTER_SCORE_WEIGHT * e);
    }
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
    check_node(pod, node, Some(pre), view, s)
        .map(|sc| sc.candidate(node))
        .map_err(|r| r.to_string())
}

/// Filter and score one node by itself (node-level filters and the NUMA fit, without
/// the cluster-wide filters): its score, or why it does not fit.
pub fn score_node(
    pod: &PodInput,
    node: &NodeInfo,
    view: TopologyView,
    s: &CycleSettings,
) -> Result<Candidate, String> {
    check_node(pod, node, None, view, s)
        .map(|sc| sc.candidate(node))
        .map_err(|r| r.to_string())
}

/// Every filter on one node and its node-local score, without rendering anything:
/// the hot path of a decision.
fn check_node(
    pod: &PodInput,
    node: &NodeInfo,
    pre: Option<&PreFilter<'_>>,
    view: TopologyView,
    s: &CycleSettings,
) -> Result<Scored, Reject> {
    filter::filter_node(&pod.filter, node).map_err(Reject::Filter)?;
    if let Some(pre) = pre {
        pre.check(node).map_err(Reject::Text)?;
    }
    let config = numa::node_strategy::node_config(node.name(), node.labels(), &s.score);
    let numa_score = match view {
        TopologyView::Known(topo) => {
            numa_fit(&topo, &pod.request, node).map_err(Reject::Numa)?;
            numa::score(&topo, &pod.request, &config)
        }
        TopologyView::Invalid(_) => return Err(Reject::Text(INVALID_TOPOLOGY)),
        TopologyView::Unpublished if numa_sensitive(&pod.request) => {
            return Err(Reject::Text(UNPUBLISHED_TOPOLOGY));
        }
        TopologyView::Missing | TopologyView::Unpublished => match s.nodes_without_topology {
            NodesWithoutTopology::Schedule => 0,
            NodesWithoutTopology::Skip => return Err(Reject::Text(NO_TOPOLOGY)),
        },
    };
    let node_score = node_resource_score(pod, node, &config);
    Ok(Scored {
        // NUMA alignment matters most; node-level balance breaks near-ties.
        score: u32::from(numa_score) * 2 + node_score,
        tie: fnv1a64_pair(pod.uid.as_bytes(), node.name().as_bytes()),
    })
}

/// A feasible node's score before its name is copied into a [`Candidate`].
#[derive(Debug, Clone, Copy)]
struct Scored {
    score: u32,
    tie: u64,
}

impl Scored {
    fn candidate(self, node: &NodeInfo) -> Candidate {
        Candidate {
            node: node.name().to_owned(),
            score: self.score,
            tie: self.tie,
        }
    }

    /// Higher score wins, then the lower tie-breaker.
    fn beats(&self, other: &Scored) -> bool {
        (self.score, std::cmp::Reverse(self.tie)) > (other.score, std::cmp::Reverse(other.tie))
    }
}

/// Why a node was rejected, kept as it came from the filter; rendered to text only when
/// the pod fits nowhere.
#[derive(Debug)]
enum Reject {
    Filter(filter::FilterReason),
    Numa(numa::Unfit),
    Text(&'static str),
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Filter(r) => r.fmt(f),
            Self::Numa(u) => u.fmt(f),
            Self::Text(t) => f.write_str(t),
        }
    }
}

/// Whether the kubelet may pin part of this pod to NUMA zones (exclusive CPUs,
/// hugepages, devices): such a pod never goes to a TAS node without its topology.
pub fn numa_sensitive(request: &PodRequest) -> bool {
    crate::cache::holds_exclusive_resources(request)
}

/// The NUMA fit of `request` on `topology`, the node-level resources judged from
/// `node`'s allocatable.
pub fn numa_fit(
    topology: &NodeTopology,
    request: &PodRequest,
    node: &NodeInfo,
) -> Result<numa::Placement, numa::Unfit> {
    let node_level = |r: &str| node.allocatable().resources.scalar(r) > 0 || is_core(r);
    numa::fit(topology, request, &node_level)
}

fn is_core(r: &str) -> bool {
    matches!(r, "cpu" | "memory" | "ephemeral-storage")
}

/// Node-level score 0..=100 for cpu and memory after placing the pod, following the
/// strategy: MostAllocated packs (FragmentationAware packs weakly, as a tie-break),
/// everything else spreads.
fn node_resource_score(pod: &PodInput, node: &NodeInfo, score: &ScoreConfig) -> u32 {
    let alloc = &node.allocatable().resources;
    let used = node.requested();
    let req = pod.filter.request();
    let frac = |cap: i64, used: i64, want: i64| -> Option<f64> {
        (cap > 0).then(|| ((used + want) as f64 / cap as f64).clamp(0.0, 1.0))
    };
    let parts = [
        frac(alloc.milli_cpu, used.milli_cpu, req.milli_cpu),
        frac(alloc.memory, used.memory, req.memory),
    ];
    let (sum, n) = parts
        .into_iter()
        .flatten()
        .fold((0.0, 0u32), |(sum, n), f| (sum + f, n + 1));
    if n == 0 {
        return 0;
    }
    let mean = sum / f64::from(n);
    let value = match score.strategy {
        numa::ScoringStrategy::MostAllocated => mean,
        // Node fullness only breaks ties between equally tight zones.
        numa::ScoringStrategy::FragmentationAware => mean / 10.0,
        _ => 1.0 - mean,
    };
    (value * 100.0).round() as u32
}

mod sample;
pub use sample::Sampling;

#[cfg(test)]
mod tests;
