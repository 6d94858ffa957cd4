//! [`score`]: how good a node's NUMA zones are for a pod, 0–100.
//!
//! A node is scored on its best zone: the strategies look at every single zone with
//! enough free of everything the pod aligns (its [`PodRequest::numa_request`]) and keep
//! the best score. When no single zone fits (a `restricted` pod spanning zones), the
//! smallest fitting zone sets are scored instead, as if each set were one zone. With
//! `cap` the free amount and `req` the request of a weighted resource:
//!
//! - MostAllocated: `Σ w·(req·100/cap) / Σ w` — pack zones;
//! - LeastAllocated: `Σ w·((cap−req)·100/cap) / Σ w` — spread (cap 0 or req > cap → 0);
//! - BalancedAllocation: `(1 − variance of req/cap)·100` over the weighted resources;
//! - FragmentationAware: the tightest fit in the zone the kubelet will pick, keeping
//!   the node's largest free zone whole ([`super::pack`]); MostAllocated over zone sets
//!   when no single zone fits;
//! - LeastNUMANodes: with `k` the fewest zones that fit and `unit = ⌊100/maxNUMA⌋`,
//!   `100 − k·unit`, plus `⌊unit/2⌋` when the closest fitting `k`-set is as close as the
//!   node's closest `k`-set (average NUMA distance).
//!
//! Only Guaranteed pods get NUMA-aligned CPU and memory; every other pod scores
//! [`NON_GUARANTEED_SCORE`] everywhere so this plugin does not steer them. A node where
//! nothing fits scores 0.

use super::align::{MAX_MASKS, Req, Reqs};
use super::mask::{bits, count_masks, masks_of_width};
use super::request::PodRequest;
use super::resources::{ResourceKind, Resources};
use super::topology::NodeTopology;

/// The best score.
pub const MAX_SCORE: u8 = 100;
/// The score of every node for a pod that is not Guaranteed.
pub const NON_GUARANTEED_SCORE: u8 = 0;

/// How to rank nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ScoringStrategy {
    /// Prefer the emptiest zone.
    LeastAllocated,
    /// Prefer the fullest zone that still fits.
    MostAllocated,
    /// Prefer zones whose resources end up equally used.
    BalancedAllocation,
    /// Prefer nodes where the pod fits in the fewest, closest zones.
    LeastNumaNodes,
    /// Prefer the node where the pod fills the zone the kubelet will give it most
    /// tightly, without breaking the node's largest free zone (see [`super::pack`]).
    /// The default: it packs better than the others in the packing simulation
    /// (`scheduler/tests/packing.rs`).
    #[default]
    FragmentationAware,
}

/// A strategy and its per-resource weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreConfig {
    /// The strategy.
    pub strategy: ScoringStrategy,
    /// Resource name → weight; resources not listed are not scored. Unused by
    /// LeastNUMANodes.
    pub weights: Vec<(String, i64)>,
}

impl Default for ScoreConfig {
    /// FragmentationAware with `cpu: 1, memory: 1`.
    fn default() -> Self {
        Self::new(ScoringStrategy::default())
    }
}

impl ScoreConfig {
    /// `strategy` with the default weights `cpu: 1, memory: 1`.
    pub fn new(strategy: ScoringStrategy) -> Self {
        Self {
            strategy,
            weights: vec![("cpu".to_owned(), 1), ("memory".to_owned(), 1)],
        }
    }
}

