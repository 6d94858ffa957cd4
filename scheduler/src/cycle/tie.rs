//! The tie-break among feasible nodes of equal score: a hash of the node's name,
//! rotated by an offset that moves on with every decision.
//!
//! Packing sends a pod to the node whose zone it fills most tightly. When several
//! nodes score the same (say, empty nodes), a tie-break that favours the same node
//! decision after decision queues consecutive pods on that node, whose binds may then
//! leave one at a time (the writer keeps most binds to one node in decision order).
//! Rotating the tie-break sends consecutive tied pods to different nodes, so their
//! binds go side by side, without changing which nodes tie.
//!
//! The winner among tied nodes is the one whose hash comes first at or after the
//! decision's offset on the 64-bit ring. The hash is FNV-1a of the name, finished with
//! MurmurHash3's 64-bit mixer: FNV alone puts names that differ in their last
//! characters (`node-1`, `node-2`, ...) next to one another on the ring, where one of
//! them would win nearly every offset. The offset moves by ⌊2⁶⁴/φ⌋ per decision (a
//! Weyl sequence), so successive offsets land far apart and spread over the whole ring.
//! Deterministic: the same nodes and the same number of earlier decisions give the
//! same winner, on any number of workers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tas_api::hash::fnv1a64;

/// ⌊2⁶⁴/φ⌋, odd: the offset visits every point of the ring before repeating.
const STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// The decisions counted so far, shared by the clones of the cycle settings.
#[derive(Debug, Clone, Default)]
pub struct TieRotation(Arc<AtomicU64>);

impl TieRotation {
    /// The offset of the next decision (and counts it).
    pub(super) fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed).wrapping_mul(STEP)
    }
}

/// The tie-breaker of `node` in a decision with `rotation` (lower wins).
pub(super) fn tie(rotation: u64, node: &str) -> u64 {
    mix(fnv1a64(node.as_bytes())).wrapping_sub(rotation)
}

/// MurmurHash3's 64-bit finaliser: every input bit moves about half the output bits.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn winner(rotation: u64, nodes: &[String]) -> String {
        nodes
            .iter()
            .min_by_key(|n| tie(rotation, n))
            .cloned()
            .unwrap_or_default()
    }

    /// Among tied nodes, consecutive decisions pick different ones, and over a few
    /// rounds every one of them.
    #[test]
    fn consecutive_decisions_spread_over_the_tied_nodes() {
        let nodes: Vec<String> = (0..8).map(|i| format!("node-{i}")).collect();
        let rotation = TieRotation::default();
        let winners: Vec<String> = (0..64).map(|_| winner(rotation.next(), &nodes)).collect();
        let repeats = winners.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(repeats <= 64 / 4, "{repeats} repeats in {winners:?}");
        for node in &nodes {
            assert!(winners.contains(node), "{node} never won: {winners:?}");
        }
    }

    /// The same count of earlier decisions gives the same winner.
    #[test]
    fn the_rotation_is_deterministic() {
        let nodes: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
        let (a, b) = (TieRotation::default(), TieRotation::default());
        let first: Vec<String> = (0..10).map(|_| winner(a.next(), &nodes)).collect();
        let second: Vec<String> = (0..10).map(|_| winner(b.next(), &nodes)).collect();
        assert_eq!(first, second);
        assert_eq!(TieRotation::default().next(), 0);
    }
}
