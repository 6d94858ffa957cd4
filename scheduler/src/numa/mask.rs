//! NUMA bitmasks.
//!
//! [`NumaSet`] is the public form: bit `i` stands for NUMA id `i`, exactly like the
//! kubelet's 64-bit NUMA bitmask (which is why NUMA ids above 63 are refused). Inside
//! the fit, masks are over *zone indices* (position in the node's id-sorted zone list)
//! so arrays stay dense with sparse ids; the id order and the index order agree, so
//! "numerically lowest mask" picks the same set in both forms.

use std::fmt;

/// A set of NUMA ids (0–63).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NumaSet(u64);

impl NumaSet {
    /// The set with exactly these bits.
    pub const fn from_bits(bits: u64) -> Self {
        Self(bits)
    }

    /// The set of these ids; ids above 63 are ignored.
    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> Self {
        Self(
            ids.into_iter()
                .filter(|&id| id < 64)
                .fold(0, |bits, id| bits | 1 << id),
        )
    }

    /// The raw bitmask (bit `i` = NUMA id `i`).
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Whether `id` is in the set.
    pub const fn contains(self, id: u32) -> bool {
        id < 64 && self.0 & (1 << id) != 0
    }

    /// Number of NUMA ids in the set.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The ids, ascending.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        bits(self.0)
    }
}

impl fmt::Debug for NumaSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for NumaSet {
    /// `{0,2}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, id) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{id}")?;
        }
        f.write_str("}")
    }
}

/// The positions of the set bits of `mask`, ascending.
pub(crate) fn bits(mut mask: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let bit = mask.trailing_zeros();
        mask &= mask - 1;
        Some(bit)
    })
}

/// Every mask over `n` bits with exactly `width` bits set, in ascending numeric order
/// (Gosper's hack).
pub(crate) fn masks_of_width(n: u32, width: u32) -> impl Iterator<Item = u64> {
    let end: u128 = 1 << n.min(64);
    let mut next: u128 = if width == 0 || width > n.min(64) {
        end
    } else {
        (1 << width) - 1
    };
    std::iter::from_fn(move || {
        if next >= end {
            return None;
        }
        let current = next;
        let lowest = current & current.wrapping_neg();
        let ripple = current + lowest;
        next = (((ripple ^ current) >> 2) / lowest) | ripple;
        // `current < end <= 2^64`, so it fits.
        Some(current as u64)
    })
}

/// Number of masks [`masks_of_width`] yields, saturating.
pub(crate) fn count_masks(n: u32, width: u32) -> u64 {
    let n = n.min(64);
    if width == 0 || width > n {
        return 0;
    }
    let width = width.min(n - width);
    (0..u64::from(width)).fold(1u64, |acc, i| {
        acc.saturating_mul(u64::from(n) - i) / (i + 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_of_width_are_ascending_and_complete() {
        let got: Vec<u64> = masks_of_width(4, 2).collect();
        assert_eq!(got, [0b0011, 0b0101, 0b0110, 0b1001, 0b1010, 0b1100]);
        for n in 0..=10 {
            for w in 0..=n + 1 {
                let all: Vec<u64> = masks_of_width(n, w).collect();
                let expected: Vec<u64> = (1..1u64 << n).filter(|m| m.count_ones() == w).collect();
                assert_eq!(all, expected, "n={n} w={w}");
                assert_eq!(count_masks(n, w), expected.len() as u64, "n={n} w={w}");
            }
        }
        assert_eq!(masks_of_width(64, 64).collect::<Vec<_>>(), [u64::MAX]);
        assert_eq!(masks_of_width(64, 1).count(), 64);
    }

    #[test]
    fn numa_sets_show_and_iterate_ids() {
        let set = NumaSet::from_ids([5, 0, 2]);
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 2, 5]);
        assert_eq!(set.to_string(), "{0,2,5}");
        assert!(set.contains(2) && !set.contains(1) && !set.contains(99));
        assert_eq!(set.len(), 3);
    }
}
