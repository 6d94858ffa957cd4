//! Sets of NUMA nodes as bit masks, and the hints resource managers give about them.
//!
//! Bit `i` stands for NUMA node `i`. A simulated node has at most
//! [`MAX_NUMA_NODES`] zones, the Topology Manager's default limit.

use std::fmt;

/// Most NUMA nodes a simulated node may have (the kubelet's `max-allowable-numa-nodes`
/// default).
pub const MAX_NUMA_NODES: u32 = 8;

/// A set of NUMA node ids: bit `i` is node `i`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NumaMask(u64);

impl NumaMask {
    /// No node.
    pub const EMPTY: NumaMask = NumaMask(0);

    /// The set of the given node ids.
    pub fn of(ids: impl IntoIterator<Item = u32>) -> Self {
        Self(ids.into_iter().fold(0, |bits, id| bits | (1 << id)))
    }

    /// Nodes `0..n`.
    pub fn all(n: u32) -> Self {
        Self((1u64 << n) - 1)
    }

    /// The raw bits.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// How many nodes are in the set.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether node `id` is in the set.
    pub fn contains(self, id: u32) -> bool {
        id < 64 && self.0 & (1 << id) != 0
    }

    /// The nodes of both sets.
    pub fn and(self, other: NumaMask) -> NumaMask {
        NumaMask(self.0 & other.0)
    }

    /// Whether every node of `self` is in `other`.
    pub fn is_subset_of(self, other: NumaMask) -> bool {
        self.0 & !other.0 == 0
    }

    /// Fewer nodes, or as many and numerically lower: the kubelet's order of preference
    /// between two masks.
    pub fn is_narrower_than(self, other: NumaMask) -> bool {
        (self.count(), self.0) < (other.count(), other.0)
    }

    /// The node ids, ascending.
    pub fn ids(self) -> impl Iterator<Item = u32> {
        (0..64).filter(move |&id| self.contains(id))
    }

    /// Every non-empty subset of nodes `0..n`, by size then numerically.
    pub fn subsets(n: u32) -> Vec<NumaMask> {
        let mut masks: Vec<NumaMask> = (1..1u64 << n).map(NumaMask).collect();
        masks.sort_by_key(|m| (m.count(), m.0));
        masks
    }
}

impl fmt::Debug for NumaMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.ids()).finish()
    }
}

impl fmt::Display for NumaMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A topology hint: a NUMA affinity (`None` = any node will do) and whether it is
/// preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hint {
    /// The nodes; `None` means "any".
    pub affinity: Option<NumaMask>,
    /// Whether the provider prefers it.
    pub preferred: bool,
}

impl Hint {
    /// A hint on `mask`.
    pub fn new(mask: NumaMask, preferred: bool) -> Self {
        Self {
            affinity: Some(mask),
            preferred,
        }
    }

    /// "Any node", preferred or not.
    pub fn any(preferred: bool) -> Self {
        Self {
            affinity: None,
            preferred,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_come_by_size_then_value() {
        let masks = NumaMask::subsets(3);
        let shown: Vec<String> = masks.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            shown,
            [
                "{0}",
                "{1}",
                "{2}",
                "{0, 1}",
                "{0, 2}",
                "{1, 2}",
                "{0, 1, 2}"
            ]
        );
    }

    #[test]
    fn narrower_means_fewer_bits_then_lower() {
        let a = NumaMask::of([0, 3]);
        let b = NumaMask::of([1, 2]);
        assert!(b.is_narrower_than(a));
        assert!(NumaMask::of([3]).is_narrower_than(b));
        assert!(!a.is_narrower_than(a));
        assert!(NumaMask::of([1]).is_subset_of(b));
        assert_eq!(NumaMask::all(4).count(), 4);
    }
}
