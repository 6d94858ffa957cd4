//! The score phase: the node-local score of a feasible node (its NUMA score, then
//! node-level balance), and the cluster-wide scores over all feasible nodes —
//! preferred inter-pod affinity and `ScheduleAnyway` spread, each normalized to 0..=100
//! and added with kube-scheduler's default weight.

use super::{Candidate, ClusterView, PodInput};
use crate::affinity::{self, AffinityScore};
use crate::filter::NodeInfo;
use crate::numa::{self, NumaSet, ScoreConfig};
use crate::spread::{self, SpreadScore};

/// kube-scheduler's default weight of the `InterPodAffinity` and `PodTopologySpread`
/// scores.
const CLUSTER_SCORE_WEIGHT: u32 = 2;

/// Adds the normalized preferred inter-pod affinity and soft spread scores.
pub(super) fn add_cluster_scores(
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

/// A feasible node's score before its name is copied into a [`Candidate`], and the
/// zones its NUMA fit chose.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scored {
    pub(super) score: u32,
    pub(super) tie: u64,
    pub(super) zones: Option<NumaSet>,
}

impl Scored {
    pub(super) fn candidate(self, node: &NodeInfo) -> Candidate {
        Candidate {
            node: node.name().to_owned(),
            score: self.score,
            tie: self.tie,
            zones: self.zones,
        }
    }

    /// Higher score wins, then the lower tie-breaker.
    pub(super) fn beats(&self, other: &Scored) -> bool {
        (self.score, std::cmp::Reverse(self.tie)) > (other.score, std::cmp::Reverse(other.tie))
    }
}

/// Node-level score 0..=100 for cpu and memory after placing the pod, following the
/// strategy: MostAllocated packs (FragmentationAware packs weakly, as a tie-break),
/// everything else spreads.
pub(super) fn node_resource_score(pod: &PodInput, node: &NodeInfo, score: &ScoreConfig) -> u32 {
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
