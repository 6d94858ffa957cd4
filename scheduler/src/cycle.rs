//! One scheduling decision: filter every node (node-level filters, then the NUMA fit of
//! the node's Topology Manager policy/scope), score the feasible ones, pick the best.
//!
//! Pure over its inputs (a state snapshot and a topology lookup), so it is unit-tested
//! and benchmarked without an API server. Large clusters are filtered in parallel
//! chunks; the result does not depend on the chunking (ties are broken by a hash of pod
//! and node, not by arrival order).

use crate::explain::Reasons;
use crate::filter::{self, NodeInfo, PodFilterInput};
use crate::numa::{self, NodeTopology, PodRequest, ScoreConfig, TopologyError};
use std::sync::Arc;
use tas_api::tas::NodesWithoutTopology;

/// What the cache knows of a node's topology.
#[derive(Debug, Clone)]
pub enum TopologyView {
    /// The node publishes no NodeResourceTopology.
    Missing,
    /// Its NodeResourceTopology could not be read.
    Invalid(Arc<TopologyError>),
    /// The (possibly pessimistic) view to decide on.
    Known(Arc<NodeTopology>),
}

/// The pod being scheduled, parsed once.
pub struct PodInput {
    /// Pod uid (tie-breaking).
    pub uid: String,
    /// Node-level filter input.
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

/// Reason text for a node without topology when such nodes are skipped.
pub const NO_TOPOLOGY: &str = "node(s) had no NodeResourceTopology";
/// Reason text for a node whose topology object is unreadable.
pub const INVALID_TOPOLOGY: &str = "node(s) had an invalid NodeResourceTopology";

/// Below this many nodes per worker, splitting is not worth a thread.
const MIN_NODES_PER_WORKER: usize = 256;

/// Decide where `pod` goes.
pub fn decide<F>(pod: &PodInput, nodes: &[&NodeInfo], topology: F, s: &CycleSettings) -> Decision
where
    F: Fn(&str) -> TopologyView + Sync,
{
    let workers = s.parallelism.min(nodes.len() / MIN_NODES_PER_WORKER).max(1);
    let (best, reasons) = if workers == 1 {
        evaluate(pod, nodes, &topology, s)
    } else {
        let chunk = nodes.len().div_ceil(workers);
        std::thread::scope(|scope| {
            let handles: Vec<_> = nodes
                .chunks(chunk)
                .map(|part| scope.spawn(|| evaluate(pod, part, &topology, s)))
                .collect();
            let mut best: Option<Candidate> = None;
            let mut reasons = Reasons::default();
            for h in handles {
                // A worker only panics on a bug; treat its nodes as unevaluated.
                if let Ok((b, r)) = h.join() {
                    best = better(best, b);
                    reasons.merge(r);
                }
            }
            (best, reasons)
        })
    };
    match best {
        Some(c) => Decision::Schedule(c),
        None => Decision::Unschedulable(reasons),
    }
}

fn evaluate<F>(
    pod: &PodInput,
    nodes: &[&NodeInfo],
    topology: &F,
    s: &CycleSettings,
) -> (Option<Candidate>, Reasons)
where
    F: Fn(&str) -> TopologyView,
{
    let mut best = None;
    let mut reasons = Reasons::default();
    for node in nodes {
        match score_node(pod, node, topology(node.name()), s) {
            Ok(c) => best = better(best, Some(c)),
            Err(reason) => reasons.add(reason),
        }
    }
    (best, reasons)
}

/// Filter and score one node: its score, or why it does not fit.
pub fn score_node(
    pod: &PodInput,
    node: &NodeInfo,
    view: TopologyView,
    s: &CycleSettings,
) -> Result<Candidate, String> {
    filter::filter_node(&pod.filter, node).map_err(|r| r.to_string())?;
    let numa_score = match view {
        TopologyView::Known(topo) => {
            let node_level = |r: &str| node.allocatable().resources.scalar(r) > 0 || is_core(r);
            numa::fit(&topo, &pod.request, &node_level).map_err(|u| u.to_string())?;
            numa::score(&topo, &pod.request, &s.score)
        }
        TopologyView::Invalid(_) => return Err(INVALID_TOPOLOGY.to_owned()),
        TopologyView::Missing => match s.nodes_without_topology {
            NodesWithoutTopology::Schedule => 0,
            NodesWithoutTopology::Skip => return Err(NO_TOPOLOGY.to_owned()),
        },
    };
    let node_score = node_resource_score(pod, node, &s.score);
    Ok(Candidate {
        node: node.name().to_owned(),
        // NUMA alignment matters most; node-level balance breaks near-ties.
        score: u32::from(numa_score) * 2 + node_score,
        tie: fnv1a(pod.uid.as_bytes(), node.name().as_bytes()),
    })
}

fn is_core(r: &str) -> bool {
    matches!(r, "cpu" | "memory" | "ephemeral-storage")
}

/// Node-level score 0..=100 for cpu and memory after placing the pod, following the
/// strategy: MostAllocated packs, everything else spreads.
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
    let fracs: Vec<f64> = parts.into_iter().flatten().collect();
    if fracs.is_empty() {
        return 0;
    }
    let mean = fracs.iter().sum::<f64>() / fracs.len() as f64;
    let value = match score.strategy {
        numa::ScoringStrategy::MostAllocated => mean,
        _ => 1.0 - mean,
    };
    (value * 100.0).round() as u32
}

fn better(a: Option<Candidate>, b: Option<Candidate>) -> Option<Candidate> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => {
            if (b.score, std::cmp::Reverse(b.tie)) > (a.score, std::cmp::Reverse(a.tie)) {
                Some(b)
            } else {
                Some(a)
            }
        }
    }
}

fn fnv1a(a: &[u8], b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in a.iter().chain([0u8].iter()).chain(b) {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests;