/// Scores `node` for `pod`; see the module documentation.
pub fn score(node: &NodeTopology, pod: &PodRequest, config: &ScoreConfig) -> u8 {
    if !pod.is_guaranteed() {
        return NON_GUARANTEED_SCORE;
    }
    let n = node.zone_count() as u32;
    let nres = node.resource_count();
    let free = node.free();
    let request = pod.numa_request();
    let mut reqs = Reqs::default();
    for (pos, entry) in request.entries().iter().enumerate() {
        if entry.kind == ResourceKind::Unaligned {
            continue;
        }
        if let Some(ri) = node.entry_index(entry) {
            reqs.push(Req {
                pos: pos as u32,
                res: ri as u32,
                group: 0,
                need: entry.amount,
            });
        }
    }
    let reqs = reqs.as_slice();
    if config.strategy == ScoringStrategy::FragmentationAware
        && let Some(s) = super::pack::best_fit_score(node, reqs, request, config)
    {
        return s;
    }

    for k in 1..=n {
        if count_masks(n, k) > MAX_MASKS {
            return 0;
        }
        let mut best: Option<u8> = None;
        let mut closest_any = u64::MAX;
        let mut closest_fit = u64::MAX;
        for mask in masks_of_width(n, k) {
            let fits = reqs
                .iter()
                .all(|r| sum(free, nres, mask, r.res as usize) >= r.need);
            if config.strategy == ScoringStrategy::LeastNumaNodes {
                let d = distance_sum(node, mask);
                closest_any = closest_any.min(d);
                if fits {
                    closest_fit = closest_fit.min(d);
                }
            } else if fits {
                let s = zone_score(node, free, mask, request, config);
                best = Some(best.map_or(s, |b| b.max(s)));
            }
        }
        if closest_fit != u64::MAX {
            let max_numa = node.config().max_numa_nodes.max(1);
            let unit = 100 / max_numa;
            let mut s = 100u32.saturating_sub(k.saturating_mul(unit));
            if closest_fit == closest_any {
                s += unit / 2;
            }
            return s.min(u32::from(MAX_SCORE)) as u8;
        }
        if let Some(s) = best {
            return s;
        }
    }
    0
}

fn sum(free: &[i64], nres: usize, mask: u64, res: usize) -> i64 {
    bits(mask).fold(0i64, |acc, z| {
        acc.saturating_add(free[z as usize * nres + res])
    })
}

/// Sum of the distances between every ordered pair of zones in `mask` (self included):
/// proportional to the average distance the kubelet compares, for a fixed width.
fn distance_sum(node: &NodeTopology, mask: u64) -> u64 {
    bits(mask)
        .flat_map(|a| bits(mask).map(move |b| (a, b)))
        .map(|(a, b)| u64::from(node.zone_distance(a as usize, b as usize)))
        .sum()
}

/// The strategy's score of one zone set, treated as a single zone.
fn zone_score(
    node: &NodeTopology,
    free: &[i64],
    mask: u64,
    request: &Resources,
    config: &ScoreConfig,
) -> u8 {
    let nres = node.resource_count();
    let weighted = config
        .weights
        .iter()
        .filter(|(_, w)| *w > 0)
        .map(|(name, w)| {
            let cap = node
                .named_index(name)
                .map_or(0, |ri| sum(free, nres, mask, ri));
            (
                i128::from(super::pack::requested(request, name)),
                i128::from(cap),
                i128::from(*w),
            )
        });
    let score = match config.strategy {
        ScoringStrategy::MostAllocated
        | ScoringStrategy::LeastAllocated
        | ScoringStrategy::FragmentationAware => {
            let most = config.strategy != ScoringStrategy::LeastAllocated;
            let (mut total, mut weights) = (0i128, 0i128);
            for (req, cap, w) in weighted {
                let s = if cap <= 0 || req > cap {
                    if most && cap > 0 { 100 } else { 0 }
                } else if most {
                    req * 100 / cap
                } else {
                    (cap - req) * 100 / cap
                };
                total += w * s;
                weights += w;
            }
            if weights == 0 { 0 } else { total / weights }
        }
        ScoringStrategy::BalancedAllocation => {
            let fractions = || {
                weighted
                    .clone()
                    .filter(|&(_, cap, _)| cap > 0)
                    .map(|(req, cap, w)| ((req as f64 / cap as f64).min(1.0), w as f64))
            };
            let weights: f64 = fractions().map(|(_, w)| w).sum();
            if weights == 0.0 {
                0
            } else {
                let mean = fractions().map(|(f, w)| f * w).sum::<f64>() / weights;
                let variance = fractions()
                    .map(|(f, w)| w * (f - mean).powi(2))
                    .sum::<f64>()
                    / weights;
                ((1.0 - variance) * 100.0) as i128
            }
        }
        ScoringStrategy::LeastNumaNodes => 0,
    };
    score.clamp(0, i128::from(MAX_SCORE)) as u8
}
