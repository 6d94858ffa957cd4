//! Step 2 of a decision: run the filters over the nodes on a persistent worker pool,
//! stopping once enough feasible nodes are found (kube-scheduler's
//! `percentageOfNodesToScore`).
//!
//! The nodes are walked from a rotating start index, so every node gets its turn over
//! successive decisions. They are evaluated in blocks, each split across the workers;
//! after a block, if enough nodes are feasible, the walk stops and only the first ones
//! in walk order are kept. So the outcome depends on the start index, never on the
//! number of workers or on their timing. Sampling only limits the candidates: every
//! kept node passed every filter, the NUMA fit included.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::{CycleSettings, PodInput, PreFilter, Reject, Scored, TopologyView, check_node};
use crate::explain::Reasons;
use crate::filter::NodeInfo;

/// Below this many nodes per worker, splitting is not worth a task.
const MIN_NODES_PER_WORKER: usize = 256;
/// Clusters smaller than this are always evaluated whole, and at least this many
/// feasible nodes are looked for (kube-scheduler's `minFeasibleNodesToFind`).
const MIN_FEASIBLE_NODES: usize = 100;
/// The adaptive percentage never goes below this
/// (kube-scheduler's `minFeasibleNodesPercentageToFind`).
const MIN_ADAPTIVE_PERCENTAGE: usize = 5;

/// How many feasible nodes a decision looks for, and where the next one starts.
#[derive(Debug, Clone, Default)]
pub struct Sampling {
    /// Percentage of the nodes to find feasible before the filters stop: 1–100, or 0
    /// for adaptive (50 % minus one point per 125 nodes, at least 5 %); at least 100
    /// nodes either way.
    pub percentage: u32,
    /// The walk's start index for the next decision (shared by the clones of these
    /// settings).
    pub next_start: Arc<AtomicUsize>,
    /// Where the tie-break among equal scores starts for the next decision
    /// ([`super::tie`]).
    pub ties: super::tie::TieRotation,
}

impl Sampling {
    /// Sampling with `percentage` (0: adaptive).
    pub fn new(percentage: u32) -> Self {
        Self {
            percentage,
            next_start: Arc::default(),
            ties: super::tie::TieRotation::default(),
        }
    }

    /// How many feasible nodes are enough among `nodes` nodes.
    pub fn feasible_to_find(&self, nodes: usize) -> usize {
        if nodes < MIN_FEASIBLE_NODES || self.percentage >= 100 {
            return nodes;
        }
        let percentage = match self.percentage as usize {
            0 => 50usize
                .saturating_sub(nodes / 125)
                .max(MIN_ADAPTIVE_PERCENTAGE),
            p => p,
        };
        (nodes * percentage / 100).max(MIN_FEASIBLE_NODES)
    }
}

/// The nodes of one walk: the feasible ones with their scores, the rejected ones with
/// their reasons (rendered only if none is feasible), and how many were evaluated.
pub(super) struct Found<'n> {
    pub feasible: Vec<(&'n NodeInfo, Scored)>,
    rejected: Vec<(&'n NodeInfo, Reject)>,
    pub evaluated: usize,
}

impl Found<'_> {
    /// The rejected nodes' reasons for `pod`, rendered and counted.
    pub fn render_reasons(&self, pod: &PodInput) -> Reasons {
        let mut reasons = Reasons::default();
        for (node, reject) in &self.rejected {
            reasons.add(node.name(), reject.render(&pod.request));
        }
        reasons
    }
}

/// A block's results, by position in walk order for the feasible ones.
type Part<'n> = (
    Vec<(usize, &'n NodeInfo, Scored)>,
    Vec<(&'n NodeInfo, Reject)>,
);

/// Runs the filters and the node-local score over `nodes` until enough are feasible.
pub(super) fn filter_nodes<'n, F>(
    pod: &PodInput,
    nodes: &[&'n NodeInfo],
    pre: &PreFilter<'_>,
    topology: &F,
    s: &CycleSettings,
) -> Found<'n>
where
    F: Fn(&str) -> TopologyView + Sync,
{
    let total = nodes.len();
    let rotation = s.sampling.ties.next();
    let want = s.sampling.feasible_to_find(total);
    let sampled = want < total;
    let start = if sampled {
        s.sampling.next_start.load(Ordering::Relaxed) % total
    } else {
        0
    };
    let workers = s.parallelism.min(total / MIN_NODES_PER_WORKER).max(1);
    // Whole cluster at once when nothing stops early; else blocks of a few per worker.
    let block = if sampled {
        MIN_NODES_PER_WORKER * workers
    } else {
        total.max(1)
    };
    let run = |range: Range<usize>| -> Part<'n> {
        let mut part: Part<'n> = (Vec::new(), Vec::new());
        for i in range {
            let node = nodes[(start + i) % total];
            match check_node(pod, node, Some(pre), || topology(node.name()), s, rotation) {
                Ok(sc) => part.0.push((i, node, sc)),
                Err(r) => part.1.push((node, r)),
            }
        }
        part
    };
    let mut feasible: Vec<(usize, &'n NodeInfo, Scored)> = Vec::new();
    let mut rejected = Vec::new();
    let mut evaluated = 0;
    while evaluated < total && feasible.len() < want {
        let end = (evaluated + block).min(total);
        let len = end - evaluated;
        let per = len.div_ceil(workers.min(len.div_ceil(MIN_NODES_PER_WORKER)).max(1));
        let ranges: Vec<Range<usize>> = (evaluated..end)
            .step_by(per)
            .map(|a| a..(a + per).min(end))
            .collect();
        let parts: Vec<Part<'n>> = if ranges.len() == 1 {
            ranges.into_iter().map(run).collect()
        } else {
            // A worker only panics on a bug; its nodes then count as unevaluated.
            ranges
                .into_par_iter()
                .filter_map(|r| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(r))).ok()
                })
                .collect()
        };
        for (f, r) in parts {
            feasible.extend(f);
            rejected.extend(r);
        }
        evaluated = end;
    }
    // Parts arrive in walk order; keep the first `want` feasible nodes.
    let consumed = if feasible.len() > want {
        feasible.truncate(want);
        feasible.last().map_or(evaluated, |(i, _, _)| i + 1)
    } else {
        evaluated
    };
    if sampled {
        s.sampling
            .next_start
            .store((start + consumed) % total, Ordering::Relaxed);
    }
    Found {
        feasible: feasible.into_iter().map(|(_, n, sc)| (n, sc)).collect(),
        rejected,
        evaluated,
    }
}
